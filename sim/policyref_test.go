package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/policyfile"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/wire"
)

const (
	policyExample   = "../examples/policy/checkout.yaml"
	policyScenario  = "../examples/policy/storm.yaml"
	decisionScripts = 3000 // requests driven per dependency
)

// TestPolicyFileSameDecisions loads one policy file into the production
// client (policyfile's Client.NewRetrier) and into the simulator's client
// (a scenario whose client references the file, built as a run builds it)
// and drives both with the same sequence of outcomes and the same random
// samples: they must make the same decision at every step. Each dependency
// of the example is checked: db (a preset with overrides, a token bucket,
// a breaker, an attempt timeout), payments (aws-2026: deaf to signals,
// pushback honoured) and search (hedged, a window budget).
func TestPolicyFileSameDecisions(t *testing.T) {
	pf, err := policyfile.Load(policyExample)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(policyExample)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, c := range pf.Clients {
		t.Run(c.Dependency, func(t *testing.T) {
			path := policyScenario // db: the shipped example, by a relative path
			if c.Dependency != "db" {
				path = filepath.Join(t.TempDir(), "s.yaml")
				scen := fmt.Sprintf("name: same\nclients:\n  - name: checkout\n    target: %[1]s\n    arrivals: {rate: 10}\n"+
					"    policy_file: %[2]q\n    dependency: %[1]s\nservices:\n  - name: %[1]s\n    service_time: {mean: 10ms}\n", c.Dependency, abs)
				if err := os.WriteFile(path, []byte(scen), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f, err := scenario.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			sc := f.Runs[0].Scenario.WithDefaults()
			w, err := newWorld(sc, nil)
			if err != nil {
				t.Fatal(err)
			}
			simulated := w.edges[w.clients[0].edge].retriers[0]

			// Production: the loader's retrier. Its breaker's jitter is
			// a random sample too: it comes from the stream the
			// simulator gives this client's breaker.
			pc, err := pf.Client(c.Dependency)
			if err != nil {
				t.Fatal(err)
			}
			var opts []retry.Option
			if pc.Breaker != nil {
				rng := engine.Stream(sc.Seed, streamID("breaker", "checkout", "0"))
				b, err := pc.NewBreaker(breaker.WithRand(rng.Float64))
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, retry.WithBreaker(b))
			}
			production, err := pc.NewRetrier(opts...)
			if err != nil {
				t.Fatal(err)
			}
			if simulated == production {
				t.Fatal("one retrier, not two")
			}

			hedged := pc.Policy.Hedge != nil
			got, want := drive(simulated, hedged), drive(production, hedged)
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("step %d: the simulator decides %q, production %q (steps before agree)", i, got[i], want[i])
				}
			}
			if len(got) != len(want) {
				t.Fatalf("the simulator took %d steps, production %d", len(got), len(want))
			}
			if simulated.NeedsClock() != production.NeedsClock() {
				t.Errorf("NeedsClock: simulator %v, production %v", simulated.NeedsClock(), production.NeedsClock())
			}
			counts := map[string]int{}
			for _, s := range want {
				k, _, _ := strings.Cut(s, "|")
				counts[k]++
			}
			for k, v := range counts {
				seen[k] += v
			}
			t.Logf("%d steps: %v", len(want), counts)
			// Not a vacuous agreement: the script made both retry and
			// give up for several reasons.
			reasons := 0
			for k := range counts {
				if strings.HasPrefix(k, "gave-up:") {
					reasons++
				}
			}
			if counts["retry"]+counts["hedge"] == 0 || counts["success"] == 0 || reasons < 2 {
				t.Errorf("the script exercised too little: %v", counts)
			}
		})
	}
	// Across the dependencies, the mechanisms the file configures acted.
	for _, k := range []string{"hedge", "retry", "gave-up:" + retry.ErrBudgetExhausted.Error(),
		"gave-up:" + retry.ErrBreakerOpen.Error(), "gave-up:" + retry.ErrServerSaidStop.Error(),
		"gave-up:" + retry.ErrAttemptsExhausted.Error(), "gave-up:" + retry.ErrDeadline.Error()} {
		if seen[k] == 0 {
			t.Errorf("no step %q in any dependency's script (%v)", k, seen)
		}
	}
}

// outcome is how one scripted attempt ends: after took, with a class and a
// signal.
type outcome struct {
	took time.Duration
	cls  retry.Class
	sig  retry.Signal
}

// script gives the outcomes of attempts by phase of the run (the request's
// index): healthy, an outage (timeouts), throttling with hints (some bad),
// overload with signals, a brownout of errors, healthy again.
type script struct {
	rng *rand.Rand
}

func (s *script) next(i int) outcome {
	r := s.rng
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.IntN(hi-lo+1)) * time.Millisecond }
	switch phase := i * 6 / decisionScripts; phase {
	case 1: // outage
		if r.Float64() < 0.95 {
			return outcome{took: 300 * time.Millisecond, cls: retry.Timeout}
		}
	case 2: // throttling, with Retry-After hints
		if r.Float64() < 0.6 {
			sig := retry.Signal{HasPushback: true, Pushback: ms(0, 15000)}
			if r.Float64() < 0.05 {
				sig = retry.Signal{BadPushback: true}
			}
			return outcome{took: ms(1, 20), cls: retry.Throttling, sig: sig}
		}
	case 3: // overload: instance (retry elsewhere) or service (do not)
		switch x := r.Float64(); {
		case x < 0.4:
			return outcome{took: ms(1, 5), cls: retry.Transient, sig: retry.Signal{Overload: wire.OverloadInstance, HasPushback: true, Pushback: time.Second}}
		case x < 0.5:
			return outcome{took: ms(1, 5), cls: retry.ServiceOverloaded, sig: retry.Signal{Overload: wire.OverloadService}}
		case x < 0.55:
			return outcome{took: ms(1, 5), cls: retry.RetriesExhausted, sig: retry.Signal{Exhausted: true}}
		}
	case 4: // brownout
		switch x := r.Float64(); {
		case x < 0.5:
			return outcome{took: ms(5, 200), cls: retry.Transient}
		case x < 0.52:
			return outcome{took: ms(5, 50), cls: retry.NeverRetry}
		}
	default: // healthy
		if r.Float64() < 0.05 {
			return outcome{took: ms(5, 100), cls: retry.Transient}
		}
	}
	return outcome{took: ms(5, 80), cls: retry.Success}
}

