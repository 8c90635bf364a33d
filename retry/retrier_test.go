package retry

import (
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/wire"
)

var t0 = time.Unix(1_700_000_000, 0)

// constPolicy waits d between attempts; d = 0 means no wait at all (a zero
// Base would take the default).
func constPolicy(attempts int, d time.Duration) Policy {
	if d == 0 {
		return Policy{MaxAttempts: attempts, Backoff: backoff.Policy{Kind: backoff.None}}
	}
	return Policy{MaxAttempts: attempts, Backoff: backoff.Policy{Kind: backoff.Constant, Base: d}}
}

// step is one attempt's result fed to the core, and what it must decide.
type step struct {
	cls       Class
	sig       Signal
	wantRetry bool
	wantDelay time.Duration
	wantErr   error
}

func runSteps(t *testing.T, r *Retrier, deadline time.Time, steps []step) {
	t.Helper()
	now := t0
	c := r.StartAt(now, deadline)
	for i, s := range steps {
		now = now.Add(10 * time.Millisecond)
		d := r.EndAt(now, &c, s.cls, s.sig, 0.5)
		if d.Retry != s.wantRetry || d.Delay != s.wantDelay || !errors.Is(d.Reason, s.wantErr) || (s.wantErr == nil && d.Reason != nil) {
			t.Fatalf("step %d (%v): got retry=%v delay=%v reason=%v; want retry=%v delay=%v reason=%v",
				i, s.cls, d.Retry, d.Delay, d.Reason, s.wantRetry, s.wantDelay, s.wantErr)
		}
		if !d.Retry {
			if i != len(steps)-1 {
				t.Fatalf("step %d ended the call but %d steps remain", i, len(steps)-1-i)
			}
			return
		}
		now = now.Add(d.Delay)
		r.NextAt(now, &c)
	}
}

func TestCoreDecisions(t *testing.T) {
	svc := Signal{Overload: wire.OverloadService}
	inst := Signal{Overload: wire.OverloadInstance, HasPushback: true, Pushback: 300 * time.Millisecond}
	tests := []struct {
		name   string
		policy Policy
		steps  []step
	}{
		{"first try succeeds", constPolicy(3, 100*time.Millisecond), []step{{cls: Success}}},
		{"transient then success", constPolicy(3, 100*time.Millisecond), []step{
			{cls: Transient, wantRetry: true, wantDelay: 100 * time.Millisecond},
			{cls: Success}}},
		{"attempt cap of 3", constPolicy(3, 100*time.Millisecond), []step{
			{cls: Transient, wantRetry: true, wantDelay: 100 * time.Millisecond},
			{cls: Timeout, wantRetry: true, wantDelay: 100 * time.Millisecond},
			{cls: Transient, wantErr: ErrAttemptsExhausted}}},
		{"max attempts 1 never retries", constPolicy(1, 0), []step{{cls: Transient, wantErr: ErrAttemptsExhausted}}},
		{"never-retry", constPolicy(3, 0), []step{{cls: NeverRetry, wantErr: ErrNotRetryable}}},
		{"caller cancelled", constPolicy(3, 0), []step{{cls: Canceled, wantErr: ErrCanceled}}},
		{"service overloaded signal", constPolicy(3, 0), []step{{cls: Transient, sig: svc, wantErr: ErrServerSaidStop}}},
		{"service overloaded class", constPolicy(3, 0), []step{{cls: ServiceOverloaded, wantErr: ErrServerSaidStop}}},
		{"retries exhausted below", constPolicy(3, 0), []step{{cls: Transient, sig: Signal{Exhausted: true}, wantErr: ErrServerSaidStop}}},
		{"malformed pushback", constPolicy(3, 0), []step{{cls: Transient, sig: Signal{BadPushback: true}, wantErr: ErrServerSaidStop}}},
		{"instance overloaded: retry after the hint", constPolicy(3, 100*time.Millisecond), []step{
			{cls: Transient, sig: inst, wantRetry: true, wantDelay: 300 * time.Millisecond}, {cls: Success}}},
		{"deaf client ignores signals", func() Policy {
			p := constPolicy(3, 0)
			p.IgnoreSignals = true
			return p
		}(), []step{
			{cls: Transient, sig: svc, wantRetry: true},
			{cls: ServiceOverloaded, wantRetry: true},
			{cls: Transient, wantErr: ErrAttemptsExhausted}}},
		{"throttling uses its own backoff", Policy{MaxAttempts: 3,
			Backoff:         backoff.Policy{Kind: backoff.Constant, Base: 50 * time.Millisecond},
			ThrottleBackoff: &backoff.Policy{Kind: backoff.Constant, Base: time.Second}}, []step{
			{cls: Throttling, wantRetry: true, wantDelay: time.Second},
			{cls: Transient, wantRetry: true, wantDelay: 50 * time.Millisecond},
			{cls: Success}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, MustNew(tt.policy), time.Time{}, tt.steps)
		})
	}
}

