package limit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/killswitch"
)

var t0 = time.Unix(1_700_000_000, 0)

// spy is an Algorithm that records its samples.
type spy struct {
	limit   int
	samples []Sample
}

func (s *spy) Update(x Sample) int { s.samples = append(s.samples, x); return s.limit }
func (s *spy) Limit() int          { return s.limit }

func TestLimiterRefusesAtLimit(t *testing.T) {
	l := NewLimiter(Fixed{N: 3})
	var permits []Permit
	for i := range 3 {
		p, ok := l.AcquireAt(t0)
		if !ok {
			t.Fatalf("acquire %d refused below the limit", i+1)
		}
		permits = append(permits, p)
	}
	if _, ok := l.AcquireAt(t0); ok {
		t.Fatal("acquire 4 admitted at the limit")
	}
	if got := l.InFlight(); got != 3 {
		t.Fatalf("InFlight = %d, want 3 (a refusal must not count)", got)
	}
	permits[0].SuccessAt(t0.Add(ms))
	if _, ok := l.AcquireAt(t0); !ok {
		t.Fatal("acquire refused after a release")
	}
}

// TestLimiterOutcomes checks what each release method feeds the algorithm.
func TestLimiterOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		release func(p Permit, now time.Time)
		want    []Sample
	}{
		{"success", Permit.SuccessAt, []Sample{{Now: t0.Add(7 * ms), RTT: 7 * ms, InFlight: 2}}},
		{"dropped", Permit.DroppedAt, []Sample{{Now: t0.Add(7 * ms), RTT: 7 * ms, InFlight: 2, Dropped: true}}},
		{"ignore", Permit.IgnoreAt, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alg := &spy{limit: 5}
			l := NewLimiter(alg)
			first, _ := l.AcquireAt(t0.Add(-ms))
			p, ok := l.AcquireAt(t0)
			if !ok {
				t.Fatal("refused")
			}
			if p.Start() != t0 {
				t.Errorf("Start = %v, want %v", p.Start(), t0)
			}
			tc.release(p, t0.Add(7*ms))
			if len(alg.samples) != len(tc.want) || len(tc.want) == 1 && alg.samples[0] != tc.want[0] {
				t.Errorf("samples = %+v, want %+v", alg.samples, tc.want)
			}
			if got := l.InFlight(); got != 1 {
				t.Errorf("InFlight = %d, want 1", got)
			}
			first.IgnoreAt(t0)
		})
	}
}

