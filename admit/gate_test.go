package admit_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/wire"
)

// A request's way through the steps before the queue: the kill switch, the
// deadline, the throttle, in that order, and what an admitted request's
// ticket carries.
func TestAdmitArrival(t *testing.T) {
	shedAll := new(killswitch.Dials)
	if err := shedAll.SetShedFraction(1); err != nil {
		t.Fatal(err)
	}
	shedNone := new(killswitch.Dials)
	tests := []struct {
		name       string
		cfg        admit.Config
		req        admit.Request
		ctxIn      time.Duration // the context's deadline, from now; 0: none
		throttle   int           // 0: no Throttle; 1: it says yes; -1: it says no
		want       admit.Decision
		wantDL     time.Duration // admitted: the ticket's deadline, from now
		wantAsked  bool          // Throttle was asked
		wantRetry  bool          // counted as a retry
		wantTry    int
		wantCrit   wire.Criticality
		wantExpire bool
	}{
		{name: "admitted, the server's maximum", cfg: admit.Config{MaxTimeout: time.Second},
			req: first, wantDL: time.Second, wantTry: 1},
		{name: "the default maximum", req: first, wantDL: admit.DefaultMaxTimeout, wantTry: 1},
		{name: "the caller's timeout shortens it", cfg: admit.Config{MaxTimeout: time.Second},
			req: admit.Request{Timeout: 200 * time.Millisecond, HasTimeout: true}, wantDL: 200 * time.Millisecond, wantTry: 1},
		{name: "the caller's timeout cannot extend it", cfg: admit.Config{MaxTimeout: time.Second},
			req: admit.Request{Timeout: time.Hour, HasTimeout: true}, wantDL: time.Second, wantTry: 1},
		{name: "a timeout not stated is ignored", cfg: admit.Config{MaxTimeout: time.Second},
			req: admit.Request{Timeout: time.Millisecond}, wantDL: time.Second, wantTry: 1},
		{name: "the context's deadline counts when sooner", cfg: admit.Config{MaxTimeout: time.Second},
			req: first, ctxIn: 300 * time.Millisecond, wantDL: 300 * time.Millisecond, wantTry: 1},
		{name: "timeout 0: expired", req: admit.Request{HasTimeout: true},
			want: admit.Decision{Answer: admit.Expired}, wantExpire: true},
		{name: "exactly MinRemaining left: expired", cfg: admit.Config{MinRemaining: 5 * time.Millisecond},
			req:  admit.Request{Timeout: 5 * time.Millisecond, HasTimeout: true},
			want: admit.Decision{Answer: admit.Expired}, wantExpire: true},
		{name: "more than MinRemaining left: admitted", cfg: admit.Config{MinRemaining: 5 * time.Millisecond},
			req: admit.Request{Timeout: 6 * time.Millisecond, HasTimeout: true}, wantDL: 6 * time.Millisecond, wantTry: 1},
		{name: "the context's deadline passed: expired", req: first, ctxIn: -time.Millisecond,
			want: admit.Decision{Answer: admit.Expired}, wantExpire: true},
		{name: "kill switch", cfg: admit.Config{Dials: shedAll}, req: first, throttle: -1,
			want: admit.Decision{Answer: admit.ServiceOverloaded, Reason: admit.ShedKillSwitch}},
		{name: "kill switch before the deadline", cfg: admit.Config{Dials: shedAll}, req: admit.Request{HasTimeout: true},
			want: admit.Decision{Answer: admit.ServiceOverloaded, Reason: admit.ShedKillSwitch}},
		{name: "kill switch at 0", cfg: admit.Config{Dials: shedNone}, req: first, wantDL: admit.DefaultMaxTimeout, wantTry: 1},
		{name: "throttled", req: first, throttle: 1, wantAsked: true,
			want: admit.Decision{Answer: admit.Throttled, Reason: admit.ShedThrottled}},
		{name: "expired before throttled", req: admit.Request{HasTimeout: true}, throttle: 1,
			want: admit.Decision{Answer: admit.Expired}, wantExpire: true},
		{name: "not throttled", req: first, throttle: -1, wantAsked: true, wantDL: admit.DefaultMaxTimeout, wantTry: 1},
		{name: "attempt below 1 counts as 1", req: admit.Request{Attempt: 0}, wantDL: admit.DefaultMaxTimeout, wantTry: 1},
		{name: "a retry, sheddable", req: admit.Request{Attempt: 3, Criticality: wire.Sheddable},
			wantDL: admit.DefaultMaxTimeout, wantRetry: true, wantTry: 3, wantCrit: wire.Sheddable},
		{name: "a refused retry is counted as one", cfg: admit.Config{Dials: shedAll}, req: retry, wantRetry: true,
			want: admit.Decision{Answer: admit.ServiceOverloaded, Reason: admit.ShedKillSwitch}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGate(t, tt.cfg)
			now := time.Now()
			ctx := context.Background()
			if tt.ctxIn != 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(tt.ctxIn))
				defer cancel()
			}
			req := tt.req
			asked := false
			if tt.throttle != 0 {
				req.Throttle = func() bool { asked = true; return tt.throttle > 0 }
			}
			tk, got := g.Admit(ctx, now, req)
			if got != tt.want {
				t.Errorf("decision %+v; want %+v", got, tt.want)
			}
			if asked != tt.wantAsked {
				t.Errorf("Throttle asked: %v; want %v", asked, tt.wantAsked)
			}
			st := g.Stats()
			wantShed := [admit.NumShedReasons]uint64{}
			if !got.Admitted() && got.Answer != admit.Expired {
				wantShed[tt.want.Reason] = 1
			}
			if st.Arrived != 1 || (st.Retries == 1) != tt.wantRetry || st.Shed != wantShed || (st.Expired == 1) != tt.wantExpire || st.ExpiredQueued != 0 {
				t.Errorf("stats %+v; want 1 arrived, retry %v, shed %v, expired %v", st, tt.wantRetry, wantShed, tt.wantExpire)
			}
			if got.Admitted() {
				if st.InFlight != 1 || st.Started() != 1 {
					t.Errorf("in flight %d, started %d; want 1, 1", st.InFlight, st.Started())
				}
				if dl := tk.Deadline(); !dl.Equal(now.Add(tt.wantDL)) {
					t.Errorf("deadline now%+v; want now+%v", dl.Sub(now), tt.wantDL)
				}
				if tk.Attempt() != tt.wantTry || tk.Criticality() != tt.wantCrit {
					t.Errorf("ticket attempt %d, criticality %v; want %d, %v", tk.Attempt(), tk.Criticality(), tt.wantTry, tt.wantCrit)
				}
				tk.Release(ctx, now, admit.Succeeded)
			} else if tk != (admit.Ticket{}) {
				t.Errorf("a refusal returned the ticket %+v; want the zero Ticket", tk)
			}
			checkBooks(t, g.Stats())
		})
	}
}

