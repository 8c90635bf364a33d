package lab

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The fuzz targets of the lab's inter-process protocol (see protocol.go):
// whatever the bytes, a parser returns an error or a value the role or the
// orchestrator can use, and a value it accepts survives being written and
// read again.

// fuzzRole picks a role from a fuzzed byte.
func fuzzRole(b byte) string { return Roles()[int(b)%len(Roles())] }

func roleIndex(role string) byte {
	for i, r := range Roles() {
		if r == role {
			return byte(i)
		}
	}
	return 0
}

// FuzzRoleConfig: parseConfig accepts only what a role can build without
// listening or exhausting the machine, and what it accepts reads back the
// same once written.
func FuzzRoleConfig(f *testing.F) {
	for role, data := range validConfigs(f) {
		f.Add(roleIndex(role), data)
	}
	f.Add(roleIndex(RoleBackend), []byte(`{"role":"backend","bin_ns":1,"duration_ns":3600000000000000,"result":"/r","workers":1}`))
	f.Add(roleIndex(RoleLoadgen), []byte(`{"role":"loadgen","bin_ns":100000000,"duration_ns":1000000000,"result":"/r","target":"127.0.0.1:9","arrivals":{"kind":"poisson","rate":1e300},"timeout_ns":1}`))
	f.Add(roleIndex(RoleProxy), []byte(`{"role":"proxy","bin_ns":100000000,"duration_ns":1000000000,"result":"/r","target":"127.0.0.1:9","faults":[{"kind":"outage","mode":"hold","at_ns":9223372036854775807,"duration_ns":9223372036854775807}]}`))
	f.Add(roleIndex(RoleApp), []byte(`{}`))
	f.Add(roleIndex(RoleApp), []byte(`null`))
	f.Fuzz(func(t *testing.T, ri byte, data []byte) {
		role := fuzzRole(ri)
		cfg, err := parseConfig(role, data)
		if err != nil {
			return
		}
		again, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("an accepted configuration does not encode: %v", err)
		}
		cfg2, err := parseConfig(role, again)
		if err != nil {
			t.Fatalf("an accepted configuration, written again, is refused: %v\n%s", err, again)
		}
		if again2, _ := json.Marshal(cfg2); !bytes.Equal(again, again2) {
			t.Fatalf("an accepted configuration changes when written again:\n%s\n%s", again, again2)
		}
		// What newRole builds before it listens; the bins are bounded.
		switch c := cfg.(type) {
		case *LoadgenConfig:
			clk := newClock(time.Now(), c.Bin, c.Duration)
			if clk.n > int(MaxDuration/MinBin)+1 {
				t.Fatalf("%d bins", clk.n)
			}
			newLoadgen(*c, clk)
		case *ServiceConfig:
			clk := newClock(time.Now(), c.Bin, c.Duration)
			if clk.n > int(MaxDuration/MinBin)+1 {
				t.Fatalf("%d bins", clk.n)
			}
			if s, err := newService(*c, clk); err == nil {
				s.serviceTime(time.Now())
				s.failAt(time.Now())
			}
		case *ProxyConfig:
			for _, w := range c.Faults {
				w.active(0)
			}
		}
	})
}

// FuzzControlLine: a control line is accepted only in the one form the
// orchestrator writes.
func FuzzControlLine(f *testing.F) {
	for _, s := range []string{"stop", "start 1700000000000000000", "start 1", "start 0", "start -1", "start 01",
		"start 9223372036854775807", "start 9223372036854775808", "start 1 2", "stop\r", "", "start\t5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, err := parseControl(line)
		if err != nil {
			return
		}
		if got := formatControl(c); got != line {
			t.Fatalf("parseControl(%q) accepted a line that writes back as %q", line, got)
		}
		if !c.stop && c.start.UnixNano() <= 0 {
			t.Fatalf("parseControl(%q): a start at %v", line, c.start)
		}
	})
}

// FuzzReadyLine: an accepted ready line names 127.0.0.1 and a port (no
// address for the load generator), and reads back the same once written.
func FuzzReadyLine(f *testing.F) {
	for _, s := range []string{`{"addr":"127.0.0.1:8080"}` + "\n", `{"addr":""}` + "\n", `{"addr":"127.0.0.1:x"}`,
		`{"addr":"[::1]:80"}`, `{"addr":"127.0.0.1:0"}`, `{"addr":"127.0.0.1:80"} x`, `{"addr":"127.0.0.1:80","a":1}`, `{}`, `[]`} {
		f.Add(roleIndex(RoleBackend), []byte(s))
		f.Add(roleIndex(RoleLoadgen), []byte(s))
	}
	f.Fuzz(func(t *testing.T, ri byte, line []byte) {
		role := fuzzRole(ri)
		addr, err := parseReady(role, line)
		if err != nil {
			return
		}
		if role == RoleLoadgen {
			if addr != "" {
				t.Fatalf("the load generator's ready line %q gave an address %q", line, addr)
			}
		} else if !strings.HasPrefix(addr, "127.0.0.1:") || checkLoopback(addr) != nil {
			t.Fatalf("ready line %q: address %q", line, addr)
		}
		if again, err := parseReady(role, formatReady(addr)); err != nil || again != addr {
			t.Fatalf("ready line %q: %q written again reads %q, %v", line, addr, again, err)
		}
	})
}

// FuzzResultFile: a result file parseResult accepts builds a run's result
// (with the other roles' valid files) whose accounting adds up, judged by
// the simulator's rule; it never panics.
func FuzzResultFile(f *testing.F) {
	p, files := validResults(f)
	for role, data := range files {
		f.Add(roleIndex(role), data)
	}
	f.Add(roleIndex(RoleLoadgen), []byte(`{"client":{"bins":[]},"outcomes":{"sent":0}}`))
	f.Add(roleIndex(RoleBackend), []byte(`{"service":{"bins":[{},{}]},"host":{"service_nominal_ns":1,"service_measured_ns":9223372036854775807}}`))
	f.Add(roleIndex(RoleProxy), []byte(`{"proxy":{}}`))
	f.Fuzz(func(t *testing.T, ri byte, data []byte) {
		role := fuzzRole(ri)
		if role == RoleApp { // the quick plan has no app
			role = RoleBackend
		}
		if _, err := parseResult(role, data, resultBins); err != nil {
			return
		}
		mixed := map[string][]byte{}
		for k, v := range files {
			mixed[k] = v
		}
		mixed[role] = data
		outs, err := outputsFor(p, mixed)
		if err != nil {
			t.Fatalf("accepted once, refused again: %v", err)
		}
		rr, err := assemble(p, "fuzz", outs)
		if err != nil {
			t.Fatalf("assemble: %v", err)
		}
		if err := rr.Outcomes.Check(); err != nil {
			t.Fatal(err)
		}
		switch rr.Result.Verdict {
		case "stable", "recovered", "metastable", VerdictInconclusive:
		default:
			t.Fatalf("verdict %q", rr.Result.Verdict)
		}
		if rr.Host.Starved != (rr.Result.Verdict == VerdictInconclusive) {
			t.Fatalf("starved %v, verdict %q", rr.Host.Starved, rr.Result.Verdict)
		}
	})
}