func TestPushbackClamp(t *testing.T) {
	p := constPolicy(3, 100*time.Millisecond)
	p.Pushback = Pushback{MaxExtra: time.Second, Max: 800 * time.Millisecond}
	r := MustNew(p)
	tests := []struct {
		hint, want time.Duration
	}{
		{0, 100 * time.Millisecond},                        // below backoff → backoff
		{50 * time.Millisecond, 100 * time.Millisecond},    // below backoff → backoff
		{400 * time.Millisecond, 400 * time.Millisecond},   // inside the window
		{5 * time.Second, 800 * time.Millisecond},          // past backoff+extra and past Max → Max
		{484289 * time.Hour, 800 * time.Millisecond},       // the absurd hint seen in the wild
		{900 * time.Millisecond, 800 * time.Millisecond},   // inside backoff+extra, past Max
		{1100 * time.Millisecond, 800 * time.Millisecond},  // exactly backoff+extra, past Max
		{-time.Second, 100 * time.Millisecond},             // shells mark negative as BadPushback; the clamp alone floors it
		{100 * time.Millisecond, 100 * time.Millisecond},   // equal to backoff
		{799 * time.Millisecond, 799 * time.Millisecond},   // just under Max
		{2 * time.Minute, 800 * time.Millisecond},          // long hint
		{time.Duration(1<<62 - 1), 800 * time.Millisecond}, // overflow-scale
	}
	for _, tt := range tests {
		if got := r.clampPushback(100*time.Millisecond, tt.hint); got != tt.want {
			t.Errorf("clamp(backoff 100ms, hint %v) = %v, want %v", tt.hint, got, tt.want)
		}
	}
	// Without a Max below the window, the window bounds the hint.
	r2 := MustNew(Policy{Backoff: backoff.Policy{Kind: backoff.Constant, Base: time.Second}, Pushback: Pushback{MaxExtra: 5 * time.Second}})
	if got, want := r2.clampPushback(time.Second, time.Hour), 6*time.Second; got != want {
		t.Errorf("clamp(1s, 1h) with default max = %v, want %v", got, want)
	}
}

func TestDeadlineAwareness(t *testing.T) {
	p := constPolicy(5, 200*time.Millisecond)
	p.MinAttemptTime = 100 * time.Millisecond
	r := MustNew(p)
	// 10 ms per attempt (runSteps), 200 ms wait, 100 ms minimum attempt.
	// Deadline 1 s after start: attempt 1 ends at 10 ms (needs 300 ms: ok),
	// attempt 2 ends at 220 ms (ok), attempt 3 at 430 ms (ok: 730 ≤ 1000),
	// attempt 4 at 640 ms (940 ≤ 1000 ok), attempt 5 at 850 ms: cap.
	runSteps(t, r, t0.Add(time.Second), []step{
		{cls: Transient, wantRetry: true, wantDelay: 200 * time.Millisecond},
		{cls: Transient, wantRetry: true, wantDelay: 200 * time.Millisecond},
		{cls: Transient, wantRetry: true, wantDelay: 200 * time.Millisecond},
		{cls: Transient, wantRetry: true, wantDelay: 200 * time.Millisecond},
		{cls: Transient, wantErr: ErrAttemptsExhausted},
	})
	// Deadline 500 ms: attempt 1 ends at 10 ms (10+200+100 ≤ 500: retry);
	// attempt 2 ends at 220 ms and 220+200+100 > 500: give up at once.
	runSteps(t, MustNew(p), t0.Add(500*time.Millisecond), []step{
		{cls: Transient, wantRetry: true, wantDelay: 200 * time.Millisecond},
		{cls: Transient, wantErr: ErrDeadline},
	})
}

