package scenario

import (
	"strings"
	"testing"

	"github.com/stormguard/stormguard/breaker"
)

// TestBreakerSpecStops: a client's breaker takes stops (what an open
// breaker refuses) over its preset, and an unknown value is an error at its
// line, as every breaker field's is.
func TestBreakerSpecStops(t *testing.T) {
	const head = "name: x\nservices: [{name: db}]\nclients:\n  - name: app\n    target: db\n"
	for _, tc := range []struct {
		name, breaker string
		want          breaker.Scope // "" when an error is wanted
		err           string
	}{
		{"default", "{preset: rate}", "", ""},
		{"stops retries", "{preset: rate, stops: retries, failure_rate: 0.1}", breaker.StopsRetries, ""},
		{"stops calls", "{stops: calls}", breaker.StopsCalls, ""},
		{"unknown", "{preset: rate, stops: first-tries}", "", `f.yaml:6: clients.app.breaker: breaker: invalid spec: stops "first-tries" is unknown (want calls or retries)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("f.yaml", []byte(head+"    breaker: "+tc.breaker+"\n"))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b := f.Runs[0].Scenario.Clients[0].Breaker
			if b == nil || b.Stops != tc.want {
				t.Fatalf("breaker %+v, want stops %q", b, tc.want)
			}
			if got := b.WithDefaults().Stops; tc.want == "" && got != breaker.StopsCalls {
				t.Errorf("default stops = %q, want calls", got)
			}
		})
	}
}
