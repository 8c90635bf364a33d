package killswitch

import (
	"net/netip"
	"sync"
	"time"
)

// Defaults of the admin endpoint's limit on unauthenticated requests (see
// [AuthFailureLimit]): a client may try DefaultAuthBurst times in a row,
// then once every DefaultAuthEvery.
const (
	DefaultAuthBurst = 10
	DefaultAuthEvery = 6 * time.Second
)

// maxAuthClients bounds the clients the limiter keeps a bucket for.
const maxAuthClients = 1024

// authLimiter bounds the requests that fail authentication, per client: a
// token bucket of burst tokens for each client address (an IPv4 address,
// or an IPv6 /64, which one host usually holds whole), one token back
// every every. A request whose credentials were wrong takes a token; one
// that finds its client's bucket empty is refused (429). A request with
// the right credentials never touches the limiter, so a client that
// shares the operator's address cannot lock the operator out.
//
// Memory is bounded: at most maxAuthClients buckets. When the table is
// full, the buckets that have refilled completely are dropped (they hold
// nothing a fresh bucket would not), at most once per every; if none can
// be, clients without a bucket share one overflow bucket. So an attacker
// with many addresses gains at most one more bucket, never a reset.
//
// It is the deterministic core: time is an argument. A bucket is kept as
// GCRA's theoretical arrival time: the bucket is full at or after tat,
// and holds burst − (tat − now)/every tokens before.
type authLimiter struct {
	burst int
	every time.Duration

	mu        sync.Mutex
	clients   map[netip.Prefix]time.Time // client → tat
	overflow  time.Time                  // tat of the shared bucket
	lastSweep time.Time
	// Warnings: at most one per every, counting the refusals since.
	lastWarn time.Time
	refused  int
}

func newAuthLimiter(burst int, every time.Duration) *authLimiter {
	return &authLimiter{burst: burst, every: every, clients: make(map[netip.Prefix]time.Time)}
}

// clientKey is the bucket's key for a request's RemoteAddr: the IP address
// (an IPv6 one masked to /64). An address that does not parse (a Unix
// socket, say) gets the zero Prefix: all such clients share a bucket.
func clientKey(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// takeAt takes a token for a request of client k at now. It returns ok,
// or the time until the client may try again.
func (l *authLimiter) takeAt(k netip.Prefix, now time.Time) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tat, known := l.clients[k]
	shared := false
	if !known && len(l.clients) >= maxAuthClients {
		l.sweepAt(now)
		if len(l.clients) >= maxAuthClients {
			tat, shared = l.overflow, true
		}
	}
	if tat.Before(now) {
		tat = now
	}
	// Tokens left: burst − (tat − now)/every; one is needed.
	if slack := time.Duration(l.burst-1) * l.every; tat.Sub(now) > slack {
		return tat.Sub(now) - slack, false
	}
	tat = tat.Add(l.every)
	if shared {
		l.overflow = tat
	} else {
		l.clients[k] = tat
	}
	return 0, true
}

// sweepAt drops the buckets that are full at now, at most once per every.
// l.mu is held.
func (l *authLimiter) sweepAt(now time.Time) {
	if !l.lastSweep.IsZero() && now.Sub(l.lastSweep) < l.every {
		return
	}
	l.lastSweep = now
	for k, tat := range l.clients {
		if !tat.After(now) {
			delete(l.clients, k)
		}
	}
}

// warnAt counts a refusal and reports whether to log it now, with the
// refusals since the last warning: at most one warning per every.
func (l *authLimiter) warnAt(now time.Time) (refused int, warn bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused++
	if !l.lastWarn.IsZero() && now.Sub(l.lastWarn) < l.every {
		return 0, false
	}
	l.lastWarn = now
	refused, l.refused = l.refused, 0
	return refused, true
}

// size returns the number of buckets kept, for tests.
func (l *authLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}