func TestLearnedAttemptTime(t *testing.T) {
	p := constPolicy(3, 10*time.Millisecond)
	p.LearnAttemptTime = true
	r := MustNew(p)
	for range 50 { // successful attempts of 300 ms teach the retrier
		c := r.StartAt(t0, time.Time{})
		r.EndAt(t0.Add(300*time.Millisecond), &c, Success, Signal{}, 0)
	}
	if got := r.LearnedAttemptTime(); got != 300*time.Millisecond {
		t.Fatalf("learned %v, want 300ms", got)
	}
	// 200 ms left: a 10 ms wait plus a 300 ms attempt cannot fit.
	c := r.StartAt(t0, t0.Add(200*time.Millisecond))
	if d := r.EndAt(t0, &c, Transient, Signal{}, 0); !errors.Is(d.Reason, ErrDeadline) {
		t.Fatalf("got %+v, want ErrDeadline", d)
	}
	// 400 ms left: it fits.
	c = r.StartAt(t0, t0.Add(400*time.Millisecond))
	if d := r.EndAt(t0, &c, Transient, Signal{}, 0); !d.Retry {
		t.Fatalf("got %+v, want a retry", d)
	}
}

func TestKillSwitch(t *testing.T) {
	r := MustNew(constPolicy(3, 0))
	r.Dials().SetRetriesDisabled(true)
	runSteps(t, r, time.Time{}, []step{{cls: Transient, wantErr: ErrRetriesDisabled}})
	r.Dials().SetRetriesDisabled(false)
	runSteps(t, r, time.Time{}, []step{{cls: Transient, wantRetry: true}, {cls: Success}})
}

func TestBudgetStopsRetries(t *testing.T) {
	// gRPC A6: max 10 tokens; five failures leave 5 = max/2: no retry.
	p := constPolicy(2, 0)
	p.Budget = budget.Spec{Kind: budget.KindTokenRatio, MaxTokens: 10, TokenRatio: 0.1}
	r := MustNew(p)
	for i := range 2 { // each call: 2 failed attempts = −2 tokens
		runSteps(t, r, time.Time{}, []step{{cls: Transient, wantRetry: true}, {cls: Transient, wantErr: ErrAttemptsExhausted}})
		_ = i
	}
	// 6 tokens left; one failure → 5, not > 5.
	runSteps(t, r, time.Time{}, []step{{cls: Transient, wantErr: ErrBudgetExhausted}})
}

func TestPresets(t *testing.T) {
	for _, name := range Presets() {
		p, err := Preset(name)
		if err != nil {
			t.Fatalf("Preset(%q): %v", name, err)
		}
		if _, err := New(p); err != nil {
			t.Errorf("New(Preset(%q)): %v", name, err)
		}
	}
	want := []string{"aws-2026", "aws-legacy", "aws-standard", "envoy", "grpc", "naive", "sre", "stormguard"}
	if got := Presets(); len(got) != len(want) {
		t.Fatalf("Presets() = %v, want %v", got, want)
	}
	if _, err := Preset("nope"); err == nil {
		t.Error("Preset(nope): no error")
	}
}

func TestValidate(t *testing.T) {
	bad := []Policy{
		{MaxAttempts: -1},
		{MaxAttempts: MaxAttemptsLimit + 1},
		{Backoff: backoff.Policy{Base: -1}},
		{Pushback: Pushback{MaxExtra: -1}},
		{AttemptTimeout: -1},
		{MinAttemptTime: -time.Second},
		{Budget: budget.Spec{Kind: "bogus"}},
	}
	for i, p := range bad {
		if _, err := New(p); err == nil {
			t.Errorf("policy %d (%+v): New gave no error", i, p)
		}
	}
}

