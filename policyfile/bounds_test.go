package policyfile_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/policyfile"
)

// Every duration and every number an operator can type is bounded: past
// its bound the file is refused, with the line and the bound in the
// error; a negative value is refused too (by this package or by the one
// that uses the value); the bound itself is taken wherever the field's own
// rules allow it.
func TestBounds(t *testing.T) {
	// Each case is a file with one value to try, written %s.
	type tc struct {
		file string
		line int
		// max is the largest value the file takes; tooBig and negative
		// are refused.
		max, tooBig, negative string
	}
	dur := func(file string, line int) tc { return tc{file, line, `"1h"`, `"1000000h"`, `"-1s"`} }
	tests := map[string]tc{
		"attempt_timeout":                   dur("clients:\n  db:\n    attempt_timeout: %s\n", 3),
		"min_attempt_time":                  dur("clients:\n  db:\n    min_attempt_time: %s\n", 3),
		"backoff.base":                      dur("clients:\n  db:\n    backoff: {kind: constant, base: %s}\n", 3),
		"backoff.cap":                       dur("clients:\n  db:\n    backoff: {kind: full-jitter, cap: %s}\n", 3),
		"pushback.max":                      dur("clients:\n  db:\n    pushback: {max: %s}\n", 3),
		"pushback.max_extra":                dur("clients:\n  db:\n    pushback: {max_extra: %s}\n", 3),
		"hedge.delay":                       dur("clients:\n  db:\n    hedge: {delay: %s}\n", 3),
		"budget.window":                     dur("clients:\n  db:\n    budget: {kind: window, ratio: 0.1, window: %s}\n", 3),
		"breaker.delay":                     dur("clients:\n  db:\n    breaker: {delay: %s}\n", 3),
		"breaker.window":                    dur("clients:\n  db:\n    breaker: {mode: rate, window: %s}\n", 3),
		"server.max_timeout":                dur("server:\n  max_timeout: %s\n", 2),
		"server.retry_after":                dur("server:\n  retry_after: %s\n", 2),
		"server.queue.codel_interval":       dur("server:\n  queue: {codel_interval: %s}\n", 2),
		"server.supersede.ttl":              dur("server:\n  supersede: {ttl: %s}\n", 2),
		"max_attempts":                      {"clients:\n  db:\n    max_attempts: %s\n", 3, "100", "1000000000", "-1"},
		"breaker.failures":                  {"clients:\n  db:\n    breaker: {failures: %s}\n", 3, "1000000", "1000001", "-1"},
		"breaker.min_calls":                 {"clients:\n  db:\n    breaker: {mode: rate, min_calls: %s}\n", 3, "1000000", "99999999999", "-5"},
		"budget.min_concurrency":            {"clients:\n  db:\n    budget: {kind: concurrency, min_concurrency: %s}\n", 3, "1000000", "1000001", "-3"},
		"budget.floor":                      {"clients:\n  db:\n    budget: {kind: window, floor: %s}\n", 3, "1000000", "1e12", "-1"},
		"server.queue.capacity":             {"server:\n  queue: {capacity: %s}\n", 2, "1000000", "1000001", "-1"},
		"server.limit.limit":                {"server:\n  limit: {kind: fixed, limit: %s}\n", 2, "1000000", "2000000", "-1"},
		"server.supersede.max_keys":         {"server:\n  supersede: {max_keys: %s}\n", 2, "1000000", "1000001", "-1"},
		"server.supersede.max_replay_bytes": {"server:\n  supersede: {max_replay_bytes: %s}\n", 2, fmt.Sprint(policyfile.MaxBytes), fmt.Sprint(policyfile.MaxBytes + 1), "-1"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := policyfile.Parse("p.yaml", []byte(fmt.Sprintf(tt.file, tt.max))); err != nil {
				t.Errorf("%s: %s refused: %v", name, tt.max, err)
			}
			for _, bad := range []string{tt.tooBig, tt.negative} {
				_, err := policyfile.Parse("p.yaml", []byte(fmt.Sprintf(tt.file, bad)))
				if err == nil {
					t.Errorf("%s: %s accepted", name, bad)
					continue
				}
				if want := fmt.Sprintf("p.yaml:%d:", tt.line); !strings.HasPrefix(err.Error(), want) {
					t.Errorf("%s: %s: %v; want an error at %s", name, bad, err, want)
				}
			}
		})
	}
	_, err := policyfile.Parse("p.yaml", []byte("server:\n  max_timeout: 1000000h\n"))
	if want := `p.yaml:2: server.max_timeout: 1000000h is more than 1h0m0s: a duration in a policy file is at most 1h0m0s (MaxDuration)`; err == nil || err.Error() != want {
		t.Errorf("got %v; want %s", err, want)
	}
}
