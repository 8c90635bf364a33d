package alloc

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/budget"
)

// Amounts are a budget spec's numbers as the protocol counts them
// (milli-units, microseconds), derived once by [FromSpec] for both package
// fleet and the simulator.
type Amounts struct {
	Kind Kind
	// Spec names the rules; every process sharing a budget must have the
	// same (see Params.Spec).
	Spec string

	// Bucket.
	Capacity int64
	Cost     [3]int64 // by budget.Cause
	Reward   int64    // a first-try success
	Refund   bool     // a retry that succeeds gets its cost back

	// Window.
	SlotUS     int64
	RatioMicro int64
	FloorMicro int64 // per window

	// MaxCost is the dearest retry (a Window's: Unit).
	MaxCost int64
}

// MinWindow is the shortest window a fleet can share.
const MinWindow = 10 * time.Millisecond

// FromSpec derives the amounts of a token-bucket or window spec, its zero
// fields taking the defaults of [budget.Spec.WithDefaults].
func FromSpec(s budget.Spec) (Amounts, error) {
	if err := s.Validate(); err != nil {
		return Amounts{}, err
	}
	s = s.WithDefaults()
	var a Amounts
	switch s.Kind {
	case budget.KindTokenBucket:
		a.Kind = Bucket
		a.Capacity = Milli(s.Capacity)
		a.Cost = [3]int64{budget.Transient: Milli(s.RetryCost), budget.Throttling: Milli(s.ThrottleCost), budget.Timeout: Milli(s.TimeoutCost)}
		a.Reward = Milli(s.SuccessReward)
		a.Refund = !s.NoRefund
		a.MaxCost = max(a.Cost[0], a.Cost[1], a.Cost[2])
		a.Spec = fmt.Sprintf("token-bucket %d %d/%d/%d %d %t", a.Capacity, a.Cost[0], a.Cost[1], a.Cost[2], a.Reward, a.Refund)
	case budget.KindWindow:
		if s.Window < MinWindow || s.Window%(10*time.Microsecond) != 0 {
			return Amounts{}, fmt.Errorf("window must be at least %v and a whole number of 10µs for a fleet budget, got %v", MinWindow, s.Window)
		}
		a.Kind = Window
		a.SlotUS = s.Window.Microseconds() / Slots
		a.RatioMicro = int64(math.Round(s.Ratio * 1e6))
		a.FloorMicro = int64(math.Round(s.Floor * s.Window.Seconds() * 1e6))
		a.MaxCost = Unit
		a.Spec = fmt.Sprintf("window %d %d %d", a.SlotUS, a.RatioMicro, a.FloorMicro)
	default:
		return Amounts{}, fmt.Errorf("kind %q cannot be shared by a fleet (want %q or %q)", s.Kind, budget.KindTokenBucket, budget.KindWindow)
	}
	return a, nil
}

// Milli converts an amount to thousandths, as package budget does.
func Milli(v float64) int64 { return int64(math.Floor(v*Unit + 1e-6)) }

// CreditRatio returns CreditNum and CreditDen for a ClientConfig: what one
// unit of credit is worth in milli-units.
func (a Amounts) CreditRatio() (num, den int64) {
	if a.Kind == Window {
		return a.RatioMicro, 1000
	}
	return 1, 1
}

// The protocol's timing, shared by package fleet and the simulator.
const (
	// DefaultLeaseTTL: a grant not spent within it is given back.
	DefaultLeaseTTL = 2 * time.Second
	// DefaultHeartbeat: the longest a process stays silent.
	DefaultHeartbeat = 10 * time.Second
	// DefaultRate: round trips a second the processes that wait for the
	// pool make together.
	DefaultRate = 1000
	// MinNext and MaxNext bound the wait Redis tells a process whose need
	// went unmet (MaxNext at most half the heartbeat).
	MinNext = 10 * time.Millisecond
	MaxNext = 5 * time.Second
	// WaitHold: a process that waited counts as waiting this long at least
	// (at most half the heartbeat).
	WaitHold = time.Second
	// MaxProcs bounds the processes a state remembers.
	MaxProcs = 100_000
	// Horizon: a busy process asks for what it expects to spend within it.
	Horizon = 200 * time.Millisecond
	// RetryAfter: a failed round trip is tried again after this.
	RetryAfter = 5 * time.Millisecond
)

// DefaultLease is the lease size of a budget: for a token bucket, the
// larger of twice the dearest retry and a tenth of the capacity (at most
// the capacity); for a window, 20 retries.
func (a Amounts) DefaultLease() int64 {
	if a.Kind == Window {
		return 20 * Unit
	}
	return min(max(2*a.MaxCost, a.Capacity/10), a.Capacity)
}

// Params returns the server's parameters for a budget of these amounts,
// rate round trips a second for the processes that wait, and a heartbeat.
func (a Amounts) Params(rate int64, heartbeat time.Duration) Params {
	return Params{
		Spec: a.Spec, Kind: a.Kind, Capacity: a.Capacity,
		SlotUS: a.SlotUS, RatioMicro: a.RatioMicro, FloorMicro: a.FloorMicro,
		Rate:      rate,
		MinNextUS: MinNext.Microseconds(), MaxNextUS: min(MaxNext, heartbeat/2).Microseconds(),
		HoldUS: min(WaitHold, heartbeat/2).Microseconds(),
		LiveUS: 3 * heartbeat.Microseconds(), MaxProcs: MaxProcs,
	}
}

// ClientConfig returns a process's configuration for a budget of these
// amounts: its id, lease size (milli-units), lease TTL, heartbeat and the
// rate of Params.
func (a Amounts) ClientConfig(id string, lease int64, leaseTTL, heartbeat time.Duration, rate int64) ClientConfig {
	num, den := a.CreditRatio()
	return ClientConfig{
		ID: id, Kind: a.Kind, Capacity: a.Capacity, MaxCost: a.MaxCost,
		Lease: lease, LeaseTTL: int64(leaseTTL), Heartbeat: int64(heartbeat),
		Horizon: int64(Horizon), Retry: int64(RetryAfter), Expire: int64(3 * heartbeat / 2),
		CreditNum: num, CreditDen: den, Rate: rate, MinFlush: int64(MinNext),
	}
}
