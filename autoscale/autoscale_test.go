package autoscale

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func dur(d time.Duration) *time.Duration { return &d }

// fast is a policy without stabilization either way: the metric's
// proposal, within the rate policies.
func fast(p Policy) Policy {
	p.ScaleDown = &Rules{StabilizationWindow: dur(0)}
	return p
}

func TestDecideAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		at    time.Duration
		o     Observation
		want  int
		why   string
		prop  int // the metric's proposal; 0: not checked
		label string
	}
	ready := func(n int, v float64) Observation { return Observation{n, n, v} }
	tests := []struct {
		name  string
		p     Policy
		steps []step
	}{
		{"proportional up and down", fast(Policy{Metric: CPU, Target: 0.5, Min: 1, Max: 10}), []step{
			{0, ready(2, 1.0), 4, "scale up", 4, "ceil(2 × 1.0/0.5)"},
			{15 * time.Second, ready(4, 0.25), 2, "scale down", 2, "ceil(4 × 0.5)"},
			{30 * time.Second, ready(2, 0.54), 2, "within tolerance", 2, "1.08 is within 0.1"},
			{45 * time.Second, ready(3, 0.6), 4, "scale up", 4, "ceil(3 × 1.2)"},
		}},
		// The scale-down stabilization window (300 s by default): the
		// highest proposal of the last 300 s is the fewest kept, and the
		// count found at the first evaluation is one of them.
		{"scale-down stabilization", Policy{Metric: CPU, Target: 0.5, Min: 2, Max: 100}, []step{
			{0, ready(10, 0.05), 10, "stabilized", 1, "the first count, 10, is a proposal"},
			{60 * time.Second, ready(10, 0.3), 10, "stabilized", 6, ""},
			{300 * time.Second, ready(10, 0.05), 6, "stabilized", 1, "10 is 300 s old: out; 6 of 60 s is in"},
			{360 * time.Second, ready(6, 0.05), 2, "at min", 1, "6 is out too"},
		}},
		{"scale-up stabilization", Policy{Metric: Rate, Target: 10, Max: 100,
			ScaleUp: &Rules{StabilizationWindow: dur(60 * time.Second)}}, []step{
			{0, ready(4, 20), 4, "stabilized", 8, "the first count, 4, is the lowest of the last 60 s"},
			{30 * time.Second, ready(4, 20), 4, "stabilized", 8, ""},
			{61 * time.Second, ready(4, 20), 8, "scale up", 8, "the first count is out"},
		}},
		// Default scale-up: 4 replicas or 100 % per 15 s, whichever is
		// more, counted from the start of the period.
		{"default scale-up rate", fast(Policy{Metric: Concurrency, Target: 1, Max: 1000}), []step{
			{0, ready(2, 50), 6, "scale-up limit", 100, "max(2+4, 2×2)"},
			{5 * time.Second, ready(6, 50), 6, "scale-up limit", 300, "the period began at 2"},
			{15 * time.Second, ready(6, 50), 12, "scale-up limit", 300, "the change at 0 is 15 s old: max(6+4, 12)"},
			{30 * time.Second, ready(12, 50), 24, "scale-up limit", 600, ""},
		}},
		{"select min", fast(Policy{Metric: Concurrency, Target: 1, Max: 1000,
			ScaleUp: &Rules{SelectPolicy: SelectMin}}), []step{
			{0, ready(2, 50), 4, "scale-up limit", 100, "min(2+4, 2×2)"},
			{15 * time.Second, ready(10, 50), 14, "scale-up limit", 500, "min(10+4, 20)"},
		}},
		{"scale-up disabled", fast(Policy{Metric: Concurrency, Target: 1, Max: 1000,
			ScaleUp: &Rules{SelectPolicy: SelectDisabled}}), []step{
			{0, ready(2, 50), 2, "scale-up limit", 100, ""},
			{15 * time.Second, ready(20, 0.1), 2, "scale down", 2, "down still works"},
		}},
		{"scale-down percent per minute", Policy{Metric: Rate, Target: 10, Min: 1, Max: 100,
			ScaleDown: &Rules{StabilizationWindow: dur(0), Policies: []RatePolicy{{Percent, 50, time.Minute}}}}, []step{
			{0, ready(10, 1), 5, "scale-down limit", 1, "floor(10 × 0.5)"},
			{15 * time.Second, ready(5, 1), 5, "scale-down limit", 1, "the period began at 10"},
			{60 * time.Second, ready(5, 1), 2, "scale-down limit", 1, "floor(5 × 0.5)"},
		}},
		{"scale-down pods or percent, min", Policy{Metric: Rate, Target: 10, Min: 1, Max: 100,
			ScaleDown: &Rules{StabilizationWindow: dur(0), SelectPolicy: SelectMin,
				Policies: []RatePolicy{{Pods, 3, 15 * time.Second}, {Percent, 50, 15 * time.Second}}}}, []step{
			{0, ready(40, 1), 37, "scale-down limit", 4, "the smaller change: 3 pods, not 20"},
		}},
		// Replicas that are not ready count as idle on a scale-up: the
		// replicas coming cover the load measured on the ready ones.
		{"not ready on a scale-up", fast(Policy{Metric: CPU, Target: 0.5, Max: 100}), []step{
			{0, Observation{4, 2, 1.0}, 4, "replicas coming are enough", 4, "2 × 1.0/0.5 over 4"},
			{15 * time.Second, Observation{4, 2, 1.5}, 6, "scale up", 6, "ceil(2 × 1.5/0.5)"},
		}},
		{"not ready on a scale-down", fast(Policy{Metric: Concurrency, Target: 10, Max: 100}), []step{
			{0, Observation{8, 4, 5}, 2, "scale down", 2, "ceil(4 × 0.5): the ready ones"},
		}},
		{"out of bounds at once", fast(Policy{Metric: Rate, Target: 10, Min: 3, Max: 5}), []step{
			{0, ready(40, 0), 5, "above max", 40, ""},
			{1 * time.Second, ready(1, 100), 3, "below min", 1, ""},
		}},
		{"clamped to min and max", fast(Policy{Metric: Rate, Target: 100, Min: 2, Max: 5}), []step{
			{0, ready(3, 1000), 5, "at max", 30, ""},
			{15 * time.Second, ready(5, 1), 2, "at min", 1, ""},
		}},
		{"max step over the rate policies", fast(Policy{Metric: Concurrency, Target: 10, Min: 1, Max: 100, MaxStep: 2}), []step{
			{0, ready(4, 100), 6, "max step", 40, "the policies allow 8"},
			{15 * time.Second, ready(6, 0.1), 4, "max step", 1, ""},
		}},
		{"cooldown", fast(Policy{Metric: QueueDelay, Target: 0.1, Min: 1, Max: 50, Cooldown: 30 * time.Second}), []step{
			{0, ready(2, 0.4), 6, "scale-up limit", 8, ""},
			{15 * time.Second, ready(6, 0.4), 6, "cooling down", 24, ""},
			{30 * time.Second, ready(6, 0.4), 12, "scale-up limit", 24, ""},
		}},
		{"zero replicas", fast(Policy{Metric: Rate, Target: 10, Max: 9}), []step{
			{0, Observation{0, 0, 35}, 0, "scaling disabled at zero replicas", 0, ""},
		}},
		{"no metric", fast(Policy{Metric: CPU, Target: 0.5, Max: 3}), []step{
			{0, ready(2, -1), 2, "no valid metric", 2, ""},
			{15 * time.Second, Observation{2, 0, 0.9}, 2, "no ready replica", 2, ""},
		}},
		// Slack, 2021: workers waiting on I/O show little CPU, so a CPU
		// target scales an overloaded tier down — at once without a
		// stabilization window, 300 s later with Kubernetes' default.
		{"cpu blind to waiting", fast(Policy{Metric: CPU, Target: 0.6, Min: 2, Max: 100}), []step{
			{0, ready(40, 0.05), 4, "scale down", 4, ""},
		}},
		{"cpu blind to waiting, default window", Policy{Metric: CPU, Target: 0.6, Min: 2, Max: 100}, []step{
			{0, ready(40, 0.05), 40, "stabilized", 4, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				d := a.DecideAt(t0.Add(s.at), s.o)
				if d.Replicas != s.want || d.Why != s.why || s.prop != 0 && d.Proposed != s.prop {
					t.Errorf("step %d (%s): DecideAt(%v, %+v) = %+v, want %d (%s), proposed %d",
						i, s.label, s.at, s.o, d, s.want, s.why, s.prop)
				}
			}
		})
	}
}