func TestLimiterIgnoreKeepsAlgorithm(t *testing.T) {
	alg, err := NewVegas(VegasConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(alg)
	p, _ := l.AcquireAt(t0)
	p.SuccessAt(t0.Add(10 * ms))
	before := *alg
	for range 100 {
		p, _ := l.AcquireAt(t0)
		p.IgnoreAt(t0.Add(time.Hour)) // a caller that gave up: must not move the baseline
	}
	if *alg != before {
		t.Errorf("algorithm changed by IgnoreAt: %+v, want %+v", *alg, before)
	}
	if l.InFlight() != 0 {
		t.Errorf("InFlight = %d, want 0", l.InFlight())
	}
}

func TestLimiterDroppedLowersAIMD(t *testing.T) {
	alg, err := NewAIMD(AIMDConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(alg)
	tests := []struct {
		release func(p Permit, now time.Time)
		want    int
	}{
		{Permit.DroppedAt, 18},
		{Permit.DroppedAt, 16},
		{Permit.IgnoreAt, 16},
		{Permit.SuccessAt, 16}, // one in flight out of 16: application-limited
	}
	for i, tc := range tests {
		p, _ := l.AcquireAt(t0)
		tc.release(p, t0.Add(ms))
		if got := l.Limit(); got != tc.want {
			t.Fatalf("step %d: Limit = %d, want %d", i, got, tc.want)
		}
	}
}

func TestLimiterOverride(t *testing.T) {
	var d killswitch.Dials
	alg, err := NewAIMD(AIMDConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(alg, WithDials(&d))
	tests := []struct {
		override  int // 0: none
		admit     int // want this many admitted out of 100
		limit     int
		algorithm int
	}{
		{0, 20, 20, 20},
		{2, 2, 2, 20},
		{50, 50, 50, 20},
		{0, 20, 20, 20},
	}
	for _, tc := range tests {
		if err := d.SetLimitOverride(tc.override); err != nil {
			t.Fatal(err)
		}
		var permits []Permit
		for range 100 {
			if p, ok := l.AcquireAt(t0); ok {
				permits = append(permits, p)
			}
		}
		if len(permits) != tc.admit || l.Limit() != tc.limit || l.AlgorithmLimit() != tc.algorithm {
			t.Errorf("override %d: admitted %d, Limit %d, AlgorithmLimit %d; want %d, %d, %d",
				tc.override, len(permits), l.Limit(), l.AlgorithmLimit(), tc.admit, tc.limit, tc.algorithm)
		}
		for _, p := range permits {
			p.IgnoreAt(t0)
		}
	}
}

func TestPermitZero(t *testing.T) {
	l := NewLimiter(Fixed{N: 1})
	held, _ := l.AcquireAt(t0)
	refused, ok := l.AcquireAt(t0)
	if ok || refused != (Permit{}) {
		t.Fatalf("refused acquire = %+v, %v; want the zero Permit, false", refused, ok)
	}
	refused.SuccessAt(t0)
	refused.DroppedAt(t0)
	refused.IgnoreAt(t0)
	refused.Success()
	if got := l.InFlight(); got != 1 {
		t.Fatalf("InFlight = %d after releasing the zero Permit, want 1", got)
	}
	held.IgnoreAt(t0)
}

func TestLimiterWallClock(t *testing.T) {
	alg := &spy{limit: 10}
	l := NewLimiter(alg)
	for _, release := range []func(Permit){Permit.Success, Permit.Dropped, Permit.Ignore} {
		p, ok := l.Acquire()
		if !ok {
			t.Fatal("refused")
		}
		release(p)
	}
	if len(alg.samples) != 2 || alg.samples[0].RTT < 0 || alg.samples[0].Dropped || !alg.samples[1].Dropped {
		t.Errorf("samples = %+v, want a success then a drop with RTT ≥ 0", alg.samples)
	}
	if l.InFlight() != 0 {
		t.Errorf("InFlight = %d, want 0", l.InFlight())
	}
}

func TestNewLimiterNil(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewLimiter(nil) did not panic")
		}
	}()
	NewLimiter(nil)
}

// TestLimiterConcurrent hammers one limiter from many goroutines: the
// in-flight count must never go negative, never exceed a fixed limit, and
// come back to 0; with an adaptive algorithm, every outcome mixed.
func TestLimiterConcurrent(t *testing.T) {
	specs := map[string]Spec{
		"fixed":     {Kind: KindFixed, Limit: 4},
		"aimd":      {Kind: KindAIMD},
		"vegas":     {Kind: KindVegas},
		"gradient2": {Kind: KindGradient2},
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			alg, err := spec.New()
			if err != nil {
				t.Fatal(err)
			}
			var d killswitch.Dials
			l := NewLimiter(alg, WithDials(&d))
			const goroutines, rounds = 8, 2000
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range rounds {
						now := t0.Add(time.Duration(i) * ms)
						p, ok := l.AcquireAt(now)
						n := l.InFlight()
						if n < 0 || name == "fixed" && n > 4 {
							t.Errorf("InFlight = %d", n)
							return
						}
						if !ok {
							continue
						}
						end := now.Add(time.Duration(1+(g+i)%20) * ms)
						switch (g + i) % 5 {
						case 0:
							p.DroppedAt(end)
						case 1:
							p.IgnoreAt(end)
						default:
							p.SuccessAt(end)
						}
						if g == 0 && i%500 == 0 {
							_ = d.SetLimitOverride((i / 500) % 2 * 3)
						}
					}
				})
			}
			wg.Wait()
			if n := l.InFlight(); n != 0 {
				t.Errorf("InFlight = %d after all releases, want 0", n)
			}
			if lim := l.AlgorithmLimit(); lim < 1 {
				t.Errorf("AlgorithmLimit = %d, want ≥ 1", lim)
			}
		})
	}
}

