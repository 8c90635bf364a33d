package analyze

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/budget"
)

// budgetRule is what a retry budget allows in the long run, as a ratio of
// retries to requests plus a floor of retries per second:
//
//	attempts/s ≤ min(k × x, (1 + ratio) × x + floor)   for x requests/s
//
// The rules per kind are stated in docs/analyze.md ("Budgets").
type budgetRule struct {
	has   bool
	ratio float64 // retries per request
	floor float64 // retries per second, all the edge's retriers together
	burst float64 // retries a full budget allows at once before the ratio holds
	short string  // a few words: "token bucket 10 %"
	text  string  // one line: how the figure was derived
}

// attempts returns the attempts per second an edge that makes k attempts
// per request when every attempt fails (its amplification: the attempt cap,
// less with a retry chance) and has this budget sends for x requests per
// second.
func (b budgetRule) attempts(k float64, x float64) float64 {
	worst := k * x
	if !b.has {
		return worst
	}
	return min(worst, (1+b.ratio)*x+b.floor)
}

// Defaults of budget.Spec's zero fields, as the budget package documents
// them (budget.Spec applies them in an unexported method).
const (
	defBucketCapacity = 500
	defRetryCost      = 5
	defReward         = 1
	defMaxTokens      = 10
	defTokenRatio     = 0.1
	defPercent        = 0.2
	defMinConcurrency = 3
)

func orFloat(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// ruleFor reads a budget spec of an edge with procs retriers (each with its
// own budget) whose attempts time out after timeout.
func ruleFor(s budget.Spec, procs int, timeout time.Duration) budgetRule {
	p := float64(procs)
	switch s.Kind {
	case budget.KindTokenBucket:
		capacity := orFloat(s.Capacity, defBucketCapacity)
		retry := orFloat(s.RetryCost, defRetryCost)
		cost := min(retry, orFloat(s.TimeoutCost, retry))
		reward := orFloat(s.SuccessReward, defReward)
		return budgetRule{has: true, ratio: reward / cost, burst: p * capacity / cost,
			short: "token bucket " + pct(reward/cost),
			text: fmt.Sprintf("token bucket: a first-try success earns %s, a retry costs %s: ≤ %s retries per request, after a burst of %s",
				num(reward), num(cost), pct(reward/cost), num(p*capacity/cost))}
	case budget.KindTokenRatio:
		maxTokens := orFloat(s.MaxTokens, defMaxTokens)
		ratio := orFloat(s.TokenRatio, defTokenRatio)
		return budgetRule{has: true, ratio: ratio, burst: p * maxTokens / 2,
			short: "token ratio " + pct(ratio),
			text: fmt.Sprintf("gRPC retry throttling: a failure costs 1 token, a success earns %s, no retry at or below half of %s tokens: failures ≤ %s of successes, so ≤ %s retries per request, after a burst of %s",
				num(ratio), num(maxTokens), pct(ratio), pct(ratio), num(p*maxTokens/2))}
	case budget.KindWindow:
		floor := p * s.Floor
		text := fmt.Sprintf("window: retries ≤ %s of requests", pct(s.Ratio))
		if s.Floor > 0 {
			text += fmt.Sprintf(" + %s/s", num(floor))
		}
		short := "window " + pct(s.Ratio)
		if s.Floor > 0 {
			short += " + " + num(floor) + "/s"
		}
		return budgetRule{has: true, ratio: s.Ratio, floor: floor, short: short, text: text}
	case budget.KindConcurrency:
		percent := orFloat(s.Percent, defPercent)
		minimum := s.MinConcurrency
		if minimum == 0 {
			minimum = defMinConcurrency
		}
		if percent >= 1 {
			return budgetRule{short: "concurrency 100 %", text: "concurrency 100 %: no bound"}
		}
		ratio := percent / (1 - percent)
		floor := p * float64(minimum) / timeout.Seconds()
		return budgetRule{has: true, ratio: ratio, floor: floor,
			short: "concurrency " + pct(percent),
			text: fmt.Sprintf("Envoy concurrency: retries in flight ≤ %s of attempts in flight (≤ %s retries per request) or %d, which attempts lasting the %v timeout turn into %s/s",
				pct(percent), pct(ratio), minimum, timeout, num(floor))}
	}
	return budgetRule{short: "none", text: "none"}
}

// num formats a figure with at most 3 significant digits, no exponent.
func num(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "∞"
	case x == math.Trunc(x) && math.Abs(x) < 1e15:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	case math.Abs(x) >= 1:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.3g", x)
}

// pct formats a fraction as a percentage.
func pct(x float64) string {
	p := math.Round(1000*x) / 10
	if p == math.Trunc(p) {
		return fmt.Sprintf("%.0f %%", p)
	}
	return fmt.Sprintf("%.1f %%", p)
}

// times formats an amplification.
func times(x float64) string {
	if x == math.Trunc(x) {
		return fmt.Sprintf("%.0f×", x)
	}
	if x >= 10 {
		return fmt.Sprintf("%.1f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}
