package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/policyfile"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/engine"
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
			f, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			sc := f.Runs[0].Scenario.withDefaults()
			w, err := newWorld(sc)
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

// TestPolicyFileRefs: what a scenario's reference to a policy file does,
// and its errors, at the scenario's lines.
func TestPolicyFileRefs(t *testing.T) {
	dir := t.TempDir()
	policy := "clients:\n  db:\n    preset: sre\n    attempt_timeout: 250ms\n    breaker: gobreaker\n  cache: naive\n"
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("clients:\n  db:\n    max_attempts: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scenario := func(client string) string {
		return "name: s\nclients:\n  - name: app\n    target: db\n    arrivals: {rate: 10}\n" + client +
			"services:\n  - name: db\n    service_time: {mean: 10ms}\n    calls:\n      - service: cache\n        policy_file: policy.yaml\n  - name: cache\n    service_time: {mean: 1ms}\n"
	}
	parse := func(t *testing.T, client string) (File, error) {
		t.Helper()
		path := filepath.Join(dir, "s.yaml")
		if err := os.WriteFile(path, []byte(scenario(client)), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load(path)
	}

	t.Run("resolved", func(t *testing.T) {
		f, err := parse(t, "    policy_file: policy.yaml\n")
		if err != nil {
			t.Fatal(err)
		}
		sre, _ := retry.Preset("sre")
		sre.AttemptTimeout = 250 * time.Millisecond
		gb, _ := breaker.Preset("gobreaker")
		for _, s := range []Scenario{f.Base, f.Runs[0].Scenario} {
			c, call := s.Clients[0], s.Services[0].Calls[0]
			tests := []struct {
				name      string
				got, want any
			}{
				{"client preset", c.Policy.Preset, "sre"},
				{"client policy", c.Policy.Policy, sre.WithDefaults()},
				{"client breaker", reflect.DeepEqual(c.Breaker.Spec, gb), true},
				{"client timeout: the attempt_timeout", c.Timeout, 250 * time.Millisecond},
				{"call: the dependency is the service called", call.Policy.Preset, "naive"},
				{"call: no breaker", call.Breaker == nil, true},
			}
			for _, tt := range tests {
				if tt.got != tt.want {
					t.Errorf("%s = %+v, want %+v", tt.name, tt.got, tt.want)
				}
			}
		}
	})

	bad := []struct {
		name   string
		client string
		want   string
	}{
		{"missing file", "    policy_file: none.yaml\n",
			"s.yaml:6: clients.app.policy_file: stat "},
		{"bad file", "    policy_file: bad.yaml\n",
			"s.yaml:6: clients.app.policy_file: " + filepath.Join(dir, "bad.yaml") + ":3: clients.db.max_attempts: 0 is not a value here"},
		{"unknown dependency", "    policy_file: policy.yaml\n    dependency: dbx\n",
			`s.yaml:7: clients.app.dependency: ` + filepath.Join(dir, "policy.yaml") + `: no client policy for dependency "dbx" (have db, cache)`},
		{"policy and policy_file", "    policy_file: policy.yaml\n    policy: naive\n",
			"s.yaml:7: clients.app.policy: the policy comes from policy_file policy.yaml"},
		{"breaker and policy_file", "    policy_file: policy.yaml\n    breaker: stormguard\n",
			"s.yaml:7: clients.app.breaker: the breaker comes from policy_file policy.yaml"},
		{"dependency alone", "    dependency: db\n",
			"s.yaml:6: clients.app.dependency: names a client block of a policy file: give policy_file too"},
		{"timeout disagrees", "    policy_file: policy.yaml\n    timeout: 1s\n",
			"s.yaml:7: clients.app.timeout: 1s is not the attempt_timeout 250ms of dependency db in policy.yaml"},
		{"not a regular file", "    policy_file: .\n",
			"s.yaml:6: clients.app.policy_file: " + dir + " is not a regular file"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.client)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}

	t.Run("a run drops the reference", func(t *testing.T) {
		f, err := parse(t, "    policy_file: policy.yaml\n"+
			"runs:\n  - name: file\n  - name: naive\n    set: {clients.app.policy_file: \"\", clients.app.policy: naive}\n")
		if err != nil {
			t.Fatal(err)
		}
		if got := []string{f.Runs[0].Scenario.Clients[0].Policy.Preset, f.Runs[1].Scenario.Clients[0].Policy.Preset}; got[0] != "sre" || got[1] != "naive" {
			t.Errorf("runs' presets = %q, want [sre naive]", got)
		}
	})
}

// TestPolicyFileExample: what docs/policy.md says of
// examples/policy/storm.yaml: with the policy file the outage is over
// within 5 s of its end; the naive loop in its place stays metastable.
func TestPolicyFileExample(t *testing.T) {
	f, err := Load(policyScenario)
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