// The queue: a full queue refuses what it would not serve first and evicts
// what it would; ServiceSaturated turns an instance signal into a service
// signal; a released slot goes to the waiter, which reports its wait.
func TestAdmitQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var saturated atomic.Bool
		var w waits
		g := mustGate(t, admit.Config{
			Limit: fixed(1), Queue: shed.Config{Capacity: 1},
			ServiceSaturated: saturated.Load, OnQueueWait: w.add,
		})
		ctx := context.Background()
		hold, d := g.Admit(ctx, time.Now(), first)
		if !d.Admitted() {
			t.Fatalf("first request: %+v; want admitted", d)
		}
		waiter := admitAsync(g, ctx, first)
		synctest.Wait()
		if st := g.Stats(); st.Queued != 1 || st.InFlight != 1 {
			t.Fatalf("queued %d, in flight %d; want 1, 1", st.Queued, st.InFlight)
		}

		refusals := []struct {
			saturated bool
			want      admit.Decision
		}{
			{false, admit.Decision{Answer: admit.InstanceOverloaded, Reason: admit.ShedQueueFull}},
			{true, admit.Decision{Answer: admit.ServiceOverloaded, Reason: admit.ShedQueueFull}},
		}
		for _, r := range refusals {
			saturated.Store(r.saturated)
			if _, got := g.Admit(ctx, time.Now(), retry); got != r.want {
				t.Errorf("a retry at a full queue, saturated %v: %+v; want %+v", r.saturated, got, r.want)
			}
		}
		saturated.Store(false)

		time.Sleep(10 * time.Millisecond)
		hold.Release(ctx, time.Now(), admit.Succeeded)
		next := <-waiter
		if !next.d.Admitted() {
			t.Fatalf("waiter: %+v; want admitted", next.d)
		}

		// A retry waits; a first try evicts it.
		evictee := admitAsync(g, ctx, retry)
		synctest.Wait()
		newcomer := admitAsync(g, ctx, first)
		if got, want := (<-evictee).d, (admit.Decision{Answer: admit.InstanceOverloaded, Reason: admit.ShedEvicted}); got != want {
			t.Errorf("queued retry: %+v; want %+v", got, want)
		}
		time.Sleep(5 * time.Millisecond)
		next.t.Release(ctx, time.Now(), admit.Succeeded)
		last := <-newcomer
		if !last.d.Admitted() {
			t.Fatalf("first try: %+v; want admitted", last.d)
		}
		last.t.Release(ctx, time.Now(), admit.Succeeded)

		if got, want := w.list(), []time.Duration{0, 10 * time.Millisecond, 5 * time.Millisecond}; !slices.Equal(got, want) {
			t.Errorf("OnQueueWait got %v; want %v", got, want)
		}
		st := g.Stats()
		if st.Shed[admit.ShedQueueFull] != 2 || st.Shed[admit.ShedEvicted] != 1 || st.Goodput != 3 || st.Queue.Retries.Evicted != 1 {
			t.Errorf("stats %+v; want 2 queue-full, 1 evicted, 3 goodput", st)
		}
		checkBooks(t, st)
	})
}