// TestSkipsCall: a shell may skip the Call of a first attempt only when
// EndAt would do nothing but learn the attempt's time and reward a token
// bucket, and SucceededFirstAt then leaves the bucket and the learned time
// as StartAt, AllowAt and EndAt would, timed or not.
func TestSkipsCall(t *testing.T) {
	bucket := budget.Spec{Kind: budget.KindTokenBucket, Capacity: 100, RetryCost: 10, SuccessReward: 1, NoRefund: true}
	tests := []struct {
		name      string
		p         Policy
		opts      []Option
		wantSkips bool
	}{
		{"token bucket", Policy{MaxAttempts: 3, Budget: bucket}, nil, true},
		{"learning", Policy{MaxAttempts: 3, Budget: bucket, LearnAttemptTime: true}, nil, true},
		{"no budget", Policy{MaxAttempts: 3, Budget: budget.Spec{Kind: budget.KindNone}}, nil, false},
		{"a breaker", Policy{MaxAttempts: 3, Budget: bucket}, []Option{WithBreaker(breaker.MustNew(breaker.Spec{}))}, false},
		{"hooks", Policy{MaxAttempts: 3, Budget: bucket}, []Option{WithHooks(Hooks{OnAttempt: func(int, Class, time.Duration) {}})}, false},
	}
	for _, tt := range tests {
		if got := MustNew(tt.p, tt.opts...).SkipsCall(); got != tt.wantSkips {
			t.Errorf("%s: SkipsCall() = %v, want %v", tt.name, got, tt.wantSkips)
		}
	}
	// The bucket and the learned time after retries and first-try
	// successes, either way.
	type state struct {
		level   float64
		learned time.Duration
	}
	run := func(skip, timed bool) state {
		r := MustNew(Policy{MaxAttempts: 3, Budget: bucket, Backoff: backoff.Policy{Kind: backoff.None}, LearnAttemptTime: true})
		for range 3 { // spend 30 tokens on retries
			c := r.StartAt(time.Time{}, time.Time{})
			if d := r.EndAt(time.Time{}, &c, Transient, Signal{}, 0.5); !d.Retry {
				t.Fatalf("no retry: %v", d.Reason)
			}
			r.NextAt(time.Time{}, &c)
			r.EndAt(time.Time{}, &c, Success, Signal{}, 0.5)
		}
		for i := range 7 {
			var start, end time.Time
			if timed {
				start = t0.Add(time.Duration(i) * time.Second)
				end = start.Add(time.Duration(10+i) * time.Millisecond)
			}
			if skip {
				r.SucceededFirstAt(start, end)
				continue
			}
			c := r.StartAt(start, time.Time{})
			if !r.AllowAt(start, &c) {
				t.Fatal("refused without a breaker")
			}
			r.EndAt(end, &c, Success, Signal{}, 0)
		}
		return state{r.Budget().(*budget.TokenBucket).Level(), r.LearnedAttemptTime()}
	}
	for _, timed := range []bool{false, true} {
		a, b := run(false, timed), run(true, timed)
		if a != b || a.level == 100 || (a.learned > 0) != timed {
			t.Errorf("timed %v: %+v after the Call's way, %+v after SucceededFirstAt; want equal, the bucket below 100, a learned time when timed", timed, a, b)
		}
	}
}

// TestSamples holds Samples to EndAt: with every preset, and with policies
// that retry by chance or back off throttling with jitter, a retrier whose
// Samples is false decides the same whatever u is (what a caller that
// skips the draw relies on); and the ones that retry by chance or with
// jitter, with no budget to stop them, decide differently for some u.
func TestSamples(t *testing.T) {
	half := 0.5
	jittered := backoff.Policy{Kind: backoff.FullJitter, Base: 100 * time.Millisecond, Cap: 10 * time.Second}
	policies := map[string]Policy{
		"chance":          {MaxAttempts: 4, Backoff: backoff.Policy{Kind: backoff.None}, RetryProbability: &half},
		"throttle-jitter": {MaxAttempts: 4, Backoff: backoff.Policy{Kind: backoff.Constant, Base: time.Second}, ThrottleBackoff: &jittered},
		"constant":        constPolicy(4, time.Second),
	}
	for _, name := range Presets() {
		policies[name], _ = Preset(name)
	}
	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			// The same failures, answered with u = 0.1 and with u = 0.9.
			decide := func(u float64) []Decision {
				r := MustNew(p)
				var ds []Decision
				for _, cls := range []Class{Transient, Throttling, Timeout} {
					now := t0
					c := r.StartAt(now, time.Time{})
					for range p.MaxAttempts {
						now = now.Add(10 * time.Millisecond)
						d := r.EndAt(now, &c, cls, Signal{}, u)
						ds = append(ds, d)
						if !d.Retry {
							break
						}
						now = now.Add(d.Delay)
						r.NextAt(now, &c)
					}
				}
				return ds
			}
			a, b := decide(0.1), decide(0.9)
			same := len(a) == len(b)
			for i := range min(len(a), len(b)) {
				same = same && a[i].Retry == b[i].Retry && a[i].Delay == b[i].Delay && errors.Is(a[i].Reason, b[i].Reason)
			}
			samples := MustNew(p).Samples()
			if !samples && !same {
				t.Errorf("Samples() is false, but the decisions differ with u = 0.1 and 0.9:\n%+v\n%+v", a, b)
			}
			if varies := name == "chance" || name == "throttle-jitter" || name == "stormguard"; varies && same {
				t.Errorf("Samples() = %v, but the decisions with u = 0.1 and 0.9 are the same", samples)
			}
			if name == "naive" && samples {
				t.Error("Samples() is true for naive, which neither jitters nor retries by chance")
			}
		})
	}
}