// The defaults are Kubernetes': scale-up 4 pods or 100 % per 15 s (max),
// no window; scale-down 100 % per 15 s, 300 s window; the readiness delay
// one interval.
func TestWithDefaults(t *testing.T) {
	p := Policy{Metric: CPU, Target: 0.5, Max: 4, Interval: 30 * time.Second,
		ScaleDown: &Rules{Policies: []RatePolicy{{Pods, 1, time.Minute}}}}
	d := p.WithDefaults()
	up, down := d.ScaleUp, d.ScaleDown
	if *up.StabilizationWindow != 0 || up.SelectPolicy != SelectMax || len(up.Policies) != 2 ||
		up.Policies[0] != (RatePolicy{Pods, 4, 15 * time.Second}) || up.Policies[1] != (RatePolicy{Percent, 100, 15 * time.Second}) {
		t.Errorf("scale_up defaults: %+v %+v", *up, up.Policies)
	}
	if *down.StabilizationWindow != 300*time.Second || down.SelectPolicy != SelectMax ||
		len(down.Policies) != 1 || down.Policies[0] != (RatePolicy{Pods, 1, time.Minute}) {
		t.Errorf("scale_down: the given policies over the defaults: %+v %+v", *down, down.Policies)
	}
	if *d.ReadinessDelay != 30*time.Second || d.Tolerance != 0.1 || d.Min != 1 {
		t.Errorf("readiness delay %v, tolerance %v, min %d", *d.ReadinessDelay, d.Tolerance, d.Min)
	}
	d.ScaleDown.Policies[0].Value = 9
	if p.ScaleDown.Policies[0].Value != 1 {
		t.Error("WithDefaults shares the policies with its receiver")
	}
}

