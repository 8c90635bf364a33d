package retry

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/wire"
)

// pushbackHints are grpc-retry-pushback-ms values as a server may send
// them, and the signal the shells' parsers make of each (grpcx.ParseSignal:
// one value that wire.ParseMillis accepts is a delay, anything else is
// BadPushback; grpcx's own test checks the parser on a real server).
var pushbackHints = []struct {
	name string
	vals []string
	bad  bool // gRFC A6: do not retry
}{
	{"negative", []string{"-1"}, true},
	{"malformed", []string{"soon"}, true},
	{"repeated", []string{"100", "200"}, true},
	{"valid", []string{"250"}, false},
}

func hintSignal(vals []string) Signal {
	if d, ok := wire.ParseMillis(vals[0]); ok && len(vals) == 1 {
		return Signal{Pushback: d, HasPushback: true}
	}
	return Signal{BadPushback: true}
}

// Every preset × every hint, through the core. A preset that honours hints
// (Pushback.Ignore false) must stop on a bad one whatever IgnoreSignals
// says; one that ignores hints retries as if none had come. The grpc
// preset, deaf to stormguard's signals, used to retry after -1 (issue 15,
// point 4).
func TestBadPushbackStopsEveryPresetThatHonoursHints(t *testing.T) {
	for _, name := range Presets() {
		p := mustPreset(name)
		for _, h := range pushbackHints {
			t.Run(name+"/"+h.name, func(t *testing.T) {
				p := p
				p.Budget = budget.Spec{} // the hint alone decides, not a budget's state
				r := MustNew(p)
				c := r.StartAt(t0, time.Time{})
				d := r.EndAt(t0, &c, Transient, hintSignal(h.vals), 0.5)
				wantStop := h.bad && !p.Pushback.Ignore
				if got := !d.Retry; got != wantStop {
					t.Fatalf("retry = %v (reason %v); want retry = %v (ignore signals %v, ignore pushback %v)",
						d.Retry, d.Reason, !wantStop, p.IgnoreSignals, p.Pushback.Ignore)
				}
				if wantStop && !errors.Is(d.Reason, ErrServerSaidStop) {
					t.Errorf("reason %v; want ErrServerSaidStop", d.Reason)
				}
				if !wantStop && !h.bad && !p.Pushback.Ignore && d.Delay < 250*time.Millisecond {
					t.Errorf("delay %v; want at least the 250 ms hint", d.Delay)
				}
			})
		}
	}
}

// The same through Do, with the hint carried by the error (a SignalError),
// as a hand-written shell would: the default classifier calls a bad hint
// ServiceOverloaded, which a deaf preset used to retry as transient.
func TestDoBadPushbackDeafPreset(t *testing.T) {
	for _, name := range []string{"grpc", "aws-2026", "envoy"} {
		p := mustPreset(name)
		p.Budget = budget.Spec{}
		p.Backoff = backoff.Policy{Kind: backoff.None}
		p.ThrottleBackoff = nil
		r := MustNew(p)
		calls := 0
		err := Do(context.Background(), r, func(context.Context) error {
			calls++
			return &SignalError{Err: statusErr(503), Sig: Signal{BadPushback: true}}
		})
		if calls != 1 || !errors.Is(err, ErrServerSaidStop) {
			t.Errorf("%s: %d calls, err %v; want 1 call and ErrServerSaidStop", name, calls, err)
		}
	}
}