// First tries are admitted before retries, and in arrival order among
// themselves.
func TestAdmitQueueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Limit: fixed(1)})
		ctx := context.Background()
		hold, _ := g.Admit(ctx, time.Now(), first)
		var order []string
		done := make(chan struct{})
		requests := []struct {
			name    string
			attempt int
		}{{"R1", 2}, {"F1", 1}, {"R2", 3}, {"F2", 1}}
		for _, rq := range requests {
			go func() {
				tk, d := g.Admit(ctx, time.Now(), admit.Request{Attempt: rq.attempt})
				if d.Admitted() {
					order = append(order, rq.name) // the slot is held: one at a time
					tk.Release(ctx, time.Now(), admit.Succeeded)
				}
				done <- struct{}{}
			}()
			synctest.Wait() // queued in this order
		}
		hold.Release(ctx, time.Now(), admit.Succeeded)
		for range requests {
			<-done
		}
		if want := []string{"F1", "F2", "R1", "R2"}; !slices.Equal(order, want) {
			t.Errorf("admitted %v; want %v", order, want)
		}
		checkBooks(t, g.Stats())
	})
}

// A request that waits in the queue is dropped when its time is up there,
// driven by the gate's timer: at its deadline less MinRemaining (expired),
// or past adaptive LIFO's queue timeout (instance overloaded).
func TestAdmitQueueExpiry(t *testing.T) {
	tests := []struct {
		name      string
		cfg       admit.Config
		req       admit.Request
		ctxIn     time.Duration // the context's deadline, from the start; 0: none
		want      admit.Decision
		wantAfter time.Duration
	}{
		{"deadline less MinRemaining", admit.Config{MinRemaining: 5 * time.Millisecond},
			admit.Request{Timeout: 50 * time.Millisecond, HasTimeout: true}, 0,
			admit.Decision{Answer: admit.Expired}, 45 * time.Millisecond},
		{"deadline", admit.Config{}, admit.Request{Timeout: 40 * time.Millisecond, HasTimeout: true}, 0,
			admit.Decision{Answer: admit.Expired}, 40 * time.Millisecond},
		{"the context's deadline", admit.Config{}, first, 30 * time.Millisecond,
			admit.Decision{Answer: admit.Expired}, 30 * time.Millisecond},
		{"CoDel queue timeout", admit.Config{Queue: shed.Config{Order: shed.AdaptiveLIFO, CoDelTarget: 5 * time.Millisecond, CoDelInterval: 30 * time.Millisecond}},
			first, 0, admit.Decision{Answer: admit.InstanceOverloaded, Reason: admit.ShedQueueTimeout}, 30 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := tt.cfg
				cfg.Limit = fixed(1)
				g := mustGate(t, cfg)
				hold, _ := g.Admit(context.Background(), time.Now(), first)
				start := time.Now()
				ctx := context.Background()
				if tt.ctxIn != 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.ctxIn)
					defer cancel()
				}
				r := <-admitAsync(g, ctx, tt.req)
				if took := time.Since(start); r.d != tt.want || took != tt.wantAfter {
					t.Errorf("got %+v after %v; want %+v after %v", r.d, took, tt.want, tt.wantAfter)
				}
				if st := g.Stats(); st.Queued != 0 || st.ShedTotal()+st.Expired != 1 || st.ExpiredQueued != st.Expired {
					t.Errorf("stats %+v; want nothing queued, one dropped, every expiry in the queue", st)
				}
				hold.Release(context.Background(), time.Now(), admit.Succeeded)
				checkBooks(t, g.Stats())
			})
		})
	}
}

