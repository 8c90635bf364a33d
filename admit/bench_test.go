package admit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
)

// rejectCase is a Gate set up so that req is refused as want says.
type rejectCase struct {
	name string
	g    *admit.Gate
	req  admit.Request
	want admit.Answer
}

// rejectCases builds one gate per refusal path: the kill switch, an
// expired deadline, a throttled client, and a full queue (the limit taken,
// the queue holding a first try, and a retry arriving).
func rejectCases(tb testing.TB) []rejectCase {
	tb.Helper()
	dials := new(killswitch.Dials)
	if err := dials.SetShedFraction(1); err != nil {
		tb.Fatal(err)
	}
	second := admit.Request{Attempt: 1, Timeout: time.Second, HasTimeout: true}

	// The full queue: hold the only permit and park a first try in the
	// queue of one, on a goroutine that leaves when the test ends.
	lim := limit.NewLimiter(limit.Fixed{N: 1})
	// The parked first try must outlive any benchmark run: an hour's
	// deadline (a 1 s one expired mid-run and emptied the queue).
	full := mustGate(tb, admit.Config{Limiter: lim, Queue: shed.Config{Capacity: 1}, MaxTimeout: time.Hour})
	p, _ := lim.Acquire()
	ctx, cancel := context.WithCancel(context.Background())
	parked := make(chan struct{})
	go func() {
		defer close(parked)
		full.Admit(ctx, time.Now(), admit.Request{Attempt: 1, Timeout: time.Hour, HasTimeout: true})
	}()
	tb.Cleanup(func() { cancel(); <-parked; p.Ignore() })
	for end := time.Now().Add(hostspeed.Scale(5 * time.Second)); full.Stats().Queued != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			tb.Fatal("the first try was not queued")
		}
	}

	throttled := second
	throttled.Throttle = func() bool { return true }
	expired := second
	expired.Timeout = 0
	retried := second
	retried.Attempt = 2
	return []rejectCase{
		{"kill-switch", mustGate(tb, admit.Config{Dials: dials}), second, admit.ServiceOverloaded},
		{"expired", mustGate(tb, admit.Config{}), expired, admit.Expired},
		{"throttled", mustGate(tb, admit.Config{}), throttled, admit.Throttled},
		{"queue-full", full, retried, admit.InstanceOverloaded},
	}
}

// BenchmarkReject measures the gate's refusal paths. Target: well under
// 1 µs and 0 allocations.
func BenchmarkReject(b *testing.B) {
	ctx := context.Background()
	for _, rc := range rejectCases(b) {
		b.Run(rc.name, func(b *testing.B) {
			if _, d := rc.g.Admit(ctx, time.Now(), rc.req); d.Answer != rc.want {
				b.Fatalf("answer %v; want %v", d.Answer, rc.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				rc.g.Admit(ctx, time.Now(), rc.req)
			}
		})
	}
}

// The refusal paths allocate nothing.
func TestRejectNoAllocs(t *testing.T) {
	if raceEnabled || testing.CoverMode() != "" {
		t.Skip("the race detector and coverage change allocation counts")
	}
	leakcheck.Check(t)
	ctx := context.Background()
	for _, rc := range rejectCases(t) {
		if _, d := rc.g.Admit(ctx, time.Now(), rc.req); d.Answer != rc.want {
			t.Errorf("%s: answer %v; want %v", rc.name, d.Answer, rc.want)
		}
		if n := testing.AllocsPerRun(100, func() { rc.g.Admit(ctx, time.Now(), rc.req) }); n != 0 {
			t.Errorf("%s: %v allocations per refusal; want 0", rc.name, n)
		}
	}
}

// BenchmarkAdmitRelease measures the fast path: admitted at once, released
// as a success.
func BenchmarkAdmitRelease(b *testing.B) {
	g := mustGate(b, admit.Config{})
	ctx := context.Background()
	req := admit.Request{Attempt: 1, Timeout: time.Second, HasTimeout: true}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := time.Now()
			t, _ := g.Admit(ctx, now, req)
			t.Release(ctx, now, admit.Succeeded)
		}
	})
}
