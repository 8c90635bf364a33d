package autoscale

import (
	"fmt"
	"math"
	"time"
)

// Rules is how fast the autoscaler may go one way (Kubernetes'
// HPAScalingRules). A missing field takes the default of its direction:
//
//	                      scale_up                      scale_down
//	stabilization_window  0s                            300s
//	policies              4 pods and 100 % per 15s      100 % per 15s
//	select_policy         max                           max
type Rules struct {
	// StabilizationWindow: the proposals of this long ago and since are
	// considered (scale-up: the lowest is the most that is added;
	// scale-down: the highest is the fewest that is kept). At most 1 h.
	StabilizationWindow *time.Duration `json:"stabilization_window,omitempty" yaml:"stabilization_window,omitempty"`
	// Policies: how many replicas may be added or removed per period. At
	// least one when given (select_policy: disabled stops scaling that
	// way).
	Policies []RatePolicy `json:"policies,omitempty" yaml:"policies,omitempty"`
	// SelectPolicy: which policy applies when there are several.
	SelectPolicy Select `json:"select_policy,omitempty" yaml:"select_policy,omitempty"`
}

// RatePolicy allows a change of Value replicas (Type pods) or of Value %
// of the replicas (Type percent) per Period, counted from the replicas at
// the start of that period: a change made within the last Period uses up
// part of it. A percent scale-up rounds up (1 % of 3 replicas adds one), a
// percent scale-down rounds the replicas kept down.
type RatePolicy struct {
	Type   PolicyType    `json:"type" yaml:"type"`
	Value  int           `json:"value" yaml:"value"`   // > 0
	Period time.Duration `json:"period" yaml:"period"` // in (0, 30 min]
}

// PolicyType is what a RatePolicy's Value counts.
type PolicyType string

// The policy types.
const (
	Pods    PolicyType = "pods"
	Percent PolicyType = "percent"
)

// Select chooses among a direction's policies.
type Select string

// The selections.
const (
	// SelectMax: the policy that allows the largest change [default].
	SelectMax Select = "max"
	// SelectMin: the policy that allows the smallest change.
	SelectMin Select = "min"
	// SelectDisabled: no change this way.
	SelectDisabled Select = "disabled"
)

// Kubernetes' bounds and defaults.
const (
	maxWindow = time.Hour        // stabilization windows, readiness delay
	maxPeriod = 30 * time.Minute // rate policies' periods
	maxValue  = 1_000_000        // a policy's value (ours: no overflow)

	// DefaultScaleDownWindow is the scale-down stabilization window.
	DefaultScaleDownWindow = 300 * time.Second
	// DefaultPeriod is the period of the default rate policies.
	DefaultPeriod = 15 * time.Second
)

func defaultScaleUp() Rules {
	var zero time.Duration
	return Rules{StabilizationWindow: &zero, SelectPolicy: SelectMax, Policies: []RatePolicy{
		{Type: Pods, Value: 4, Period: DefaultPeriod},
		{Type: Percent, Value: 100, Period: DefaultPeriod},
	}}
}

func defaultScaleDown() Rules {
	w := DefaultScaleDownWindow
	return Rules{StabilizationWindow: &w, SelectPolicy: SelectMax, Policies: []RatePolicy{
		{Type: Percent, Value: 100, Period: DefaultPeriod},
	}}
}

// withDefaults returns r's fields over def (r may be nil), sharing
// nothing with r.
func (r *Rules) withDefaults(def Rules) Rules {
	if r == nil {
		return def
	}
	if r.StabilizationWindow != nil {
		w := *r.StabilizationWindow
		def.StabilizationWindow = &w
	}
	if r.Policies != nil {
		def.Policies = append([]RatePolicy(nil), r.Policies...)
	}
	if r.SelectPolicy != "" {
		def.SelectPolicy = r.SelectPolicy
	}
	return def
}

// validate reports r's problems, each named below the field at.
func (r *Rules) validate(at string) []error {
	if r == nil {
		return nil
	}
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &FieldError{Name: at + "." + field, Msg: fmt.Sprintf(format, a...)})
	}
	if w := r.StabilizationWindow; w != nil && (*w < 0 || *w > maxWindow) {
		bad("stabilization_window", "%v is outside [0s, %v]", *w, maxWindow)
	}
	switch r.SelectPolicy {
	case "", SelectMax, SelectMin, SelectDisabled:
	default:
		bad("select_policy", "%q is not one of max, min, disabled", r.SelectPolicy)
	}
	if r.Policies != nil && len(r.Policies) == 0 {
		bad("policies", "give at least one policy, or leave the key out for the default (select_policy: disabled stops scaling this way)")
	}
	for i, q := range r.Policies {
		f := fmt.Sprintf("policies.%d.", i)
		if q.Type != Pods && q.Type != Percent {
			bad(f+"type", "%q is not one of pods, percent", q.Type)
		}
		if q.Value <= 0 || q.Value > maxValue {
			bad(f+"value", "%d is outside [1, %d]", q.Value, maxValue)
		}
		if q.Period <= 0 || q.Period > maxPeriod {
			bad(f+"period", "%v is outside (0s, %v]", q.Period, maxPeriod)
		}
	}
	return errs
}

func (r *Rules) longestPeriod() time.Duration {
	var d time.Duration
	for _, q := range r.Policies {
		d = max(d, q.Period)
	}
	return d
}

// periodStart is the replica count at the start of the last period before
// now: cur with the changes made since taken back.
func (a *Autoscaler) periodStart(now time.Time, period time.Duration, cur int) int {
	cut := now.Add(-period)
	n := cur
	for _, c := range a.ups {
		if c.at.After(cut) {
			n -= c.n
		}
	}
	for _, c := range a.downs {
		if c.at.After(cut) {
			n += c.n
		}
	}
	return n
}

// limit is the bound r's policies allow now, from cur replicas: the most
// replicas when up, the fewest when down.
func (a *Autoscaler) limit(now time.Time, r *Rules, cur int, up bool) int {
	if r.SelectPolicy == SelectDisabled {
		return cur
	}
	// The largest change is the highest bound up, the lowest down.
	highest := up == (r.SelectPolicy != SelectMin)
	limit, first := 0, true
	for _, q := range r.Policies {
		start := a.periodStart(now, q.Period, cur)
		var n int
		switch {
		case q.Type == Pods && up:
			n = start + q.Value
		case q.Type == Pods:
			n = start - q.Value
		case up:
			n = int(min(math.Ceil(float64(start)*(1+float64(q.Value)/100)), MaxReplicas))
		default:
			n = int(math.Floor(float64(start) * (1 - float64(q.Value)/100)))
		}
		if first || highest && n > limit || !highest && n < limit {
			limit, first = n, false
		}
	}
	return limit
}
