package deadline_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/wire"
)

// waitDone waits up to a second for ctx to end and reports whether it did.
func waitDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(time.Second):
		return false
	}
}

func TestBindValues(t *testing.T) {
	parent := context.WithValue(context.Background(), struct{}{}, "kept")
	dl := time.Now().Add(time.Hour)
	for _, bd := range binders {
		ctx, cancel := bd.bind(parent, dl, 3, wire.SheddablePlus)
		defer cancel()
		if got, ok := ctx.Deadline(); !ok || !got.Equal(dl) {
			t.Errorf("%s: Deadline = %v, %v; want %v, true", bd.name, got, ok, dl)
		}
		if n, c := deadline.Attempt(ctx), deadline.Criticality(ctx); n != 3 || c != wire.SheddablePlus {
			t.Errorf("%s: Attempt, Criticality = %d, %v; want 3, sheddable-plus", bd.name, n, c)
		}
		if v := ctx.Value(struct{}{}); v != "kept" {
			t.Errorf("%s: parent's value = %v; want kept", bd.name, v)
		}
	}
	ctx, cancel := deadline.Bind(parent, dl, 3, wire.SheddablePlus)
	defer cancel()
	if got, ok := ctx.Deadline(); !ok || !got.Equal(dl) {
		t.Errorf("Deadline = %v, %v; want %v, true", got, ok, dl)
	}
	if n, c := deadline.Attempt(ctx), deadline.Criticality(ctx); n != 3 || c != wire.SheddablePlus {
		t.Errorf("Attempt, Criticality = %d, %v; want 3, sheddable-plus", n, c)
	}
	if v := ctx.Value(struct{}{}); v != "kept" {
		t.Errorf("parent's value = %v; want kept", v)
	}
	if err := ctx.Err(); err != nil {
		t.Errorf("Err = %v; want nil", err)
	}
	// Attempt numbers are clamped as by WithAttempt.
	ctx2, cancel2 := deadline.Bind(parent, dl, 0, wire.Critical)
	defer cancel2()
	if n := deadline.Attempt(ctx2); n != 1 {
		t.Errorf("Attempt after Bind with 0 = %d; want 1", n)
	}
	// A sooner parent deadline wins.
	pctx, pcancel := context.WithDeadline(context.Background(), dl.Add(-time.Minute))
	defer pcancel()
	ctx3, cancel3 := deadline.Bind(pctx, dl, 1, wire.Critical)
	defer cancel3()
	if got, _ := ctx3.Deadline(); !got.Equal(dl.Add(-time.Minute)) {
		t.Errorf("Deadline under a sooner parent = %v; want the parent's", got)
	}
}

// binders are the two ways to make the context: Bind, and a Bound embedded
// in a caller's own struct, as a server's shell does.
var binders = []struct {
	name string
	bind func(parent context.Context, dl time.Time, n int, c wire.Criticality) (context.Context, context.CancelFunc)
}{
	{"Bind", deadline.Bind},
	{"Bound", func(parent context.Context, dl time.Time, n int, c wire.Criticality) (context.Context, context.CancelFunc) {
		x := new(struct {
			before int
			ctx    deadline.Bound
		})
		x.ctx.Init(parent, dl, n, c)
		return &x.ctx, x.ctx.Cancel
	}},
}

// The ways a bound context ends, each observed with Done armed (a timer
// runs) and without (Err looks at the clock and the parent), for both ways
// of making it.
func TestBindEnds(t *testing.T) {
	for _, bd := range binders {
		t.Run(bd.name, func(t *testing.T) { testBindEnds(t, bd.bind) })
	}
}

func testBindEnds(t *testing.T, bind func(context.Context, time.Time, int, wire.Criticality) (context.Context, context.CancelFunc)) {
	leakcheck.Check(t)
	tests := []struct {
		name    string
		timeout time.Duration // from now
		end     func(parentCancel, cancel context.CancelFunc)
		wantErr error
	}{
		{"deadline", 20 * time.Millisecond, func(_, _ context.CancelFunc) {}, context.DeadlineExceeded},
		{"already expired", -time.Second, func(_, _ context.CancelFunc) {}, context.DeadlineExceeded},
		{"parent canceled", time.Hour, func(pc, _ context.CancelFunc) { pc() }, context.Canceled},
		{"canceled", time.Hour, func(_, c context.CancelFunc) { c() }, context.Canceled},
	}
	for _, tt := range tests {
		for _, armed := range []bool{true, false} {
			parent, pcancel := context.WithCancel(context.Background())
			ctx, cancel := bind(parent, time.Now().Add(tt.timeout), 1, wire.Critical)
			if armed {
				_ = ctx.Done()
			}
			tt.end(pcancel, cancel)
			if armed {
				if !waitDone(ctx) {
					t.Errorf("%s, armed: Done not closed", tt.name)
				}
			} else if tt.timeout > 0 && tt.timeout < time.Hour {
				time.Sleep(tt.timeout + 5*time.Millisecond)
			}
			if err := ctx.Err(); !errors.Is(err, tt.wantErr) {
				t.Errorf("%s, armed %v: Err = %v; want %v", tt.name, armed, err, tt.wantErr)
			}
			if cause := context.Cause(ctx); !errors.Is(cause, tt.wantErr) {
				t.Errorf("%s, armed %v: Cause = %v; want %v", tt.name, armed, cause, tt.wantErr)
			}
			// Done after the end, if it was not armed: closed at once.
			if !waitDone(ctx) {
				t.Errorf("%s, armed %v: Done not closed after the end", tt.name, armed)
			}
			cancel() // idempotent
			if err := ctx.Err(); !errors.Is(err, tt.wantErr) {
				t.Errorf("%s, armed %v: Err after cancel = %v; want %v (the first reason stays)", tt.name, armed, err, tt.wantErr)
			}
			pcancel()
		}
	}
}

// Contexts derived from a bound one end with it, with its error, and
// context.AfterFunc runs; neither needs a goroutine of its own.
func TestBindDerived(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := deadline.Bind(context.Background(), time.Now().Add(30*time.Millisecond), 2, wire.Critical)
	defer cancel()
	child, childCancel := context.WithCancel(ctx)
	defer childCancel()
	timed, timedCancel := context.WithTimeout(ctx, time.Hour)
	defer timedCancel()
	ran := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ran) })
	stopped := context.AfterFunc(ctx, func() { t.Error("a stopped AfterFunc ran") })
	if !stopped() {
		t.Error("stop reported the function already ran")
	}
	for _, c := range []context.Context{child, timed} {
		if !waitDone(c) {
			t.Fatal("derived context did not end with its parent")
		}
		if err := c.Err(); err != context.DeadlineExceeded {
			t.Errorf("derived Err = %v; want DeadlineExceeded", err)
		}
		if n := deadline.Attempt(c); n != 2 {
			t.Errorf("derived Attempt = %d; want 2", n)
		}
	}
	select {
	case <-ran:
	case <-time.After(time.Second):
		t.Error("AfterFunc did not run")
	}
	// A child derived after the end ends at once.
	late, lateCancel := context.WithCancel(ctx)
	defer lateCancel()
	if !waitDone(late) || late.Err() != context.DeadlineExceeded {
		t.Errorf("late child: Err = %v; want DeadlineExceeded", late.Err())
	}
}

// Cancel stops the timer and the watch on the parent: nothing is left
// behind, and a derived context registered earlier ends with Canceled.
func TestBindCancelReleases(t *testing.T) {
	leakcheck.Check(t)
	parent, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	for range 100 {
		ctx, cancel := deadline.Bind(parent, time.Now().Add(time.Hour), 1, wire.Critical)
		child, childCancel := context.WithCancel(ctx)
		cancel()
		if !waitDone(child) || child.Err() != context.Canceled {
			t.Fatalf("child Err = %v; want Canceled", child.Err())
		}
		childCancel()
	}
}

func TestBindConcurrent(t *testing.T) {
	leakcheck.Check(t)
	for range 50 {
		parent, pcancel := context.WithCancel(context.Background())
		ctx, cancel := deadline.Bind(parent, time.Now().Add(time.Millisecond), 1, wire.Critical)
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				switch i {
				case 0:
					<-ctx.Done()
				case 1:
					for ctx.Err() == nil {
						time.Sleep(100 * time.Microsecond)
					}
				case 2:
					c, cc := context.WithCancel(ctx)
					<-c.Done()
					cc()
				case 3:
					pcancel()
				}
			})
		}
		wg.Wait()
		cancel()
		pcancel()
		if err := ctx.Err(); err != context.Canceled && err != context.DeadlineExceeded {
			t.Errorf("Err = %v", err)
		}
	}
}

func TestBindAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage changes allocation counts")
	}
	dl := time.Now().Add(time.Hour)
	n := testing.AllocsPerRun(100, func() {
		ctx, cancel := deadline.Bind(context.Background(), dl, 1, wire.Critical)
		_ = deadline.Attempt(ctx)
		_ = ctx.Err()
		cancel()
	})
	// The context and its cancel function; no timer.
	if n > 2 {
		t.Errorf("%v allocations per Bind; want at most 2", n)
	}
}

// A Bound embedded in the caller's struct costs no allocation of its own,
// nor does its cancel function (a method call, not a method value).
func TestBoundAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage changes allocation counts")
	}
	type exchange struct {
		ctx deadline.Bound
		n   int
	}
	dl := time.Now().Add(time.Hour)
	n := testing.AllocsPerRun(100, func() {
		x := new(exchange)
		x.ctx.Init(context.Background(), dl, 1, wire.Critical)
		_ = deadline.Attempt(&x.ctx)
		_ = x.ctx.Err()
		x.ctx.Cancel()
	})
	// The exchange, which holds the context; no timer.
	if n != 1 {
		t.Errorf("%v allocations per embedded Bound; want 1", n)
	}
}