// unlimitedViaIface is budget.Unlimited under another type: a retrier does
// not know it for Unlimited and calls its methods through the interface.
type unlimitedViaIface struct{ budget.Unlimited }

// TestUnlimitedSkipsBudget: a retrier whose budget is budget.Unlimited skips
// the budget's calls (BeginAt, EndAt, RetryAt) on its hot paths; its Calls
// and decisions are those of one that makes them through the interface.
// StartInto fills a used Call as StartAt builds one.
func TestUnlimitedSkipsBudget(t *testing.T) {
	for _, p := range []Policy{constPolicy(3, 0), constPolicy(4, 20*time.Millisecond)} {
		p.Budget = budget.Spec{Kind: budget.KindNone}
		fast := MustNew(p)
		slow := MustNew(p, WithBudget(unlimitedViaIface{}))
		if !fast.unlimited || slow.unlimited {
			t.Fatalf("unlimited: %v and %v, want true and false", fast.unlimited, slow.unlimited)
		}
		for _, dl := range []time.Time{{}, t0.Add(time.Second)} {
			var a, b Call
			a.attempt, a.prev, a.took, a.ticket = 7, time.Second, time.Second, budget.NewTicket(5)
			fast.StartInto(&a, t0, dl)
			b = slow.StartAt(t0, dl)
			if a != b {
				t.Fatalf("StartInto: %+v, StartAt: %+v", a, b)
			}
			now := t0
			for i, cls := range []Class{Timeout, Transient, Throttling, Timeout} {
				now = now.Add(10 * time.Millisecond)
				da := fast.EndAt(now, &a, cls, Signal{}, 0.5)
				db := slow.EndAt(now, &b, cls, Signal{}, 0.5)
				if da != db || a != b {
					t.Fatalf("attempt %d: %+v %+v against %+v %+v", i+1, da, a, db, b)
				}
				if !da.Retry {
					break
				}
				now = now.Add(da.Delay)
				fast.NextAt(now, &a)
				slow.NextAt(now, &b)
			}
		}
	}
}

// TestDeafIgnoresSignal: a policy that ignores pushback and signals alike
// (the naive and aws-legacy presets; EndAt skips the Signal) decides on
// every signal as on none; one that ignores only one of them still hears
// the other.
func TestDeafIgnoresSignal(t *testing.T) {
	sigs := []Signal{
		{BadPushback: true},
		{HasPushback: true, Pushback: 300 * time.Millisecond},
		{Overload: wire.OverloadService},
		{Exhausted: true},
		{Overload: wire.OverloadInstance, HasPushback: true, Pushback: time.Second},
	}
	for _, ignore := range [][2]bool{{true, true}, {true, false}, {false, true}} {
		p := constPolicy(3, 20*time.Millisecond)
		p.Pushback.Ignore, p.IgnoreSignals = ignore[0], ignore[1]
		r := MustNew(p)
		if r.deaf != (ignore[0] && ignore[1]) {
			t.Fatalf("ignore %v: deaf = %v", ignore, r.deaf)
		}
		c := r.StartAt(t0, time.Time{})
		none := r.EndAt(t0, &c, Transient, Signal{}, 0.5)
		heard := 0
		for _, sig := range sigs {
			c := r.StartAt(t0, time.Time{})
			if d := r.EndAt(t0, &c, Transient, sig, 0.5); d != none {
				heard++
			}
		}
		if r.deaf != (heard == 0) {
			t.Errorf("ignore pushback %v, signals %v: %d of %d signals changed the decision", ignore[0], ignore[1], heard, len(sigs))
		}
	}
}