// TestLimiterWordBounds checks the limits the state word cannot hold: an
// algorithm's limit or an override above 2³¹ − 1 acts as 2³¹ − 1, a limit
// below 0 as 0, and neither spills into the in-flight count or the lock.
func TestLimiterWordBounds(t *testing.T) {
	const top = 1<<31 - 1
	tests := []struct {
		name          string
		initial       int // the algorithm's limit before any sample
		update        int // what its Update returns
		override      int // 0: none
		wantAlgorithm int // after one sample
		wantLimit     int
		wantAdmit     bool // a second request, with one in flight
	}{
		{"ordinary", 5, 7, 0, 7, 7, true},
		{"update above the word", 5, 1 << 40, 0, top, top, true},
		{"initial above the word", 1 << 40, 3, 0, 3, 3, true},
		{"update zero", 5, 0, 0, 0, 0, false},
		{"update negative", 5, -9, 0, 0, 0, false},
		{"override above the word", 5, 7, 1 << 40, 7, top, true},
		{"override below the algorithm", 5, 7, 1, 7, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alg := &spy{limit: tc.initial}
			var d killswitch.Dials
			if err := d.SetLimitOverride(tc.override); err != nil {
				t.Fatal(err)
			}
			l := NewLimiter(alg, WithDials(&d))
			if got, want := l.AlgorithmLimit(), min(tc.initial, top); got != want {
				t.Errorf("AlgorithmLimit before any sample = %d, want %d", got, want)
			}
			alg.limit = tc.update
			p, ok := l.AcquireAt(t0)
			if !ok {
				t.Fatal("first acquire refused")
			}
			p.SuccessAt(t0.Add(ms))
			if got := l.AlgorithmLimit(); got != tc.wantAlgorithm {
				t.Errorf("AlgorithmLimit = %d, want %d", got, tc.wantAlgorithm)
			}
			if got := l.Limit(); got != tc.wantLimit {
				t.Errorf("Limit = %d, want %d", got, tc.wantLimit)
			}
			if got := l.InFlight(); got != 0 {
				t.Errorf("InFlight = %d, want 0", got)
			}
			if w := l.state.Load(); w&lockBit != 0 {
				t.Errorf("update lock still held after the release: state %#x", w)
			}
			held, _ := l.AcquireAt(t0)
			second, ok := l.AcquireAt(t0)
			if ok != tc.wantAdmit {
				t.Errorf("second acquire admitted = %v, want %v", ok, tc.wantAdmit)
			}
			held.IgnoreAt(t0)
			second.IgnoreAt(t0)
			if got := l.InFlight(); got != 0 {
				t.Errorf("InFlight after the second round = %d, want 0", got)
			}
		})
	}
}

// TestLimiterOverRelease checks that a permit released twice only makes the
// in-flight count wrong (as documented), and does not take or free the
// update lock or move the limit, which share its word.
func TestLimiterOverRelease(t *testing.T) {
	for _, release := range []struct {
		name string
		f    func(Permit, time.Time)
	}{{"success", Permit.SuccessAt}, {"dropped", Permit.DroppedAt}, {"ignore", Permit.IgnoreAt}} {
		t.Run(release.name, func(t *testing.T) {
			alg := &spy{limit: 5}
			l := NewLimiter(alg)
			p, _ := l.AcquireAt(t0)
			release.f(p, t0.Add(ms))
			release.f(p, t0.Add(ms))
			if got := l.InFlight(); got != -1 {
				t.Errorf("InFlight = %d after a double release, want -1", got)
			}
			if got := l.AlgorithmLimit(); got != 5 {
				t.Errorf("AlgorithmLimit = %d, want 5", got)
			}
			if w := l.state.Load(); w&lockBit != 0 {
				t.Fatalf("update lock held after a double release: state %#x", w)
			}
			// The lock still works: the next sample is fed.
			before := len(alg.samples)
			q, _ := l.AcquireAt(t0)
			q.SuccessAt(t0.Add(ms))
			if got := len(alg.samples) - before; got != 1 {
				t.Errorf("%d samples fed after a double release, want 1", got)
			}
		})
	}
}

// TestLimiterLockHeld checks what a release does while another holds the
// update lock: a release with a sample waits (still in flight, nothing fed)
// until the lock is freed, then feeds its sample; IgnoreAt, which has no
// sample, leaves at once.
func TestLimiterLockHeld(t *testing.T) {
	tests := []struct {
		name     string
		release  func(Permit, time.Time)
		waits    bool
		wantFeed int
	}{
		{"success", Permit.SuccessAt, true, 1},
		{"dropped", Permit.DroppedAt, true, 1},
		{"ignore", Permit.IgnoreAt, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alg := &spy{limit: 5}
			l := NewLimiter(alg)
			p, _ := l.AcquireAt(t0)
			l.state.Add(lockBit) // another release is in Update, and stays there
			done := make(chan struct{})
			go func() {
				tc.release(p, t0.Add(ms))
				close(done)
			}()
			if tc.waits {
				select {
				case <-done:
					t.Fatal("the release returned while another held the update lock")
				case <-time.After(20 * time.Millisecond):
				}
				if got := l.InFlight(); got != 1 {
					t.Errorf("InFlight while waiting = %d, want 1", got)
				}
				l.state.Add(-lockBit & (1<<64 - 1)) // the other release ends
			}
			select {
			case <-done:
			case <-time.After(hostspeed.Scale(10 * time.Second)):
				t.Fatal("the release did not return once the update lock was free")
			}
			if got := len(alg.samples); got != tc.wantFeed {
				t.Errorf("%d samples fed, want %d", got, tc.wantFeed)
			}
			if got := l.InFlight(); got != 0 {
				t.Errorf("InFlight = %d, want 0", got)
			}
			if w := l.state.Load(); w&lockBit != 0 != !tc.waits {
				t.Errorf("state %#x: lock bit set = %v, want %v", w, w&lockBit != 0, !tc.waits)
			}
		})
	}
}