func TestCounts(t *testing.T) {
	for _, c := range []struct {
		p      Policy
		served time.Duration
		want   bool
	}{
		{Policy{Metric: CPU}, 14 * time.Second, false}, // one interval (15 s) by default
		{Policy{Metric: CPU}, 15 * time.Second, true},
		{Policy{Metric: CPU, Interval: time.Minute}, 30 * time.Second, false},
		{Policy{Metric: CPU, ReadinessDelay: dur(0)}, 0, true},
		{Policy{Metric: CPU, ReadinessDelay: dur(time.Minute)}, 59 * time.Second, false},
		{Policy{Metric: Concurrency}, 0, true}, // pod metrics count as soon as they exist
		{Policy{Metric: QueueDelay, ReadinessDelay: dur(time.Minute)}, 0, true},
	} {
		if got := c.p.Counts(c.served); got != c.want {
			t.Errorf("%+v.Counts(%v) = %v, want %v", c.p, c.served, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Policy{Metric: Rate, Target: 1, Max: 2}
	with := func(f func(*Policy)) Policy { p := ok; f(&p); return p }
	for _, c := range []struct {
		p     Policy
		field string // the field the error names
		want  string
	}{
		{Policy{Metric: "memory", Target: 1, Max: 1}, "metric", `"memory" is not one of`},
		{Policy{Metric: CPU, Target: 60, Max: 1}, "target", "utilisation in (0, 1]"},
		{Policy{Metric: Rate, Target: 0, Max: 1}, "target", "0 must be a finite number"},
		{Policy{Metric: Rate, Target: 1, Min: 5, Max: 2}, "max", "1 ≤ min ≤ max"},
		{with(func(p *Policy) { p.Cooldown = -1 }), "cooldown", "must not be negative"},
		{with(func(p *Policy) { p.UpDelay = -1 }), "up_delay", "must not be negative"},
		{with(func(p *Policy) { p.MaxStep = -1 }), "max_step", "is negative"},
		{with(func(p *Policy) { p.Tolerance = 1 }), "tolerance", "below 1"},
		{with(func(p *Policy) { p.ReadinessDelay = dur(-time.Second) }), "readiness_delay", "outside [0s, 1h0m0s]"},
		{with(func(p *Policy) { p.ScaleDown = &Rules{StabilizationWindow: dur(2 * time.Hour)} }),
			"scale_down.stabilization_window", "2h0m0s is outside [0s, 1h0m0s]"},
		{with(func(p *Policy) { p.ScaleUp = &Rules{SelectPolicy: "Max"} }), "scale_up.select_policy", `"Max" is not one of max, min, disabled`},
		{with(func(p *Policy) { p.ScaleUp = &Rules{Policies: []RatePolicy{}} }), "scale_up.policies", "at least one policy"},
		{with(func(p *Policy) { p.ScaleUp = &Rules{Policies: []RatePolicy{{"Pods", 4, time.Second}}} }),
			"scale_up.policies.0.type", `"Pods" is not one of pods, percent`},
		{with(func(p *Policy) { p.ScaleDown = &Rules{Policies: []RatePolicy{{Percent, 0, time.Second}}} }),
			"scale_down.policies.0.value", "0 is outside [1, 1000000]"},
		{with(func(p *Policy) {
			p.ScaleDown = &Rules{Policies: []RatePolicy{{Pods, 1, time.Second}, {Pods, 1, time.Hour}}}
		}), "scale_down.policies.1.period", "1h0m0s is outside (0s, 30m0s]"},
	} {
		err := c.p.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field() != c.field || !strings.Contains(fe.Reason(), c.want) ||
			err.Error() != "autoscale: "+c.field+": "+fe.Reason() {
			t.Errorf("Validate(%+v) = %v; want a FieldError for %s mentioning %q", c.p, err, c.field, c.want)
		}
	}
	if err := (Policy{Metric: CPU, Target: 0.5, Max: 4}).Validate(); err != nil {
		t.Errorf("a valid policy: %v", err)
	}
	full := with(func(p *Policy) {
		p.ReadinessDelay = dur(0)
		p.ScaleUp = &Rules{StabilizationWindow: dur(0), SelectPolicy: SelectDisabled}
		p.ScaleDown = &Rules{StabilizationWindow: dur(time.Hour), SelectPolicy: SelectMin,
			Policies: []RatePolicy{{Pods, 1, 30 * time.Minute}, {Percent, 10, time.Second}}}
	})
	if err := full.Validate(); err != nil {
		t.Errorf("a valid policy with every field: %v", err)
	}
}

// FuzzDecideAt drives an autoscaler with any observations, at any
// intervals, under any valid policy, and checks what holds whatever the
// metric says: the count stays within [min, max] once inside, never moves
// against the metric's proposal, a scale-up within the default policies
// adds at most max(4, the replicas) per 15 s, and two autoscalers given
// the same inputs decide alike.
func FuzzDecideAt(f *testing.F) {
	f.Add(uint8(2), uint8(10), uint8(0), []byte{10, 10, 50, 15, 10, 4, 1, 15, 20, 20, 90, 15})
	f.Add(uint8(1), uint8(60), uint8(1), []byte{3, 1, 255, 1, 40, 40, 0, 200})
	f.Fuzz(func(t *testing.T, lo, hi, kind uint8, steps []byte) {
		p := Policy{Metric: Concurrency, Target: 10, Min: int(lo%20) + 1}
		p.Max = p.Min + int(hi%80)
		switch kind % 3 {
		case 1:
			p.ScaleDown = &Rules{StabilizationWindow: dur(0)}
		case 2:
			p.ScaleUp = &Rules{SelectPolicy: SelectMin, StabilizationWindow: dur(30 * time.Second),
				Policies: []RatePolicy{{Pods, 2, 10 * time.Second}, {Percent, 50, 20 * time.Second}}}
			p.ScaleDown = &Rules{SelectPolicy: SelectMin, Policies: []RatePolicy{{Pods, 1, 5 * time.Second}}}
			p.MaxStep = 3
		}
		a, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := New(p)
		now := time.Unix(0, 0)
		cur := p.Min
		type change struct {
			at time.Time
			n  int // + added, − removed
		}
		var changes []change
		for len(steps) >= 4 {
			s := steps[:4]
			steps = steps[4:]
			now = now.Add(time.Duration(s[3]) * time.Second)
			o := Observation{Replicas: cur, Ready: int(s[0]) % (cur + 1), Value: float64(s[1]) * float64(s[2]) / 25}
			d := a.DecideAt(now, o)
			if e := b.DecideAt(now, o); e != d {
				t.Fatalf("two autoscalers, one input: %+v and %+v", d, e)
			}
			if d.Replicas < p.Min || d.Replicas > p.Max {
				t.Fatalf("%+v from %d replicas: outside [%d, %d]", d, cur, p.Min, p.Max)
			}
			if d.Proposed > cur && d.Replicas < cur || d.Proposed < cur && d.Replicas > cur {
				t.Fatalf("%+v from %d replicas: against the proposal", d, cur)
			}
			// Default scale-up policies: the count 15 s ago (the changes
			// since taken back), doubled or plus 4, bounds it.
			start := cur
			for _, c := range changes {
				if c.at.After(now.Add(-DefaultPeriod)) {
					start -= c.n
				}
			}
			if kind%3 != 2 && d.Replicas > max(start+4, 2*start, cur) {
				t.Fatalf("%+v from %d replicas, %d 15 s ago: faster than the default policies", d, cur, start)
			}
			if d.Replicas != cur {
				changes = append(changes, change{now, d.Replicas - cur})
			}
			cur = d.Replicas
		}
	})
}