// A waiter whose caller goes away leaves the queue at once, is counted as
// canceled, and its slot is not lost.
func TestAdmitCallerLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Limit: fixed(1)})
		hold, _ := g.Admit(context.Background(), time.Now(), first)
		ctx, cancel := context.WithCancel(context.Background())
		gone := admitAsync(g, ctx, first)
		synctest.Wait()
		cancel()
		if got := (<-gone).d; got != (admit.Decision{Answer: admit.Canceled}) {
			t.Errorf("caller left: %+v; want canceled", got)
		}
		if st := g.Stats(); st.Queued != 0 || st.Canceled != 1 {
			t.Errorf("queued %d, canceled %d; want 0, 1", st.Queued, st.Canceled)
		}
		hold.Release(context.Background(), time.Now(), admit.Succeeded)
		next, d := g.Admit(context.Background(), time.Now(), first)
		if !d.Admitted() {
			t.Fatalf("next request: %+v; want admitted at once", d)
		}
		next.Release(context.Background(), time.Now(), admit.Succeeded)
		checkBooks(t, g.Stats())
	})
}

// A waiter whose caller leaves just as the slot is handed to it either
// takes it or passes it on; either way it is counted once and the slot is
// not lost.
func TestAdmitCallerLeavesAsAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Limit: fixed(1)})
		seen := map[admit.Answer]int{}
		const rounds = 50
		for range rounds {
			hold, _ := g.Admit(context.Background(), time.Now(), first)
			ctx, cancel := context.WithCancel(context.Background())
			waiter := admitAsync(g, ctx, first)
			synctest.Wait()
			cancel()                                                        // the caller leaves…
			hold.Release(context.Background(), time.Now(), admit.Succeeded) // …as the slot is freed
			r := <-waiter
			seen[r.d.Answer]++
			r.t.Release(ctx, time.Now(), admit.Succeeded)
		}
		if seen[admit.Admitted]+seen[admit.Canceled] != rounds {
			t.Errorf("answers %v; want admitted or canceled", seen)
		}
		st := g.Stats()
		if st.Canceled != uint64(seen[admit.Canceled]) || g.Limiter().InFlight() != 0 {
			t.Errorf("stats %+v, limiter in flight %d; want %d canceled, none in flight", st, g.Limiter().InFlight(), seen[admit.Canceled])
		}
		checkBooks(t, st)
	})
}

// How a ticket's release is counted and what the limit learns: only work
// served normally is an RTT sample; overload and lateness are drops; the
// caller's choices and bugs are no sample at all.
func TestTicketRelease(t *testing.T) {
	const (
		noSample = iota
		success
		dropped
	)
	const timeout = 100 * time.Millisecond
	tests := []struct {
		name       string
		o          admit.Outcome
		at         time.Duration // the work ended this long after arrival
		callerLeft bool
		wantSample int
		count      func(admit.Stats) uint64
	}{
		{"succeeded", admit.Succeeded, 10 * time.Millisecond, false, success, goodput},
		{"succeeded untimed", admit.SucceededUntimed, 10 * time.Millisecond, false, noSample, goodput},
		{"failed from overload", admit.FailedOverload, 10 * time.Millisecond, false, dropped, failed},
		{"failed", admit.Failed, 10 * time.Millisecond, false, noSample, failed},
		{"panicked", admit.Panicked, 10 * time.Millisecond, false, noSample, failed},
		{"panicked late", admit.Panicked, timeout, true, noSample, failed},
		{"succeeded at the deadline", admit.Succeeded, timeout, false, dropped, wasted},
		{"succeeded after the caller left", admit.Succeeded, 10 * time.Millisecond, true, noSample, wasted},
		{"caller left, then the deadline passed", admit.Failed, 2 * timeout, true, dropped, wasted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alg := &recordingAlg{n: 10}
			g := mustGate(t, admit.Config{Limiter: limit.NewLimiter(alg)})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			now := time.Now()
			tk, d := g.Admit(ctx, now, admit.Request{Timeout: timeout, HasTimeout: true})
			if !d.Admitted() {
				t.Fatalf("%+v; want admitted", d)
			}
			if tt.callerLeft {
				cancel()
			}
			tk.Release(ctx, now.Add(tt.at), tt.o)
			st := g.Stats()
			if n := tt.count(st); n != 1 {
				t.Errorf("outcome counter %d; want 1: %+v", n, st)
			}
			// Wasted work past its deadline is told apart from work
			// whose caller left first.
			if wantLate := uint64(0); tt.o != admit.Panicked {
				if tt.at >= timeout {
					wantLate = 1
				}
				if st.WastedLate != wantLate {
					t.Errorf("WastedLate %d; want %d: %+v", st.WastedLate, wantLate, st)
				}
			}
			checkBooks(t, st)
			s := alg.got()
			switch tt.wantSample {
			case noSample:
				if len(s) != 0 {
					t.Errorf("samples %+v; want none", s)
				}
			default:
				if len(s) != 1 || s[0].Dropped != (tt.wantSample == dropped) || s[0].RTT != tt.at {
					t.Errorf("samples %+v; want one of RTT %v, dropped %v", s, tt.at, tt.wantSample == dropped)
				}
			}
			if n := g.Limiter().InFlight(); n != 0 {
				t.Errorf("limiter in flight %d after the release; want 0", n)
			}
		})
	}
}

