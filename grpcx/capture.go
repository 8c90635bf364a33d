package grpcx

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// capture is where an attempt's header and trailer metadata land, with the
// attempt's call options: grpc.Header and grpc.Trailer for those two, then
// the caller's. A unary call takes one for all its attempts and gives it
// back when it ends, so that capturing costs no allocation; grpc-go writes
// the two maps before the invoker returns and keeps no reference to them.
type capture struct {
	header, trailer metadata.MD
	opts            []grpc.CallOption
}

func newCapture() *capture {
	c := new(capture)
	c.opts = []grpc.CallOption{grpc.Header(&c.header), grpc.Trailer(&c.trailer)}
	return c
}

// Captures are kept in captureSlots slots, each on a cache line of its own,
// and behind them in capturePool. A call takes the capture of the slot its
// goroutine's stack address picks (stripe), and puts it back there when it
// ends, so that a goroutine making one call after another finds the same
// capture, and goroutines running at once mostly use slots of their own; a
// call that finds its slot empty (another goroutine has its capture) takes
// one from the pool, and one that finds it full gives its capture to the
// pool. A slot costs an atomic swap to take and a compare-and-swap to give
// back: about 25 instructions for the two, against about 130 for
// sync.Pool's Get and Put (BENCHMARKS.md, "gRPC").
const captureSlots = 32

var (
	captureSlot [captureSlots]struct {
		c atomic.Pointer[capture]
		_ [64 - unsafe.Sizeof(atomic.Pointer[capture]{})]byte
	}
	capturePool = sync.Pool{New: func() any { return newCapture() }}
)

// stripe is the slot of the calling goroutine: bits of the address of its
// stack (a local's), 8 KiB apart, the size of a new goroutine's stack. A
// stack that moves (it grew) may change slots, which costs only a miss.
func stripe() *atomic.Pointer[capture] {
	var local byte
	return &captureSlot[uintptr(unsafe.Pointer(&local))>>13%captureSlots].c
}

// getCapture returns a capture whose options end with opts.
func getCapture(opts []grpc.CallOption) *capture {
	c := stripe().Swap(nil)
	if c == nil {
		c = capturePool.Get().(*capture)
	}
	if len(opts) > 0 {
		c.opts = append(c.opts, opts...)
	}
	return c
}

// put gives c back, holding nothing of the call's.
func (c *capture) put() {
	if len(c.opts) > 2 {
		clear(c.opts[2:])
		c.opts = c.opts[:2]
	}
	c.header, c.trailer = nil, nil
	if !stripe().CompareAndSwap(nil, c) {
		capturePool.Put(c)
	}
}
