package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The example, as `go run ./examples/rehearse` runs it, on free ports: its
// runbook run comes back once the admin endpoint's shed ends (the kill
// switch works). With STORMGUARD_REHEARSE_LONG=1 its other two runs too:
// naive stays down after the hold (the storm outlives its trigger; 618 of
// 3,288 ok when measured), stormguard recovers (9.6 s after the hold).
func TestExample(t *testing.T) {
	if testing.Short() {
		t.Skip("a rehearsal of real time against real servers: not in -short")
	}
	data, err := os.ReadFile("storm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, port := range []string{"18080", "18081", "18082"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, free, _ := net.SplitHostPort(ln.Addr().String())
		ln.Close()
		text = strings.ReplaceAll(text, "127.0.0.1:"+port, "127.0.0.1:"+free)
	}
	long := os.Getenv("STORMGUARD_REHEARSE_LONG") == "1"
	if !long {
		i := strings.Index(text, "  - name: naive\n")
		j := strings.Index(text, "  - name: shed\n")
		text = text[:i] + text[j:]
	}
	file := filepath.Join(t.TempDir(), "storm.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"--file", file}, &out); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if strings.Contains(out.String(), ": inconclusive") {
		t.Skip("WARNING: a run was inconclusive (its host was starved); its verdict is not checked")
	}
	want := []string{"shed: recovered", "through the admin endpoint", "set back to what they were"}
	if long {
		want = append(want, "naive: metastable", "stormguard: recovered")
	}
	for _, want := range want {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the example's output lacks %q", want)
		}
	}
}
