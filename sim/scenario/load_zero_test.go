package scenario

import (
	"strings"
	"testing"
)

// An explicit zero where zero means nothing is refused at its line, in the
// base scenario and in a run's set; the key left out still takes the
// default, and a zero where zero means something (a deadline: none) is
// accepted.
func TestExplicitZero(t *testing.T) {
	const base = `name: z
duration: 30s
clients:
  - name: app
    target: db
    arrivals: {kind: poisson, rate: 10}
services:
  - name: db
    service_time: {kind: constant, mean: 10ms}
`
	tests := []struct {
		name string
		edit func(string) string
		want string // "" means the file loads
	}{
		{"defaults left out", func(s string) string { return s }, ""},
		{"duration 0s", func(s string) string { return strings.Replace(s, "duration: 30s", "duration: 0s", 1) },
			"z.yaml:2: duration: 0s means nothing here and would silently become the default (60s)"},
		{"bin 0ms", func(s string) string { return s + "bin: 0ms\n" }, "z.yaml:10: bin: 0ms means nothing"},
		{"workers 0", func(s string) string { return s[:len(s)-1] + "\n    workers: 0\n" },
			"z.yaml:10: services.db.workers: 0 means nothing here and would silently become the default (1)"},
		{"client timeout 0ms", func(s string) string {
			return strings.Replace(s, "    target: db\n", "    target: db\n    timeout: 0ms\n", 1)
		}, "z.yaml:6: clients.app.timeout: 0ms means nothing"},
		{"processes 0.0", func(s string) string {
			return strings.Replace(s, "    target: db\n", "    target: db\n    processes: 0.0\n", 1)
		}, "processes: 0.0 means nothing"},
		{"call timeout 0s", func(s string) string {
			return s[:len(s)-1] + "\n    calls: [{service: db2, timeout: 0s}]\n  - name: db2\n    service_time: {kind: constant, mean: 1ms}\n"
		}, "timeout: 0s means nothing"},
		{"a run sets workers 0", func(s string) string { return s + "runs:\n  - name: r\n    set: {services.db.workers: 0}\n" },
			"run r: services.db.workers: 0 means nothing"},
		{"deadline 0s means none", func(s string) string {
			return strings.Replace(s, "    target: db\n", "    target: db\n    deadline: 0s\n", 1)
		}, ""},
		{"workers 2", func(s string) string { return s[:len(s)-1] + "\n    workers: 2\n" }, ""},
	}
	for _, tt := range tests {
		_, err := Parse("z.yaml", []byte(tt.edit(base)))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v; want it to load", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v; want an error containing %q", tt.name, err, tt.want)
		}
	}
}