// clampPushback with extreme policies: a MaxExtra or Max near MaxInt64
// (Validate accepts them) used to overflow d + MaxExtra into a negative
// bound, so every hint clamped to "retry now" (issue 15, point 5).
func TestPushbackClampExtremes(t *testing.T) {
	const maxD = time.Duration(math.MaxInt64)
	tests := []struct {
		name          string
		extra, max    time.Duration
		backoff, hint time.Duration
		want          time.Duration
	}{
		{"max extra MaxInt64", maxD, maxD, time.Second, time.Hour, time.Hour},
		{"max extra MaxInt64, hint below", maxD, maxD, time.Second, time.Millisecond, time.Second},
		{"max extra MaxInt64, hint MaxInt64", maxD, maxD, time.Second, maxD, maxD},
		{"max extra MaxInt64 - 1s", maxD - time.Second, maxD, 2 * time.Second, maxD, maxD},
		{"max extra MaxInt64, max 1m", maxD, time.Minute, time.Second, time.Hour, time.Minute},
		{"backoff MaxInt64", time.Second, maxD, maxD, time.Hour, maxD},
		{"backoff MaxInt64, extra MaxInt64", maxD, maxD, maxD, maxD, maxD},
		{"backoff past max", time.Second, time.Minute, time.Hour, 2 * time.Hour, time.Hour},
		{"zero backoff, hint MaxInt64", maxD, maxD, 0, maxD, maxD},
		{"negative hint", maxD, maxD, time.Second, -time.Hour, time.Second},
		{"MinInt64 hint", maxD, maxD, time.Second, math.MinInt64, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := MustNew(Policy{Backoff: backoff.Policy{Kind: backoff.None}, Pushback: Pushback{MaxExtra: tt.extra, Max: tt.max}})
			if got := r.clampPushback(tt.backoff, tt.hint); got != tt.want {
				t.Errorf("clamp(backoff %v, hint %v) = %v; want %v", tt.backoff, tt.hint, got, tt.want)
			}
		})
	}
}

// Through EndAt: with MaxExtra near MaxInt64 a one-hour hint waits an hour
// (it used to give a negative delay, a retry at once); and the deadline
// check does not overflow either.
func TestPushbackHugeMaxExtraEndAt(t *testing.T) {
	p := constPolicy(3, time.Second)
	p.Pushback = Pushback{MaxExtra: math.MaxInt64, Max: math.MaxInt64}
	p.MinAttemptTime = math.MaxInt64
	r := MustNew(p)
	c := r.StartAt(t0, time.Time{})
	d := r.EndAt(t0, &c, Transient, Signal{HasPushback: true, Pushback: time.Hour}, 0.5)
	if !d.Retry || d.Delay != time.Hour {
		t.Errorf("no deadline: %+v; want a retry after 1h", d)
	}
	c = r.StartAt(t0, t0.Add(100*365*24*time.Hour))
	d = r.EndAt(t0, &c, Transient, Signal{HasPushback: true, Pushback: time.Hour}, 0.5)
	if d.Retry || !errors.Is(d.Reason, ErrDeadline) {
		t.Errorf("deadline in 100 years, min attempt time MaxInt64: %+v; want ErrDeadline", d)
	}
}

// FuzzClampPushback: whatever the backoff, the hint and MaxExtra, the
// delay lies in [backoff, backoff + MaxExtra] (saturating at MaxInt64),
// never past max(backoff, Max), and is never negative.
func FuzzClampPushback(f *testing.F) {
	f.Add(int64(time.Second), int64(time.Hour), int64(5*time.Second), int64(time.Minute))
	f.Add(int64(time.Second), int64(time.Hour), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(int64(0), int64(-1), int64(1), int64(1))
	f.Add(int64(100*time.Millisecond), int64(math.MinInt64), int64(time.Second), int64(800*time.Millisecond))
	f.Fuzz(func(t *testing.T, bo, hint, extra, maxD int64) {
		if bo < 0 || extra < 0 || maxD < 0 {
			t.Skip() // a backoff is never negative; Validate refuses negative bounds
		}
		r := MustNew(Policy{Backoff: backoff.Policy{Kind: backoff.None}, Pushback: Pushback{MaxExtra: time.Duration(extra), Max: time.Duration(maxD)}})
		d := time.Duration(bo)
		p := r.Policy().Pushback // defaults filled: a zero field is 5s / 1m
		got := r.clampPushback(d, time.Duration(hint))
		hi := d + p.MaxExtra
		if hi < d {
			hi = math.MaxInt64
		}
		if got < 0 || got < d || got > hi || got > max(d, p.Max) {
			t.Fatalf("clamp(backoff %v, hint %v) with max_extra %v, max %v = %v; want in [%v, %v] and ≤ %v",
				d, time.Duration(hint), p.MaxExtra, p.Max, got, d, hi, max(d, p.Max))
		}
		if h := time.Duration(hint); h >= d && h <= hi && h <= p.Max && got != h {
			t.Fatalf("clamp(backoff %v, hint %v) = %v; a hint inside the window must be kept", d, h, got)
		}
	})
}
