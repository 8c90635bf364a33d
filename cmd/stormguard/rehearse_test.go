package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The help tells the truth about the limits: the defaults and ceilings
// it states are the package's.
func TestRehearseHelp(t *testing.T) {
	code, out, _ := runCmd(t, t.Context(), "help", "rehearse")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--dry-run", "--max-rate R", "(default 500, at most 3000)", "(default 2m, at most 10m)", "--allow-remote HOST", "--shard I/N", "rehearse merge", "130 interrupted"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if _, out, _ := runCmd(t, t.Context(), "--help"); !strings.Contains(out, "stormguard rehearse FILE") {
		t.Error("the main help does not list rehearse")
	}
}

func TestRehearseRefuses(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	os.WriteFile(file, []byte(`
name: r
duration: 5s
clients: [{name: c, target: s, arrivals: {kind: poisson, rate: 10}}]
services: [{name: s, target: "http://192.0.2.7:80/"}]
`), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"rehearse", file, "--dry-run"}, 2, "--allow-remote 192.0.2.7"},
		{[]string{"rehearse", file, "--max-rate", "5000"}, 2, "not within (0, 3000]"},
		{[]string{"rehearse", file, "--max-duration", "11m"}, 2, "not within (0, 10m0s]"},
		{[]string{"rehearse", file, "--shard", "1/2"}, 2, "--shard writes its part with --out DIR"},
		{[]string{"rehearse"}, 2, "rehearse takes one FILE"},
		{[]string{"sim", file}, 2, "run this file with stormguard rehearse"},
		{[]string{"rehearse", "merge"}, 2, "needs the parts"},
	} {
		code, _, errs := runCmd(t, t.Context(), c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
	code, out, errs := runCmd(t, t.Context(), "rehearse", file, "--dry-run", "--allow-remote", "192.0.2.7")
	if code != 0 || !strings.Contains(out, "nothing sent") || !strings.Contains(out, "sends to loopback and 192.0.2.7 only") {
		t.Errorf("allowed: exit %d, %s %s", code, out, errs)
	}
}

// A whole rehearsal through the command, with its report; then as two
// shards and their merge.
func TestRehearseCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(`
name: r
duration: 2s
clients: [{name: c, target: s, arrivals: {kind: poisson, rate: 50}, policy: stormguard}]
services: [{name: s, target: "%s/"}]
`, srv.URL)), 0o644)
	out := filepath.Join(dir, "out")
	code, stdout, errs := runCmd(t, t.Context(), "rehearse", file, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"r: 1 runs of 2 s against the real service", "stable", "client c: sent", "(adds up)", "the machine:"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"index.html", "summary.json", "rehearse.json", "r.csv"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	page, _ := os.ReadFile(filepath.Join(out, "index.html"))
	if !strings.Contains(string(page), "The rehearsal") {
		t.Error("the page has no rehearsal section")
	}
	parts := filepath.Join(dir, "parts")
	at := strconv.FormatFloat(float64(time.Now().Add(2*time.Second).UnixNano())/1e9, 'f', 3, 64)
	var wg sync.WaitGroup
	for _, s := range []string{"1/2", "2/2"} {
		wg.Go(func() {
			if code, _, errs := runCmd(t, t.Context(), "rehearse", file, "--shard", s, "--start-at", at, "--out", parts); code != 0 {
				t.Errorf("shard %s: exit %d: %s", s, code, errs)
			}
		})
	}
	wg.Wait()
	code, stdout, errs = runCmd(t, t.Context(), "rehearse", "merge", parts)
	if code != 0 || !strings.Contains(stdout, "client c: sent") {
		t.Errorf("merge: exit %d: %s %s", code, stdout, errs)
	}
}