func goodput(st admit.Stats) uint64 { return st.Goodput }
func failed(st admit.Stats) uint64  { return st.Failed }
func wasted(st admit.Stats) uint64  { return st.Wasted }

// The zero Ticket, a refused request's, holds nothing.
func TestZeroTicketRelease(t *testing.T) {
	var tk admit.Ticket
	tk.Release(context.Background(), time.Now(), admit.Succeeded) // must not panic
	if tk.Attempt() != 0 || !tk.Deadline().IsZero() {
		t.Errorf("zero ticket: attempt %d, deadline %v", tk.Attempt(), tk.Deadline())
	}
}

// The context a ticket binds carries the request's deadline, attempt
// number and criticality.
func TestTicketBind(t *testing.T) {
	g := mustGate(t, admit.Config{})
	now := time.Now()
	tk, _ := g.Admit(context.Background(), now, admit.Request{Attempt: 2, Criticality: wire.CriticalPlus, TrustedCriticality: true, Timeout: time.Second, HasTimeout: true})
	defer tk.Release(context.Background(), time.Now(), admit.Succeeded)
	ctx, cancel := tk.Bind(context.Background())
	defer cancel()
	dl, ok := ctx.Deadline()
	if !ok || !dl.Equal(now.Add(time.Second)) || deadline.Attempt(ctx) != 2 || deadline.Criticality(ctx) != wire.CriticalPlus {
		t.Errorf("context: deadline %v (%v), attempt %d, criticality %v; want now+1s, 2, critical-plus",
			dl.Sub(now), ok, deadline.Attempt(ctx), deadline.Criticality(ctx))
	}
}

// The criticality a request runs with: the caller's claim, lowered to
// MaxCriticality unless the shell vouched for the caller, and clamped to
// the four levels. Claims below the cap are always taken.
func TestAdmitCriticalityCap(t *testing.T) {
	tests := []struct {
		max     wire.Criticality
		claim   wire.Criticality
		trusted bool
		want    wire.Criticality
	}{
		{wire.Critical, wire.CriticalPlus, false, wire.Critical}, // the default cap
		{wire.Critical, wire.CriticalPlus, true, wire.CriticalPlus},
		{wire.Critical, wire.Critical, false, wire.Critical},
		{wire.Critical, wire.SheddablePlus, false, wire.SheddablePlus},
		{wire.Critical, wire.Sheddable, false, wire.Sheddable},
		{wire.Critical, 100, false, wire.Critical},
		{wire.Critical, 100, true, wire.CriticalPlus},
		{wire.Critical, -100, false, wire.Sheddable},
		{wire.CriticalPlus, wire.CriticalPlus, false, wire.CriticalPlus},
		{wire.Sheddable, wire.CriticalPlus, false, wire.Sheddable},
		{wire.Sheddable, wire.SheddablePlus, false, wire.Sheddable},
		{wire.Sheddable, wire.CriticalPlus, true, wire.CriticalPlus},
		{wire.SheddablePlus, wire.Critical, false, wire.SheddablePlus},
	}
	for _, tt := range tests {
		g := mustGate(t, admit.Config{MaxCriticality: tt.max})
		tk, d := g.Admit(context.Background(), time.Now(), admit.Request{Criticality: tt.claim, TrustedCriticality: tt.trusted})
		if !d.Admitted() {
			t.Fatalf("refused: %+v", d)
		}
		if got := tk.Criticality(); got != tt.want {
			t.Errorf("max %v, claim %v, trusted %v: runs as %v; want %v", tt.max, tt.claim, tt.trusted, got, tt.want)
		}
		tk.Release(context.Background(), time.Now(), admit.Succeeded)
	}
}

