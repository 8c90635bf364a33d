package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/fleet"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/redistest"
)

// clearFleetEnv makes sure the developer's environment does not leak in.
func clearFleetEnv(t *testing.T) {
	for _, k := range []string{fleet.EnvAddr, fleet.EnvDeployment, fleet.EnvMaster, fleet.EnvUser, fleet.EnvPassword, fleet.EnvPasswordFile,
		fleet.EnvSentinelUser, fleet.EnvSentinelPassword, fleet.EnvSentinelPassFile, fleet.EnvTLS, fleet.EnvTLSCA, fleet.EnvTLSCert, fleet.EnvTLSKey, fleet.EnvTLSServerName} {
		t.Setenv(k, "")
	}
}

func TestFleetSetShow(t *testing.T) {
	clearFleetEnv(t)
	srv := redistest.Start(t)
	addr := "--addr=" + srv.Addr()

	code, out, errs := runCmd(t, t.Context(), "fleet", "set", "--retries-off", "--shed", "0.25", addr)
	if code != exitOK {
		t.Fatalf("set: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "retries OFF") || !strings.Contains(out, "shedding 25% of traffic") || !strings.Contains(out, "version 1") {
		t.Errorf("set printed %q", out)
	}

	// A budget in use, so that show has a level to print.
	rdb := redis.NewClient(fleet.ClientOptions(srv.Addr(), "", 0))
	defer rdb.Close()
	spec, _ := budget.Preset("aws-2026")
	b, err := fleet.New(t.Context(), rdb, fleet.Config{Key: "default", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	// The address from the environment.
	t.Setenv("STORMGUARD_REDIS_ADDR", srv.Addr())
	code, out, errs = runCmd(t, t.Context(), "fleet", "show")
	if code != exitOK {
		t.Fatalf("show: exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"Redis " + srv.Addr(),
		`Dials "default": retries OFF, shedding 25% of traffic, no limit override (version 1`,
		// A new budget: its pool starts empty.
		`Budget "default": token bucket, 0 of 500 tokens in the pool (1 live process, 0 waiting for tokens)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}

	code, out, errs = runCmd(t, t.Context(), "fleet", "set", "--retries-off=false", "--limit", "40", "--json")
	if code != exitOK {
		t.Fatalf("set --json: exit %d: %s", code, errs)
	}
	var set struct {
		Dials fleet.DialsState `json:"dials"`
	}
	if err := json.Unmarshal([]byte(out), &set); err != nil {
		t.Fatal(err)
	}
	if set.Dials.RetriesOff || set.Dials.ShedFraction != 0.25 || set.Dials.LimitOverride != 40 || set.Dials.Version != 2 {
		t.Errorf("set --json: %+v", set.Dials)
	}

	code, out, errs = runCmd(t, t.Context(), "fleet", "show", "--json", "--budget", "other", "--dials", "other")
	if code != exitOK {
		t.Fatalf("show --json: exit %d: %s", code, errs)
	}
	var shown struct {
		Addr   string           `json:"addr"`
		Dials  fleet.DialsState `json:"dials"`
		Budget fleet.Level      `json:"budget"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Addr != srv.Addr() || shown.Dials.Version != 0 || shown.Budget.Exists || shown.Budget.Key != "other" {
		t.Errorf("show --json of unused names: %+v", shown)
	}
}

func TestFleetPasswordFromEnvironment(t *testing.T) {
	clearFleetEnv(t)
	srv := redistest.Start(t, "--requirepass", "s3cret")
	t.Setenv("STORMGUARD_REDIS_ADDR", srv.Addr())
	code, _, errs := runCmd(t, t.Context(), "fleet", "show")
	if code != exitError || !strings.Contains(errs, "requires authentication") || !strings.Contains(errs, "NOAUTH") || !strings.Contains(errs, "--password-file") {
		t.Errorf("without the password: exit %d: %s", code, errs)
	}
	t.Setenv("STORMGUARD_REDIS_PASSWORD", "s3cret")
	if code, _, errs := runCmd(t, t.Context(), "fleet", "show"); code != exitOK || errs != "" {
		t.Errorf("with the password from the environment: exit %d: %s", code, errs)
	}
	t.Setenv("STORMGUARD_REDIS_PASSWORD", "")
	code, _, errs = runCmd(t, t.Context(), "fleet", "set", "--shed=0", "--password", "s3cret")
	if code != exitUsage || !strings.Contains(errs, "--password is not accepted") || !strings.Contains(errs, "process list") {
		t.Errorf("with the password flag: exit %d, stderr %q; want a usage error that says why", code, errs)
	}
	// From a file named in the environment.
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STORMGUARD_REDIS_PASSWORD_FILE", pw)
	if code, _, errs := runCmd(t, t.Context(), "fleet", "show"); code != exitOK || errs != "" {
		t.Errorf("with the password file from the environment: exit %d: %s", code, errs)
	}
}

func TestFleetPasswordFile(t *testing.T) {
	clearFleetEnv(t)
	srv := redistest.Start(t, "--requirepass", "s3cret")
	t.Setenv("STORMGUARD_REDIS_ADDR", srv.Addr())
	t.Setenv("STORMGUARD_REDIS_PASSWORD", "wrong") // the file wins
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("pw", "s3cret\n", 0o600)
	if code, _, errs := runCmd(t, t.Context(), "fleet", "show", "--password-file", good); code != exitOK || errs != "" {
		t.Errorf("--password-file: exit %d, stderr %q", code, errs)
	}
	crlf := write("pw-crlf", "s3cret\r\nsecond line\n", 0o600)
	if code, _, errs := runCmd(t, t.Context(), "fleet", "show", "--password-file", crlf); code != exitOK {
		t.Errorf("--password-file with CRLF: exit %d, stderr %q", code, errs)
	}
	open := write("pw-open", "s3cret", 0o644)
	if code, _, errs := runCmd(t, t.Context(), "fleet", "show", "--password-file", open); code != exitOK || !strings.Contains(errs, "can be read by other users") {
		t.Errorf("a password file others can read: exit %d, stderr %q; want success and a warning", code, errs)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--password-file", filepath.Join(dir, "missing")}, exitUsage, "STORMGUARD_REDIS_PASSWORD_FILE: open " + filepath.Join(dir, "missing")},
		{[]string{"--password-file", write("empty", "\n", 0o600)}, exitUsage, "the first line is empty"},
		{[]string{"--password-file", dir}, exitUsage, "not a regular file"},
		{[]string{"--password-file", write("big", strings.Repeat("x", 70<<10), 0o600)}, exitUsage, "longer than 65536 bytes"},
		{[]string{"--password-file", good, "--password", "s3cret"}, exitUsage, "--password is not accepted"},
		{[]string{"--tls-cert", good}, exitUsage, "both the certificate and the key"},
		{[]string{"--addr", "a:1,b:2"}, exitUsage, "2 addresses for one server"},
		{[]string{"--deployment", "sentinel"}, exitUsage, "needs the master's name"},
	} {
		code, _, errs := runCmd(t, t.Context(), append([]string{"fleet", "show"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and one line with %q", c.args, code, errs, c.code, c.want)
		}
	}
}

func TestFleetUsage(t *testing.T) {
	clearFleetEnv(t)
	for _, args := range [][]string{
		{"fleet"},
		{"fleet", "flip"},
		{"fleet", "set"},
		{"fleet", "set", "--shed", "1.5"},
		{"fleet", "set", "--limit", "-1"},
		{"fleet", "set", "--shed", "x"},
		{"fleet", "show", "extra"},
		{"fleet", "show", "--timeout", "0s"},
		{"fleet", "show", "--timeout", "-1s"},
		{"fleet", "show", "--timeout", "2m"},
		{"fleet", "show", "--nope"},
	} {
		if code, _, errs := runCmd(t, t.Context(), args...); code != exitUsage || errs == "" {
			t.Errorf("%q: exit %d, stderr %q; want a usage error", args, code, errs)
		}
	}
	for _, args := range [][]string{{"fleet", "--help"}, {"fleet", "show", "-h"}, {"fleet", "set", "--help"}} {
		code, out, _ := runCmd(t, t.Context(), args...)
		if code != exitOK || !strings.Contains(out, "STORMGUARD_REDIS_ADDR") || !strings.Contains(out, "STORMGUARD_REDIS_PASSWORD") || !strings.Contains(out, "--password-file") || !strings.Contains(out, "process list") || !strings.Contains(out, "--deployment") || !strings.Contains(out, "--tls-ca") {
			t.Errorf("%q: exit %d:\n%s", args, code, out)
		}
	}
}

func TestFleetUnreachable(t *testing.T) {
	clearFleetEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	start := time.Now()
	code, _, errs := runCmd(t, t.Context(), "fleet", "show", "--addr", addr, "--timeout", "300ms")
	if code != exitError || !strings.Contains(errs, "cannot reach Redis at "+addr) {
		t.Errorf("exit %d: %s", code, errs)
	}
	if d, bound := time.Since(start), hostspeed.Scale(2*time.Second); d > bound {
		t.Errorf("took %v to give up, more than %v", d, bound)
	}
}

// TestFleetDeployments: show and set through a Redis Cluster, Sentinel, and
// TLS with a client certificate as an ACL user, from flags and from the
// environment.
func TestFleetDeployments(t *testing.T) {
	clearFleetEnv(t)
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3)
		addrs := strings.Join(c.Addrs(), ",")
		if code, out, errs := runCmd(t, t.Context(), "fleet", "set", "--shed", "0.5", "--deployment", "cluster", "--addr", addrs); code != exitOK || !strings.Contains(out, "shedding 50%") {
			t.Fatalf("set on a cluster: exit %d: %s%s", code, out, errs)
		}
		code, out, errs := runCmd(t, t.Context(), "fleet", "show", "--deployment", "cluster", "--addr", addrs)
		if code != exitOK || !strings.Contains(out, "(cluster)") || !strings.Contains(out, "shedding 50%") {
			t.Errorf("show on a cluster: exit %d: %s%s", code, out, errs)
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		set := redistest.StartSentinel(t)
		t.Setenv(fleet.EnvAddr, strings.Join(set.Addrs(), ","))
		t.Setenv(fleet.EnvDeployment, "sentinel")
		t.Setenv(fleet.EnvMaster, set.Name)
		if code, out, errs := runCmd(t, t.Context(), "fleet", "set", "--retries-off"); code != exitOK || !strings.Contains(out, "retries OFF") {
			t.Fatalf("set through Sentinel: exit %d: %s%s", code, out, errs)
		}
		if got := set.Master.MustDo("HGET", "stormguard:dials:{default}", "retries_off"); got != "1" {
			t.Errorf("the master holds retries_off %q", got)
		}
	})
	t.Run("tls", func(t *testing.T) {
		certs := redistest.NewCerts(t)
		srv := redistest.StartTLS(t, certs, true)
		srv.MustDo("ACL", "SETUSER", "ops", "on", ">ops-pw", "~stormguard:*", "&stormguard:*", "+@all")
		pw := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(pw, []byte("ops-pw\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"--addr", srv.TLSAddr(), "--user", "ops", "--password-file", pw,
			"--tls-ca", certs.CAFile, "--tls-cert", certs.ClientCert, "--tls-key", certs.ClientKey}
		code, out, errs := runCmd(t, t.Context(), append([]string{"fleet", "set", "--limit", "9"}, args...)...)
		if code != exitOK || !strings.Contains(out, "pinned to 9") {
			t.Fatalf("set over TLS: exit %d: %s%s", code, out, errs)
		}
		// Without the client certificate the server refuses.
		code, _, errs = runCmd(t, t.Context(), append([]string{"fleet", "show"}, args[:6]...)...)
		if code != exitError {
			t.Errorf("over TLS without a client certificate: exit %d: %s", code, errs)
		}
	})
}
