package lab

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/engine"
)

// roleProc is a role run in process by RoleMain, driven like the
// orchestrator drives a role process.
type roleProc struct {
	role   string
	addr   string
	ctl    *io.PipeWriter
	done   chan error
	result string
}

// startRole writes cfg, starts RoleMain in a goroutine and waits for its
// ready line.
func startRole(t *testing.T, role string, cfg any, dir string) *roleProc {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.json", role, time.Now().UnixNano()))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var common struct {
		Result string `json:"result"`
	}
	json.Unmarshal(data, &common)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &roleProc{role: role, ctl: inW, done: make(chan error, 1), result: common.Result}
	go func() {
		r.done <- RoleMain(t.Context(), role, []string{"--config", path}, inR, outW)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadBytes('\n')
	if err != nil {
		t.Fatalf("%s: no ready line: %v (RoleMain: %v)", role, err, <-r.done)
	}
	go io.Copy(io.Discard, outR)
	var rl readyLine
	if err := json.Unmarshal(line, &rl); err != nil {
		t.Fatalf("%s: ready line %q: %v", role, line, err)
	}
	r.addr = rl.Addr
	t.Cleanup(func() {
		inW.Close()
		<-r.done
	})
	return r
}

func (r *roleProc) start(t0 time.Time) { fmt.Fprintf(r.ctl, "start %d\n", t0.UnixNano()) }

// stop sends "stop", waits for RoleMain and reads the result file.
func (r *roleProc) stop(t *testing.T) roleResult {
	t.Helper()
	fmt.Fprintln(r.ctl, "stop")
	r.ctl.Close()
	if err := <-r.done; err != nil {
		t.Fatalf("%s: %v", r.role, err)
	}
	r.done <- nil // for the cleanup
	data, err := os.ReadFile(r.result)
	if err != nil {
		t.Fatal(err)
	}
	var res roleResult
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if res.Service == nil {
		t.Fatalf("%s: no service in the result", r.role)
	}
	return res
}

// streamFor is the arrival stream the load generator draws from.
func streamFor(c LoadgenConfig) engine.Rand {
	return engine.Stream(c.Seed, streamID("client", c.Name, "arrivals"))
}

func TestRoleMainErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"role": "backend", "bogus": 1}`), 0o644)
	tests := []struct {
		role string
		args []string
	}{
		{"nope", []string{"--config", bad}},
		{RoleBackend, nil},
		{RoleBackend, []string{"--config", filepath.Join(dir, "missing.json")}},
		{RoleBackend, []string{"--config", bad}},
		{RoleProxy, []string{"--config", bad, "extra"}},
	}
	for _, tt := range tests {
		if err := RoleMain(t.Context(), tt.role, tt.args, eofReader{}, io.Discard); err == nil {
			t.Errorf("RoleMain(%s, %q) succeeded", tt.role, tt.args)
		}
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
