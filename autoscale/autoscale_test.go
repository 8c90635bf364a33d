package autoscale

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecideAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		at       time.Duration
		current  int
		observed float64
		want     int
		why      string
	}
	tests := []struct {
		name  string
		p     Policy
		steps []step
	}{
		{"proportional up and down", Policy{Metric: CPU, Target: 0.5, Min: 1, Max: 10}, []step{
			{0, 2, 1.0, 4, "scale up"},    // ceil(2 × 1.0/0.5)
			{1, 4, 0.25, 2, "scale down"}, // ceil(4 × 0.5)
			{2, 2, 0.52, 2, "within tolerance"},
			{3, 3, 0.6, 4, "scale up"}, // ceil(3 × 1.2) = 4
		}},
		{"clamped to min and max", Policy{Metric: Rate, Target: 100, Min: 2, Max: 5}, []step{
			{0, 3, 1000, 5, "scale up"},
			{1, 5, 1, 2, "scale down"},
		}},
		{"step bound", Policy{Metric: Concurrency, Target: 10, Min: 1, Max: 100, MaxStep: 2}, []step{
			{0, 4, 100, 6, "scale up"},
			{1, 6, 0.1, 4, "scale down"},
		}},
		{"cooldown", Policy{Metric: QueueDelay, Target: 0.1, Min: 1, Max: 50, Cooldown: 30 * time.Second}, []step{
			{0, 2, 0.4, 8, "scale up"},
			{10 * time.Second, 8, 0.4, 8, "cooling down"},
			{30 * time.Second, 8, 0.4, 32, "scale up"},
		}},
		{"zero replicas start from one", Policy{Metric: Rate, Target: 10, Min: 0, Max: 9}, []step{
			{0, 0, 35, 4, "scale up"},
		}},
		{"no metric", Policy{Metric: CPU, Target: 0.5, Max: 3}, []step{
			{0, 2, -1, 2, "no valid metric"},
		}},
		// Slack, 2021: workers waiting on I/O show little CPU, so a CPU
		// target scales an overloaded tier down.
		{"cpu blind to waiting", Policy{Metric: CPU, Target: 0.6, Min: 2, Max: 100}, []step{
			{0, 40, 0.05, 4, "scale down"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				d := a.DecideAt(t0.Add(s.at), s.current, s.observed)
				if d.Replicas != s.want || d.Why != s.why {
					t.Errorf("step %d: DecideAt(%v, %d, %v) = %d (%s), want %d (%s)", i, s.at, s.current, s.observed, d.Replicas, d.Why, s.want, s.why)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		p     Policy
		field string // the field the error names
		want  string
	}{
		{Policy{Metric: "memory", Target: 1, Max: 1}, "metric", `"memory" is not one of`},
		{Policy{Metric: CPU, Target: 60, Max: 1}, "target", "utilisation in (0, 1]"},
		{Policy{Metric: Rate, Target: 0, Max: 1}, "target", "0 must be a finite number"},
		{Policy{Metric: Rate, Target: 1, Min: 5, Max: 2}, "max", "1 ≤ min ≤ max"},
		{Policy{Metric: Rate, Target: 1, Max: 2, Cooldown: -1}, "cooldown", "must not be negative"},
		{Policy{Metric: Rate, Target: 1, Max: 2, UpDelay: -1}, "up_delay", "must not be negative"},
		{Policy{Metric: Rate, Target: 1, Max: 2, MaxStep: -1}, "max_step", "is negative"},
		{Policy{Metric: Rate, Target: 1, Max: 2, Tolerance: 1}, "tolerance", "below 1"},
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
}