// updateRecorder wraps an Algorithm and records the samples it is fed, in order.
// It counts the Updates that began while another was running, which the
// Limiter must never allow (the race detector would also see them).
type updateRecorder struct {
	alg     Algorithm
	inside  atomic.Bool
	overlap atomic.Int64
	fed     []Sample
}

func (r *updateRecorder) Update(s Sample) int {
	if !r.inside.CompareAndSwap(false, true) {
		r.overlap.Add(1)
	}
	r.fed = append(r.fed, s)
	limit := r.alg.Update(s)
	r.inside.Store(false)
	return limit
}

func (r *updateRecorder) Limit() int { return r.alg.Limit() }

// TestLimiterConcurrentSamples releases permits from many goroutines at once
// and checks what the design guarantees: no two Updates overlap; every
// sample is fed exactly once; the limit the limiter admits with is what a
// serial run of the samples gives, in the order they were fed; nothing is
// left in flight and the lock is free.
func TestLimiterConcurrentSamples(t *testing.T) {
	specs := []struct {
		name string
		spec Spec
	}{
		{"aimd", Spec{Kind: KindAIMD, AIMD: AIMDConfig{Initial: 8}}},
		{"vegas", Spec{Kind: KindVegas}},
		{"gradient2", Spec{Kind: KindGradient2}},
	}
	for _, sc := range specs {
		for _, goroutines := range []int{1, 8} {
			t.Run(fmt.Sprintf("%s/%d", sc.name, goroutines), func(t *testing.T) {
				alg, err := sc.spec.New()
				if err != nil {
					t.Fatal(err)
				}
				rec := &updateRecorder{alg: alg}
				l := NewLimiter(rec)
				const rounds = 3000
				sent := make([][]Sample, goroutines) // per goroutine: the samples released
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						for i := range rounds {
							// Now is unique per (g, i): the sample's name.
							end := t0.Add(time.Duration(g*rounds+i) * time.Microsecond)
							start := end.Add(-time.Duration(5+(g*7+i)%13) * ms)
							p, ok := l.AcquireAt(start)
							if !ok {
								continue
							}
							switch (g + i) % 10 {
							case 0:
								p.DroppedAt(end)
								sent[g] = append(sent[g], Sample{Now: end, RTT: end.Sub(start), InFlight: p.inFlight, Dropped: true})
							case 1:
								p.IgnoreAt(end)
							default:
								p.SuccessAt(end)
								sent[g] = append(sent[g], Sample{Now: end, RTT: end.Sub(start), InFlight: p.inFlight})
							}
						}
					})
				}
				wg.Wait()

				if n := rec.overlap.Load(); n != 0 {
					t.Errorf("%d Updates overlapped another", n)
				}
				if n := l.InFlight(); n != 0 {
					t.Errorf("InFlight = %d, want 0", n)
				}
				if w := l.state.Load(); w&lockBit != 0 {
					t.Errorf("update lock held at the end: state %#x", w)
				}
				want := make(map[time.Time]Sample)
				for _, ss := range sent {
					for _, s := range ss {
						want[s.Now] = s
					}
				}
				for _, s := range rec.fed {
					w, ok := want[s.Now]
					if !ok {
						t.Fatalf("fed %+v, which was not released or was fed twice", s)
					}
					if s != w {
						t.Fatalf("fed %+v, want %+v", s, w)
					}
					delete(want, s.Now)
				}
				if len(want) != 0 {
					t.Errorf("%d samples released and never fed", len(want))
				}
				serial, err := sc.spec.New()
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range rec.fed {
					serial.Update(s)
				}
				if got, want := l.AlgorithmLimit(), serial.Limit(); got != want {
					t.Errorf("AlgorithmLimit = %d, a serial run of the %d fed samples gives %d", got, len(rec.fed), want)
				}
				t.Logf("%d samples fed; limit %d", len(rec.fed), l.AlgorithmLimit())
			})
		}
	}
}

// TestLimiterLayout checks what Limiter's comment on its cache line says:
// 64 bytes, so that the allocator aligns it on 64 bytes.
func TestLimiterLayout(t *testing.T) {
	var l Limiter
	if got := unsafe.Sizeof(l); got != 64 {
		t.Errorf("Sizeof(Limiter) = %d, want 64", got)
	}
	if p := NewLimiter(Fixed{N: 1}); uintptr(unsafe.Pointer(p))%64 != 0 {
		t.Errorf("NewLimiter returned %p, not 64-byte aligned", p)
	}
}