// max_criticality decodes from its level's name and refuses anything else.
func TestConfigMaxCriticalityJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    wire.Criticality
		wantErr bool
	}{
		{`{}`, wire.Critical, false},
		{`{"max_criticality": "critical-plus"}`, wire.CriticalPlus, false},
		{`{"max_criticality": "sheddable"}`, wire.Sheddable, false},
		{`{"max_criticality": "top"}`, 0, true},
		{`{"max_criticality": 1}`, 0, true},
	}
	for _, tt := range tests {
		var c admit.Config
		err := json.Unmarshal([]byte(tt.in), &c)
		if (err != nil) != tt.wantErr || (!tt.wantErr && c.MaxCriticality != tt.want) {
			t.Errorf("%s: %v, %v; want %v (error %v)", tt.in, c.MaxCriticality, err, tt.want, tt.wantErr)
		}
	}
	b, err := json.Marshal(admit.Config{MaxCriticality: wire.CriticalPlus})
	if err != nil || !strings.Contains(string(b), `"max_criticality":"critical-plus"`) {
		t.Errorf("Marshal: %s, %v; want max_criticality as its name", b, err)
	}
}

// Validate names the field at fault by its configuration name, and New
// refuses what Validate refuses.
func TestConfigValidate(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		cfg       admit.Config
		wantField string // in the message; "" for a valid config
	}{
		{admit.Config{}, ""},
		{admit.Config{MaxTimeout: 5 * time.Second, MinRemaining: ms, RetryAfter: 2 * time.Second,
			Limit: limit.Spec{Kind: limit.KindGradient2}, Queue: shed.Config{Capacity: 10, Order: shed.AdaptiveLIFO}}, ""},
		{admit.Config{Queue: shed.Config{MinRemaining: ms}}, ""},
		{admit.Config{MinRemaining: ms, Queue: shed.Config{MinRemaining: ms}}, ""},
		{admit.Config{MinRemaining: ms, Queue: shed.Config{MinRemaining: 2 * ms}}, "min_remaining"},
		{admit.Config{MaxTimeout: -1}, "max_timeout"},
		{admit.Config{RetryAfter: -1}, "retry_after"},
		{admit.Config{RetryAfter: wire.MaxPushback}, ""},
		{admit.Config{RetryAfter: wire.MaxPushback + 1}, "retry_after"},
		{admit.Config{MinRemaining: -1}, "min_remaining"},
		{admit.Config{MaxTimeout: time.Second, MinRemaining: time.Second}, "min_remaining"},
		{admit.Config{Queue: shed.Config{Order: "random"}}, "queue"},
		{admit.Config{Limit: limit.Spec{Kind: limit.KindFixed}}, "limit"},
		{admit.Config{Limit: limit.Spec{Kind: limit.KindFixed}, Limiter: limit.NewLimiter(limit.Fixed{N: 2})}, ""},
		{admit.Config{MaxCriticality: wire.CriticalPlus}, ""},
		{admit.Config{MaxCriticality: wire.Sheddable}, ""},
		{admit.Config{MaxCriticality: wire.CriticalPlus + 1}, "max_criticality"},
		{admit.Config{MaxCriticality: wire.Sheddable - 1}, "max_criticality"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		g, nerr := admit.New(tt.cfg)
		switch {
		case tt.wantField == "" && (err != nil || nerr != nil || g == nil):
			t.Errorf("%+v: Validate %v, New %v; want valid", tt.cfg, err, nerr)
		case tt.wantField == "":
		case err == nil || nerr == nil || g != nil:
			t.Errorf("%+v: Validate %v, New %v; want both to fail", tt.cfg, err, nerr)
		case !errors.Is(err, admit.ErrInvalidConfig) || !strings.Contains(err.Error(), ": "+tt.wantField):
			t.Errorf("%+v: %q; want ErrInvalidConfig naming %s", tt.cfg, err, tt.wantField)
		}
	}
}

func TestConfigWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		cfg  admit.Config
		want admit.Config
	}{
		{"zero", admit.Config{}, admit.Config{MaxTimeout: admit.DefaultMaxTimeout, RetryAfter: admit.DefaultRetryAfter}},
		{"min remaining from the queue", admit.Config{Queue: shed.Config{MinRemaining: time.Millisecond}},
			admit.Config{MaxTimeout: admit.DefaultMaxTimeout, RetryAfter: admit.DefaultRetryAfter, MinRemaining: time.Millisecond, Queue: shed.Config{MinRemaining: time.Millisecond}}},
		{"min remaining to the queue", admit.Config{MaxTimeout: time.Second, RetryAfter: 2 * time.Second, MinRemaining: time.Millisecond},
			admit.Config{MaxTimeout: time.Second, RetryAfter: 2 * time.Second, MinRemaining: time.Millisecond, Queue: shed.Config{MinRemaining: time.Millisecond}}},
	}
	for _, tt := range tests {
		got := tt.cfg.WithDefaults()
		if got.MaxTimeout != tt.want.MaxTimeout || got.RetryAfter != tt.want.RetryAfter || got.MinRemaining != tt.want.MinRemaining || got.Queue != tt.want.Queue {
			t.Errorf("%s: got %+v; want %+v", tt.name, got, tt.want)
		}
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{admit.ShedQueueFull.String(), "queue-full"},
		{admit.ShedEvicted.String(), "evicted"},
		{admit.ShedQueueTimeout.String(), "queue-timeout"},
		{admit.ShedKillSwitch.String(), "kill-switch"},
		{admit.ShedThrottled.String(), "throttled"},
		{admit.ShedKeyBusy.String(), "key-busy"},
		{admit.ShedReason(99).String(), "admit.ShedReason(99)"},
		{admit.Admitted.String(), "admitted"},
		{admit.InstanceOverloaded.String(), "instance-overloaded"},
		{admit.ServiceOverloaded.String(), "service-overloaded"},
		{admit.Throttled.String(), "throttled"},
		{admit.Expired.String(), "expired"},
		{admit.Canceled.String(), "canceled"},
		{admit.Superseded.String(), "superseded"},
		{admit.Joined.String(), "joined"},
		{admit.Answer(99).String(), "admit.Answer(99)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q; want %q", tt.got, tt.want)
		}
	}
}

// OnRefuse is told of every request not admitted, once, with its context,
// attempt number and decision, and of no request admitted.
func TestOnRefuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type refusal struct {
			mine    bool
			attempt int
			d       admit.Decision
		}
		var got []refusal
		dials := new(killswitch.Dials)
		g := mustGate(t, admit.Config{
			Limit: fixed(1), Queue: shed.Config{Capacity: 1}, Dials: dials,
			OnRefuse: func(ctx context.Context, attempt int, d admit.Decision) {
				got = append(got, refusal{ctx.Value(ctxKey{}) == "mine", attempt, d})
			},
		})
		ctx := context.WithValue(context.Background(), ctxKey{}, "mine")
		hold, _ := g.Admit(ctx, time.Now(), first)
		_, _ = g.Admit(ctx, time.Now(), admit.Request{Attempt: 2, HasTimeout: true}) // expired on arrival
		if err := dials.SetShedFraction(1); err != nil {
			t.Fatal(err)
		}
		_, _ = g.Admit(ctx, time.Now(), retry) // the kill switch
		_ = dials.SetShedFraction(0)
		waiter := admitAsync(g, ctx, first)
		synctest.Wait()
		_, _ = g.Admit(ctx, time.Now(), retry) // the queue is full
		hold.Release(ctx, time.Now(), admit.Succeeded)
		w := <-waiter
		w.t.Release(ctx, time.Now(), admit.Succeeded)
		want := []refusal{
			{true, 2, admit.Decision{Answer: admit.Expired}},
			{true, 2, admit.Decision{Answer: admit.ServiceOverloaded, Reason: admit.ShedKillSwitch}},
			{true, 2, admit.Decision{Answer: admit.InstanceOverloaded, Reason: admit.ShedQueueFull}},
		}
		if !slices.Equal(got, want) {
			t.Errorf("OnRefuse saw %+v; want %+v", got, want)
		}
		checkBooks(t, g.Stats())
	})
}

type ctxKey struct{}
