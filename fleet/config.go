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
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/fleet/alloc"
)

// Config describes a fleet budget as plain data. A zero field takes the
// default given in brackets; a field outside the bounds given after it is
// refused by [New] with an error that names it (wrapping
// [ErrInvalidConfig]). Key and Spec are required; every process that
// shares the budget must give the same Key and the same Spec (a process whose
// Spec differs is refused with [ErrSpecMismatch]).
type Config struct {
	// Key names the shared budget: the Redis keys are derived from it (see
	// the package documentation). It must be 1 to 200 bytes of printable
	// text without white space, '{' or '}'.
	Key string `json:"key" yaml:"key"`

	// Spec is the budget every process shares: kind "token-bucket" or
	// "window", with the fields and defaults of [budget.Spec].
	Spec budget.Spec `json:"spec" yaml:"spec"`

	// FleetSize is the number of processes expected to share the budget
	// [0: learned from Redis, the processes heard from lately; at most
	// 100,000]. It sizes a
	// process's share when Redis cannot be reached (see [Budget.FleetSize]).
	FleetSize int `json:"fleet_size,omitempty" yaml:"fleet_size,omitempty"`

	// LeaseSize is the most a busy process asks for beyond what its
	// waiting retries need, so that a retry costs no round trip: tokens for
	// a token bucket [the larger of twice the dearest retry and a tenth of
	// the capacity, at most the capacity], retries for a window [20].
	LeaseSize float64 `json:"lease_size,omitempty" yaml:"lease_size,omitempty"`

	// LeaseTTL: a process that has asked for no retry for this long gives
	// back what it holds [2s; 100ms to 1h].
	LeaseTTL time.Duration `json:"lease_ttl,omitempty" yaml:"lease_ttl,omitempty"`

	// Timeout bounds one round trip to Redis [50ms; 1ms to 1m]. For it to
	// bound the socket reads too, the client must have
	// ContextTimeoutEnabled (see [ClientOptions]).
	Timeout time.Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`

	// MaxWait is the longest RetryAt waits for a grant when the process
	// holds too little to pay for a retry [20ms]. A process that Redis told
	// to wait before asking again (the pool was empty, or nearly) waits
	// that out first if it ends within MaxWait, and refuses at once
	// otherwise. A negative MaxWait never waits; at most 1m.
	MaxWait time.Duration `json:"max_wait,omitempty" yaml:"max_wait,omitempty"`

	// Heartbeat is the longest a process stays silent: its earnings reach
	// the pool and Redis counts it live at least this often [10s]. A process
	// not heard from for three heartbeats is forgotten. 100ms to 1h.
	Heartbeat time.Duration `json:"heartbeat,omitempty" yaml:"heartbeat,omitempty"`

	// RoundTrips is how many round trips a second the processes that wait
	// for an empty pool make together, whatever their number: Redis tells
	// each when to ask again [1000; 1 to 1,000,000].
	RoundTrips int `json:"round_trips,omitempty" yaml:"round_trips,omitempty"`

	// RejoinInterval is how often a process that fell back tries Redis
	// again [250ms; 10ms to 1m]. It rejoins within RejoinInterval and a
	// round trip of Redis answering again (with a client from
	// [ClientOptions]).
	RejoinInterval time.Duration `json:"rejoin_interval,omitempty" yaml:"rejoin_interval,omitempty"`

	// StateTTL is how long the shared state outlives the last process that
	// touched it [24h]. A process of another spec is accepted as soon as no
	// process has been heard from for three heartbeats. At least 10 ×
	// Heartbeat, at most 365 days.
	StateTTL time.Duration `json:"state_ttl,omitempty" yaml:"state_ttl,omitempty"`

	// ID names this process in Redis [host-pid-random]. Two live Budgets
	// must never share an ID. At most 200 bytes of printable text without
	// white space.
	ID string `json:"id,omitempty" yaml:"id,omitempty"`

	// Logger receives the changes of mode (fallback, rejoin) and errors
	// [slog.Default()].
	Logger *slog.Logger `json:"-" yaml:"-"`
}

// Defaults and bounds of Config.
const (
	DefaultLeaseTTL       = alloc.DefaultLeaseTTL
	DefaultTimeout        = 50 * time.Millisecond
	DefaultMaxWait        = 20 * time.Millisecond
	DefaultHeartbeat      = alloc.DefaultHeartbeat
	DefaultRoundTrips     = alloc.DefaultRate
	DefaultRejoinInterval = 250 * time.Millisecond
	DefaultStateTTL       = 24 * time.Hour
	minLeaseTTL           = 100 * time.Millisecond
	minHeartbeat          = 100 * time.Millisecond
	maxNameLen            = 200 // bytes of a Key, an ID, a dials name

	// The bounds of the other durations: a value beyond them is a mistake
	// (a unit left out, an overflow), not a setting.
	minTimeout   = time.Millisecond
	maxTimeout   = time.Minute // Timeout, MaxWait, a Connection's and a WatchConfig's Timeout
	maxLeaseTTL  = time.Hour
	maxHeartbeat = time.Hour
	minRejoin    = 10 * time.Millisecond // a shorter one dials a Redis that is down in a loop
	maxRejoin    = time.Minute
	maxStateTTL  = 365 * 24 * time.Hour
)

// ErrInvalidConfig is wrapped by the errors of [New] for a Config it cannot
// use; the message names the field.
var ErrInvalidConfig = errors.New("fleet: invalid config")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// checkName reports a key, an ID or a dials name that is empty, too long,
// or holds white space, control characters, '{' or '}' (Redis Cluster's hash
// tag is built from it).
func checkName(field, v string) error {
	switch {
	case v == "":
		return invalidf("%s must not be empty", field)
	case len(v) > maxNameLen:
		return invalidf("%s is %d bytes long, at most %d allowed", field, len(v), maxNameLen)
	case !utf8.ValidString(v):
		return invalidf("%s %.40q is not valid UTF-8", field, v)
	}
	for _, r := range v {
		if r == '{' || r == '}' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return invalidf("%s %.60q must hold no white space, control character, '{' or '}'", field, v)
		}
	}
	return nil
}

// withDefaults validates c and fills its zero fields, reporting every
// invalid field at once.
func (c Config) withDefaults() (Config, alloc.Amounts, error) {
	var errs []error
	bad := func(err error) { errs = append(errs, err) }
	if err := checkName("key", c.Key); err != nil {
		bad(err)
	}
	am, err := alloc.FromSpec(c.Spec)
	if err != nil {
		bad(fmt.Errorf("%w: spec: %w", ErrInvalidConfig, err))
	}
	if c.LeaseSize == 0 && err == nil {
		c.LeaseSize = float64(am.DefaultLease()) / alloc.Unit
	}
	switch am.Kind {
	case alloc.Bucket:
		if !(c.LeaseSize >= 0 && c.LeaseSize <= float64(am.Capacity)/alloc.Unit) {
			bad(invalidf("lease_size must be in [0, capacity %g] tokens, got %g", float64(am.Capacity)/alloc.Unit, c.LeaseSize))
		}
	case alloc.Window:
		if !(c.LeaseSize >= 0 && c.LeaseSize <= 1e6 && c.LeaseSize == math.Trunc(c.LeaseSize)) {
			bad(invalidf("lease_size must be a whole number of retries in [0, 1e6] for a window, got %g", c.LeaseSize))
		}
	}
	if c.FleetSize < 0 || c.FleetSize > alloc.MaxProcs {
		bad(invalidf("fleet_size must be in [0, %d], got %d", alloc.MaxProcs, c.FleetSize))
	}
	c.LeaseTTL = orDuration(c.LeaseTTL, DefaultLeaseTTL)
	if c.LeaseTTL < minLeaseTTL || c.LeaseTTL > maxLeaseTTL {
		bad(invalidf("lease_ttl must be in [%v, %v] (0: %v), got %v", minLeaseTTL, maxLeaseTTL, DefaultLeaseTTL, c.LeaseTTL))
	}
	c.Timeout = orDuration(c.Timeout, DefaultTimeout)
	if c.Timeout < minTimeout || c.Timeout > maxTimeout {
		bad(invalidf("timeout must be in [%v, %v] (0: %v), got %v", minTimeout, maxTimeout, DefaultTimeout, c.Timeout))
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.MaxWait > maxTimeout {
		bad(invalidf("max_wait must be at most %v (0: %v; negative: never wait), got %v", maxTimeout, DefaultMaxWait, c.MaxWait))
	}
	c.Heartbeat = orDuration(c.Heartbeat, DefaultHeartbeat)
	if c.Heartbeat < minHeartbeat || c.Heartbeat > maxHeartbeat {
		bad(invalidf("heartbeat must be in [%v, %v] (0: %v), got %v", minHeartbeat, maxHeartbeat, DefaultHeartbeat, c.Heartbeat))
	}
	if c.RoundTrips == 0 {
		c.RoundTrips = DefaultRoundTrips
	}
	if c.RoundTrips < 1 || c.RoundTrips > 1_000_000 {
		bad(invalidf("round_trips must be in [1, 1000000] a second (0: %d), got %d", DefaultRoundTrips, c.RoundTrips))
	}
	c.RejoinInterval = orDuration(c.RejoinInterval, DefaultRejoinInterval)
	if c.RejoinInterval < minRejoin || c.RejoinInterval > maxRejoin {
		bad(invalidf("rejoin_interval must be in [%v, %v] (0: %v), got %v", minRejoin, maxRejoin, DefaultRejoinInterval, c.RejoinInterval))
	}
	c.StateTTL = orDuration(c.StateTTL, DefaultStateTTL)
	switch {
	case c.StateTTL < 0 || c.StateTTL > maxStateTTL:
		bad(invalidf("state_ttl must be in [10 × heartbeat, %v] (0: %v), got %v", maxStateTTL, DefaultStateTTL, c.StateTTL))
	case c.Heartbeat <= maxHeartbeat && c.StateTTL < 10*c.Heartbeat:
		bad(invalidf("state_ttl (%v) must be at least 10 × heartbeat (%v)", c.StateTTL, c.Heartbeat))
	}
	if c.ID == "" {
		c.ID = newID()
	}
	if err := checkName("id", c.ID); err != nil {
		bad(err)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, am, errors.Join(errs...)
}

func orDuration(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
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

// ClientOptions returns go-redis options fit for the fleet, for one server
// (see [Connection] for a cluster, Sentinel, TLS files and passwords from
// the environment): the context deadlines bound the socket reads and
// writes (ContextTimeoutEnabled), dial, read and write give up after
// timeout (0: [DefaultTimeout]; a first dial may take twice as long),
// go-redis neither retries a command nor a dial on its own (the fleet
// does), and the maintenance notifications of Redis Cloud are off. Change
// the returned value as needed (TLS, DB, Username) before redis.NewClient.
// A timeout outside [1ms, 1m] (a negative one included) is a programming
// error: ClientOptions panics, saying so, as time.NewTicker does on a bad
// duration; [Connection.Validate] returns an error for the same.
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
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if timeout < minTimeout || timeout > maxTimeout {
		panic(fmt.Sprintf("fleet.ClientOptions: timeout must be in [%v, %v] (0: %v), got %v", minTimeout, maxTimeout, DefaultTimeout, timeout))
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
	// The dialer reads o's TLSConfig and DialTimeout when it dials, so
	// that a caller may change them after ClientOptions.
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return reportingDialer(o)(ctx, network, addr)
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
