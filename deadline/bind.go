package deadline

import (
	"context"
	"sync"
	"time"

	"github.com/stormguard/stormguard/wire"
)

// Bind returns the context of a request that a server admitted: it carries
// attempt number n and criticality c (as [WithAttempt] and [WithCriticality]
// would), reports dl (or the parent's deadline, if sooner) as its deadline
// and ends then, when parent ends, or when cancel is called, whichever comes
// first. Its Err is then
// context.DeadlineExceeded, the parent's error, or context.Canceled.
//
// It behaves as context.WithDeadline(parent, dl) with the two values, and
// derived contexts, context.AfterFunc and context.Cause work with it as with
// the standard ones, but it costs less, which matters on a server's hot
// path: two allocations (the context and its cancel function) instead of
// four, and no timer until something waits on its Done channel (or
// registers with context.AfterFunc, as deriving a cancelable context does).
// A handler that never waits on its context, which is most of them, never
// starts a timer; Err still reports an expired deadline, by reading the
// clock while no timer runs. A server that keeps per-request state of its
// own can make it one allocation with the context: embed a [Bound].
//
// Call cancel as soon as the request ends, as with context.WithDeadline;
// it releases the timer, if one was started, and the registration with
// parent.
func Bind(parent context.Context, dl time.Time, n int, c wire.Criticality) (ctx context.Context, cancel context.CancelFunc) {
	b := new(Bound)
	b.Init(parent, dl, n, c)
	return b, b.Cancel
}

// Bound is the context [Bind] returns, as a type: a server's shell embeds
// one in the struct it allocates for each request anyway (its response
// writer's wrapper, say), initialises it with [Bound.Init], hands &b to the
// handler as its context and calls [Bound.Cancel] when the request ends.
// The context then costs no allocation of its own, and neither does its
// cancel function. *Bound is a context.Context; the zero Bound is not,
// until Init. A Bound must not be copied after Init.
type Bound struct {
	parent   context.Context
	deadline time.Time
	attempt  int
	crit     wire.Criticality

	mu         sync.Mutex
	done       chan struct{} // nil until Done or AfterFunc asks for it
	err        error         // nil while live; set once
	timer      *time.Timer   // started with done
	stopParent func() bool   // the registration with parent, made with done
	funcs      map[*afterFunc]struct{}
}

// Init makes b the context Bind(parent, dl, n, c) would return. Call it
// once, before b is shared; then call b.Cancel when the request ends, as
// Bind's cancel.
func (b *Bound) Init(parent context.Context, dl time.Time, n int, c wire.Criticality) {
	if pdl, ok := parent.Deadline(); ok && pdl.Before(dl) {
		dl = pdl
	}
	b.parent, b.deadline, b.attempt, b.crit = parent, dl, min(max(n, 1), wire.MaxAttempt), c
}

// afterFunc is a function registered with Bound.AfterFunc; its address
// identifies it for stop.
type afterFunc struct{ f func() }

// Deadline returns the context's deadline: always set.
func (b *Bound) Deadline() (time.Time, bool) { return b.deadline, true }

// Done returns a channel closed when the context ends, starting the timer
// and the watch on parent the first time.
func (b *Bound) Done() <-chan struct{} {
	b.mu.Lock()
	if b.done == nil {
		b.arm()
	}
	d := b.done
	b.mu.Unlock()
	return d
}

// arm creates done and, if the context is still live, starts the timer for
// the deadline and watches parent; otherwise done is closed at once. b.mu
// must be held and b.done be nil.
func (b *Bound) arm() {
	b.done = make(chan struct{})
	if b.err == nil {
		b.err = b.check()
	}
	if b.err != nil {
		close(b.done)
		return
	}
	b.timer = time.AfterFunc(time.Until(b.deadline), func() { b.end(context.DeadlineExceeded) })
	b.stopParent = context.AfterFunc(b.parent, func() { b.end(b.parent.Err()) })
}

// check reports, while no timer runs, whether the context has ended: the
// parent's error, or DeadlineExceeded once the deadline has passed.
func (b *Bound) check() error {
	if err := b.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(b.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Err returns nil while the context is live, then why it ended.
func (b *Bound) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil && b.done == nil {
		b.err = b.check() // no timer: look now
	}
	return b.err
}

// Value returns the attempt number and the criticality for this package's
// accessors, and the parent's values otherwise.
func (b *Bound) Value(key any) any {
	switch key.(type) {
	case attemptKey:
		return b.attempt
	case criticalityKey:
		return b.crit
	}
	if key == cancelCtxKey && cancelCtxKey != nil {
		// context.Cause asks for the nearest standard cancelable context.
		// Once this context has ended on its own (its deadline, or cancel),
		// hide the parent's, which would report no cause: Cause then falls
		// back to Err, as it does for a standard context that ended.
		b.mu.Lock()
		ended := b.err != nil
		b.mu.Unlock()
		if ended && b.parent.Err() == nil {
			return nil
		}
	}
	return b.parent.Value(key)
}

// AfterFunc registers f to be called once the context ends, and returns a
// function that unregisters it, reporting whether it did so before f was
// called. The context package uses it to propagate cancellation to derived
// contexts without a goroutine, and context.AfterFunc goes through it.
func (b *Bound) AfterFunc(f func()) (stop func() bool) {
	b.mu.Lock()
	if b.done == nil {
		b.arm()
	}
	if b.err != nil {
		b.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f}
	if b.funcs == nil {
		b.funcs = make(map[*afterFunc]struct{})
	}
	b.funcs[a] = struct{}{}
	b.mu.Unlock()
	return func() bool {
		b.mu.Lock()
		_, ok := b.funcs[a]
		delete(b.funcs, a)
		b.mu.Unlock()
		return ok
	}
}

// end ends the context with err, if it is live: it closes done, stops the
// timer and the watch on parent, and calls the registered functions (after
// releasing the lock; the context package's own start goroutines where its
// contract asks for them).
func (b *Bound) end(err error) {
	b.mu.Lock()
	if b.err != nil && (b.done == nil || b.timer == nil) {
		// Already ended, and nothing was started that needs stopping.
		b.mu.Unlock()
		return
	}
	if b.err == nil {
		b.err = err
		if b.done != nil {
			close(b.done)
		}
	}
	t, stop, funcs := b.timer, b.stopParent, b.funcs
	b.timer, b.stopParent, b.funcs = nil, nil, nil
	b.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	if stop != nil {
		stop()
	}
	if len(funcs) == 0 {
		return // the common case: ranging over the nil map still costs an iterator's set-up
	}
	for a := range funcs {
		a.f()
	}
}

// Cancel ends the context with context.Canceled, if it is live, and
// releases its timer and its registration with parent: Bind's cancel.
func (b *Bound) Cancel() { b.end(context.Canceled) }

// String names the context, as the context package's contexts do.
func (b *Bound) String() string {
	return "deadline.Bind(" + contextName(b.parent) + ", " + b.deadline.String() + ")"
}

// contextName names a context as the context package's String methods do.
func contextName(c context.Context) string {
	if s, ok := c.(interface{ String() string }); ok {
		return s.String()
	}
	return "context"
}

// cancelCtxKey is the key under which the context package looks up the
// nearest standard cancelable context (for context.Cause), learned once by
// watching what Cause asks a context for. It stays nil if a future version
// of the package asks nothing, and Value then needs no special case.
var cancelCtxKey = func() any {
	p := &keyProbe{Context: context.Background()}
	_ = context.Cause(p)
	return p.key
}()

// keyProbe records the first key it is asked for.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any {
	if p.key == nil {
		p.key = key
	}
	return nil
}