// drive runs decisionScripts requests through r, one after the other, with
// outcomes and samples from a fixed seed, and returns every decision r
// made, one string per step.
func drive(r *retry.Retrier, hedged bool) []string {
	s := &script{rng: rand.New(rand.NewPCG(7, 11))}
	samples := rand.New(rand.NewPCG(13, 17))
	var trace []string
	now := time.Unix(1_700_000_000, 0)
	for i := range decisionScripts {
		now = now.Add(time.Duration(1+s.rng.IntN(40)) * time.Millisecond)
		var deadline time.Time
		if s.rng.IntN(2) == 0 {
			deadline = now.Add(time.Duration(50+s.rng.IntN(3000)) * time.Millisecond)
		}
		if hedged {
			now = driveHedged(r, s, i, now, deadline, &trace)
			continue
		}
		c := r.StartAt(now, deadline)
		for {
			if !r.AllowAt(now, &c) {
				trace = append(trace, fmt.Sprintf("gave-up:%v|attempt %d", retry.ErrBreakerOpen, c.Attempt()))
				break
			}
			o := s.next(i)
			now = now.Add(o.took)
			d := r.EndAt(now, &c, o.cls, o.sig, samples.Float64())
			switch {
			case d.Retry:
				trace = append(trace, fmt.Sprintf("retry|attempt %d delay %v", c.Attempt(), d.Delay))
				now = now.Add(d.Delay)
				r.NextAt(now, &c)
				continue
			case d.Reason == nil:
				trace = append(trace, fmt.Sprintf("success|attempt %d", c.Attempt()))
			default:
				trace = append(trace, fmt.Sprintf("gave-up:%v|attempt %d", d.Reason, c.Attempt()))
			}
			break
		}
	}
	return trace
}

// driveHedged runs request i as a hedged call: copies go out when the
// retrier says one is due, each ends after its scripted time, the first
// success or a fatal failure ends the call and the rest are cancelled. It
// returns the time the call ended.
func driveHedged(r *retry.Retrier, s *script, i int, now, deadline time.Time, trace *[]string) time.Time {
	h, ok := r.HedgeStartAt(now, deadline)
	if !ok {
		*trace = append(*trace, fmt.Sprintf("gave-up:%v|attempt 0", retry.ErrBreakerOpen))
		return now
	}
	type copyEnd struct {
		n   int
		at  time.Time
		out outcome
	}
	first := s.next(i)
	flight := []copyEnd{{1, now.Add(first.took), first}}
	for {
		// The earliest copy to end, and whether a hedge is due before it.
		e := 0
		for j := range flight {
			if flight[j].at.Before(flight[e].at) {
				e = j
			}
		}
		if next, more := h.Next(); more && (len(flight) == 0 || next.Before(flight[e].at)) {
			now = next
			n, d := r.HedgeAt(now, &h)
			*trace = append(*trace, fmt.Sprintf("hedge|%d at %v", n, now.UnixNano()))
			if n > 0 {
				o := s.next(i)
				flight = append(flight, copyEnd{n, now.Add(o.took), o})
			}
			if d.Done {
				*trace = append(*trace, fmt.Sprintf("gave-up:%v|attempt %d", d.Reason, h.Sent()))
				return now
			}
			continue
		}
		if len(flight) == 0 {
			*trace = append(*trace, "stuck|nothing in flight and no hedge due")
			return now
		}
		ce := flight[e]
		flight = append(flight[:e], flight[e+1:]...)
		now = ce.at
		d := r.HedgeEndAt(now, &h, ce.n, ce.out.cls, ce.out.sig)
		if !d.Done {
			continue
		}
		for _, rest := range flight {
			r.HedgeCancelAt(now, &h, rest.n)
		}
		if d.Reason == nil {
			*trace = append(*trace, fmt.Sprintf("success|attempt %d of %d", ce.n, h.Sent()))
		} else {
			*trace = append(*trace, fmt.Sprintf("gave-up:%v|attempt %d", d.Reason, h.Sent()))
		}
		return now
	}
}

// TestPolicyFileExample: what docs/policy.md says of
// examples/policy/storm.yaml: with the policy file the outage is over
// within 5 s of its end; the naive loop in its place stays metastable.
func TestPolicyFileExample(t *testing.T) {
	f, err := scenario.Load(policyScenario)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"checkout-policy": "recovered", "naive": "metastable"}
	for _, run := range f.Runs {
		r := mustRun(t, run.Scenario, run.Name)
		if r.Verdict != want[run.Name] {
			t.Errorf("run %s: %s, want %s", run.Name, r.Verdict, want[run.Name])
		}
		if run.Name == "checkout-policy" && (r.RecoveryS == nil || *r.RecoveryS > 5) {
			t.Errorf("run %s recovered after %v s, want within 5 s", run.Name, r.RecoveryS)
		}
	}
}
