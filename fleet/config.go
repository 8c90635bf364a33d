package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/stormguard/stormguard/budget"
)

// Config describes a fleet budget as plain data. A zero field takes the
// default given in brackets. Key and Spec are required; every process that
// shares the budget must give the same Key and the same Spec (a process whose
// Spec differs is refused with [ErrSpecMismatch]).
type Config struct {
	// Key names the shared budget: the Redis keys are derived from it (see
	// the package documentation). It must be non-empty and hold no '{' or '}'.
	Key string `json:"key" yaml:"key"`

	// Spec is the budget every process shares: kind "token-bucket" or
	// "window", with the fields and defaults of [budget.Spec].
	Spec budget.Spec `json:"spec" yaml:"spec"`

	// FleetSize is the number of processes expected to share the budget
	// [0: learned from Redis, the most live processes seen over the last
	// ten lease TTLs]. The larger of the two sizes a process's share when
	// Redis cannot be reached (see [Budget.FleetSize]).
	FleetSize int `json:"fleet_size,omitempty" yaml:"fleet_size,omitempty"`

	// LeaseSize is what a process keeps at hand so that a retry costs no
	// round trip: tokens for a token bucket [twice the highest retry cost],
	// retries for a window [20]. It must cover the highest retry cost. A
	// refill is asked for when half of it is left, so half of it should
	// cover the retries a process makes during a round trip or two; past
	// that, retries wait for refills (MaxWait) or are refused. The lease
	// slack grows with it (see [Budget.LeaseSlack]).
	LeaseSize float64 `json:"lease_size,omitempty" yaml:"lease_size,omitempty"`

	// LeaseTTL is how long Redis keeps a process's lease without hearing
	// from it; then the lease's tokens go back to the pool [3s, at least
	// 100ms]. A live process renews it every LeaseTTL/3. It is also the
	// probation of a state Redis creates or got from another server (the
	// pool grants nothing meanwhile): processes sharing a key should share
	// it.
	LeaseTTL time.Duration `json:"lease_ttl,omitempty" yaml:"lease_ttl,omitempty"`

	// Timeout bounds one round trip to Redis [50ms]. It is spent by the
	// background goroutine, never by a request. For it to bound the socket
	// reads too, the client must have ContextTimeoutEnabled (see
	// [ClientOptions]).
	Timeout time.Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`

	// MaxWait is the longest RetryAt waits for a refill when the lease at
	// hand cannot pay for a retry but the shared pool could [2ms]. A
	// negative MaxWait never waits: such a retry is refused at once.
	MaxWait time.Duration `json:"max_wait,omitempty" yaml:"max_wait,omitempty"`

	// FlushEvery is the number of first-try successes (token bucket) or
	// requests (window) after which they are sent to Redis [100].
	FlushEvery int `json:"flush_every,omitempty" yaml:"flush_every,omitempty"`

	// FlushInterval is the longest successes and requests wait locally
	// before being sent [1s].
	FlushInterval time.Duration `json:"flush_interval,omitempty" yaml:"flush_interval,omitempty"`

	// PollInterval is how often a process whose lease ran dry asks again
	// while the pool was empty at its last look [100ms].
	PollInterval time.Duration `json:"poll_interval,omitempty" yaml:"poll_interval,omitempty"`

	// RejoinInterval is how often a process that fell back tries Redis
	// again [250ms, or LeaseTTL/3 if shorter; at most LeaseTTL/3, so that a
	// process that fell back reports within the probation of a state built
	// again]. It rejoins within RejoinInterval and a round trip of Redis
	// answering again (with a client from [ClientOptions]).
	RejoinInterval time.Duration `json:"rejoin_interval,omitempty" yaml:"rejoin_interval,omitempty"`

	// StateTTL is how long the shared state (the pool's level) outlives
	// the last process that touched it [24h]. A process of another spec is
	// accepted as soon as no live process holds a lease of the old one.
	StateTTL time.Duration `json:"state_ttl,omitempty" yaml:"state_ttl,omitempty"`

	// ID names this process in Redis [host-pid-random]. Two live Budgets
	// must never share an ID.
	ID string `json:"id,omitempty" yaml:"id,omitempty"`

	// Logger receives the changes of mode (fallback, rejoin) and errors
	// [slog.Default()].
	Logger *slog.Logger `json:"-" yaml:"-"`
}

// Defaults of Config.
const (
	DefaultLeaseTTL       = 3 * time.Second
	DefaultTimeout        = 50 * time.Millisecond
	DefaultMaxWait        = 2 * time.Millisecond
	DefaultFlushEvery     = 100
	DefaultFlushInterval  = time.Second
	DefaultPollInterval   = 100 * time.Millisecond
	DefaultRejoinInterval = 250 * time.Millisecond
	DefaultStateTTL       = 24 * time.Hour
	defaultWindowLease    = 20 // retries
	minLeaseTTL           = 100 * time.Millisecond
	minFleetWindow        = 10 * time.Millisecond
	reclaimMemory         = time.Hour // how long Redis remembers a lease it reclaimed
)

// ErrInvalidConfig is wrapped by the errors of [New] for a Config it cannot
// use; the message names the field.
var ErrInvalidConfig = errors.New("fleet: invalid config")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// withDefaults validates c and fills its zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.Key == "" || strings.ContainsAny(c.Key, "{}") {
		return c, invalidf("key %q must be non-empty without '{' or '}'", c.Key)
	}
	if err := c.Spec.Validate(); err != nil {
		return c, fmt.Errorf("%w: spec: %w", ErrInvalidConfig, err)
	}
	c.Spec = specDefaults(c.Spec)
	switch c.Spec.Kind {
	case budget.KindTokenBucket:
		maxCost := max(c.Spec.RetryCost, c.Spec.ThrottleCost, c.Spec.TimeoutCost)
		if c.LeaseSize == 0 {
			c.LeaseSize = min(2*maxCost, c.Spec.Capacity)
		}
		if !(c.LeaseSize >= maxCost && c.LeaseSize <= c.Spec.Capacity) {
			return c, invalidf("lease_size must be in [highest retry cost %g, capacity %g] tokens, got %g", maxCost, c.Spec.Capacity, c.LeaseSize)
		}
	case budget.KindWindow:
		if c.Spec.Window < minFleetWindow || c.Spec.Window%(10*time.Microsecond) != 0 {
			return c, invalidf("spec window must be at least %v and a whole number of 10µs for a fleet budget, got %v", minFleetWindow, c.Spec.Window)
		}
		if c.LeaseSize == 0 {
			c.LeaseSize = defaultWindowLease
		}
		if !(c.LeaseSize >= 1 && c.LeaseSize <= 1e6 && c.LeaseSize == math.Trunc(c.LeaseSize)) {
			return c, invalidf("lease_size must be a whole number of retries in [1, 1e6] for a window, got %g", c.LeaseSize)
		}
	default:
		return c, invalidf("spec kind %q cannot be shared by a fleet (want %q or %q)", c.Spec.Kind, budget.KindTokenBucket, budget.KindWindow)
	}
	if c.FleetSize < 0 {
		return c, invalidf("fleet_size must be ≥ 0, got %d", c.FleetSize)
	}
	c.LeaseTTL = orDuration(c.LeaseTTL, DefaultLeaseTTL)
	if c.LeaseTTL < minLeaseTTL {
		return c, invalidf("lease_ttl must be at least %v, got %v", minLeaseTTL, c.LeaseTTL)
	}
	c.Timeout = orDuration(c.Timeout, DefaultTimeout)
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.FlushEvery == 0 {
		c.FlushEvery = DefaultFlushEvery
	}
	if c.FlushEvery < 0 {
		return c, invalidf("flush_every must be ≥ 0, got %d", c.FlushEvery)
	}
	c.FlushInterval = orDuration(c.FlushInterval, DefaultFlushInterval)
	c.PollInterval = orDuration(c.PollInterval, DefaultPollInterval)
	if c.RejoinInterval == 0 {
		c.RejoinInterval = min(DefaultRejoinInterval, c.LeaseTTL/3)
	}
	if c.RejoinInterval > c.LeaseTTL/3 {
		return c, invalidf("rejoin_interval (%v) must be at most lease_ttl/3 (%v): a process that fell back must report within the probation of a state built again", c.RejoinInterval, c.LeaseTTL/3)
	}
	c.StateTTL = orDuration(c.StateTTL, DefaultStateTTL)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"timeout", c.Timeout}, {"flush_interval", c.FlushInterval}, {"poll_interval", c.PollInterval}, {"rejoin_interval", c.RejoinInterval}, {"state_ttl", c.StateTTL}} {
		if d.v < 0 {
			return c, invalidf("%s must be ≥ 0, got %v", d.name, d.v)
		}
	}
	if c.StateTTL < 10*c.LeaseTTL {
		return c, invalidf("state_ttl (%v) must be at least 10 × lease_ttl (%v)", c.StateTTL, c.LeaseTTL)
	}
	if c.ID == "" {
		c.ID = newID()
	}
	if strings.ContainsAny(c.ID, " \t\r\n") {
		return c, invalidf("id %q must not hold white space", c.ID)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

func orDuration(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// specDefaults fills the zero fields of a valid token-bucket or window spec
// as [budget.Spec.New] does.
func specDefaults(s budget.Spec) budget.Spec {
	switch s.Kind {
	case budget.KindTokenBucket:
		if s.Capacity == 0 {
			s.Capacity = 500
		}
		if s.RetryCost == 0 {
			s.RetryCost = 5
		}
		if s.ThrottleCost == 0 {
			s.ThrottleCost = s.RetryCost
		}
		if s.TimeoutCost == 0 {
			s.TimeoutCost = s.RetryCost
		}
		if s.SuccessReward == 0 {
			s.SuccessReward = 1
		}
	case budget.KindWindow:
		if s.Window == 0 {
			s.Window = 10 * time.Second
		}
	}
	return s
}

// newID returns host-pid-random.
func newID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r <= ' ' || r == '{' || r == '}' {
			return '_'
		}
		return r
	}, host)
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// ClientOptions returns go-redis options fit for the fleet: the context
// deadlines bound the socket reads and writes (ContextTimeoutEnabled), dial,
// read and write give up after timeout (0: [DefaultTimeout]; a first dial
// may take twice as long), go-redis neither retries a command nor a dial on
// its own (the fleet does), and the maintenance notifications of Redis Cloud are off. Change
// the returned value as needed (TLS, DB, Username) before
// redis.NewClient.
//
// Its Dialer dials as go-redis does (with the TLSConfig and DialTimeout of
// the returned value, read when it dials), with one difference: a failed
// dial is reported on the connection's first read or write instead of as
// a dial error. go-redis stops dialing after PoolSize failed dials and then
// tries again only once a second, which would make a process rejoin up to a
// second after Redis answers again; with this Dialer every attempt dials,
// and a process rejoins within RejoinInterval. The error a command returns
// is the dial's.
//
// The password is taken as given: read it from the environment or a secret
// store, never from a file in a repository.
func ClientOptions(addr, password string, timeout time.Duration) *redis.Options {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	o := &redis.Options{
		Addr:                     addr,
		Password:                 password,
		DialTimeout:              2 * timeout,
		ReadTimeout:              timeout,
		WriteTimeout:             timeout,
		ContextTimeoutEnabled:    true,
		MaxRetries:               -1, // no retries inside go-redis
		DialerRetries:            1,
		PoolSize:                 4,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dial := *o
		dial.Dialer = nil
		c, err := redis.NewDialer(&dial)(ctx, network, addr)
		if err != nil {
			return failedConn{err: &dialError{err}}, nil
		}
		return c, nil
	}
	return o
}

// failedConn is a connection whose dial failed: every read and write
// returns the dial's error.
type failedConn struct{ err error }

func (c failedConn) Read([]byte) (int, error)         { return 0, c.err }
func (c failedConn) Write([]byte) (int, error)        { return 0, c.err }
func (c failedConn) Close() error                     { return nil }
func (c failedConn) LocalAddr() net.Addr              { return failedAddr{} }
func (c failedConn) RemoteAddr() net.Addr             { return failedAddr{} }
func (c failedConn) SetDeadline(time.Time) error      { return nil }
func (c failedConn) SetReadDeadline(time.Time) error  { return nil }
func (c failedConn) SetWriteDeadline(time.Time) error { return nil }

type failedAddr struct{}

func (failedAddr) Network() string { return "tcp" }
func (failedAddr) String() string  { return "(not connected)" }

// dialError wraps a dial's error once more, so that go-redis, which
// unwraps the error of a connection's handshake once, reports the dial's
// own (dial tcp ADDR: connect: connection refused).
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }
