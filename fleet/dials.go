package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/killswitch"
)

// The fleet kill switch is a Redis hash, stormguard:dials:{NAME}, that holds
// the dials every process should have, and a pub/sub channel of the same
// name on which each change is announced. [SetDials] changes the hash and
// publishes in one script; every process runs a [Watcher] that applies the
// announcement to its local *killswitch.Dials, and also reads the hash every
// PollInterval, so that a process whose subscription was down catches up.

// DialsState is the fleet's dials as Redis holds them.
type DialsState struct {
	killswitch.State
	// Version counts the changes within an epoch; 0 means the dials were
	// never set (or Redis lost them), and a Watcher then leaves the local
	// dials alone.
	Version int64 `json:"version"`
	// Epoch is the Redis time (µs) at which the dials were first set, so
	// that the versions of dials that Redis lost and were set again are
	// told apart from those before; 0 for dials set before epochs existed.
	Epoch   int64     `json:"epoch"`
	Updated time.Time `json:"updated"` // by the Redis clock; zero if never set
}

// DialsChange is a change to the fleet's dials: the fields that are not nil
// change, the others keep their value.
type DialsChange struct {
	RetriesOff    *bool    // turn retries off (true) or back on (false)
	ShedFraction  *float64 // in [0, 1]
	LimitOverride *int     // in [0, killswitch.MaxLimitOverride]; 0 removes it
}

// dialsKey returns the hash and the channel of the dials called name.
func dialsKey(name string) string { return "stormguard:dials:{" + name + "}" }

var setDialsScript = redis.NewScript(`
local h = KEYS[1]
if ARGV[2] ~= '' then redis.call('HSET', h, 'retries_off', ARGV[2]) end
if ARGV[3] ~= '' then redis.call('HSET', h, 'shed_ppm', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('HSET', h, 'limit', ARGV[4]) end
redis.call('HINCRBY', h, 'version', 1)
local t = redis.call('TIME')
if redis.call('HEXISTS', h, 'epoch') == 0 then
  redis.call('HSET', h, 'epoch', t[1] .. string.format('%06d', tonumber(t[2])))
end
redis.call('HSET', h, 'updated_ms', t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)))
local s = redis.call('HMGET', h, 'retries_off', 'shed_ppm', 'limit', 'version', 'updated_ms', 'epoch')
local p = 'v2'
for i = 1, 6 do p = p .. ' ' .. (s[i] or '0') end
redis.call('PUBLISH', ARGV[1], p)
return p
`)

// SetDials applies c to the dials called name and announces the new state
// to every [Watcher], in one atomic script. It returns the new state.
func SetDials(ctx context.Context, rdb redis.UniversalClient, name string, c DialsChange) (DialsState, error) {
	if err := checkName("dials name", name); err != nil {
		return DialsState{}, err
	}
	if c.RetriesOff == nil && c.ShedFraction == nil && c.LimitOverride == nil {
		return DialsState{}, errors.New("fleet: no dial to change; set RetriesOff, ShedFraction or LimitOverride")
	}
	var off, shed, limit string
	if c.RetriesOff != nil {
		off = "0"
		if *c.RetriesOff {
			off = "1"
		}
	}
	if f := c.ShedFraction; f != nil {
		if !(*f >= 0 && *f <= 1) {
			return DialsState{}, fmt.Errorf("fleet: shed fraction must be in [0, 1], got %v", *f)
		}
		shed = strconv.FormatInt(int64(math.Round(*f*1e6)), 10)
	}
	if l := c.LimitOverride; l != nil {
		if *l < 0 || *l > killswitch.MaxLimitOverride {
			return DialsState{}, fmt.Errorf("fleet: limit override must be in [0, %d] (0 removes it), got %d", killswitch.MaxLimitOverride, *l)
		}
		limit = strconv.Itoa(*l)
	}
	k := dialsKey(name)
	p, err := setDialsScript.Run(ctx, rdb, []string{k}, k, off, shed, limit).Text()
	if err != nil {
		return DialsState{}, fmt.Errorf("fleet: setting dials %q: %w", name, err)
	}
	return parseDials(p)
}

// GetDials reads the dials called name. Dials never set read as the zero
// DialsState (retries on, nothing shed, no override, version 0).
func GetDials(ctx context.Context, rdb redis.UniversalClient, name string) (DialsState, error) {
	if err := checkName("dials name", name); err != nil {
		return DialsState{}, err
	}
	v, err := rdb.HMGet(ctx, dialsKey(name), "retries_off", "shed_ppm", "limit", "version", "updated_ms", "epoch").Result()
	if err != nil {
		return DialsState{}, fmt.Errorf("fleet: reading dials %q: %w", name, err)
	}
	var b strings.Builder
	b.WriteString("v2")
	for _, x := range v {
		s, _ := x.(string)
		if s == "" {
			s = "0"
		}
		b.WriteString(" " + s)
	}
	return parseDials(b.String())
}

// parseDials reads "v2 retries_off shed_ppm limit version updated_ms
// epoch", or "v1" and the first five (epoch 0), as the hash and the
// announcements carry them.
func parseDials(p string) (DialsState, error) {
	if len(p) > 200 {
		return DialsState{}, fmt.Errorf("fleet: unexpected dials of %d bytes", len(p))
	}
	f := strings.Fields(p)
	if !(len(f) == 7 && f[0] == "v2") && !(len(f) == 6 && f[0] == "v1") {
		return DialsState{}, fmt.Errorf("fleet: unexpected dials %q", p)
	}
	var n [6]int64
	for i := range f[1:] {
		x, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return DialsState{}, fmt.Errorf("fleet: unexpected dials %q: %w", p, err)
		}
		n[i] = x
	}
	if n[0] != 0 && n[0] != 1 || n[1] < 0 || n[1] > 1e6 || n[2] < 0 || n[2] > killswitch.MaxLimitOverride || n[3] < 0 || n[4] < 0 || n[5] < 0 {
		return DialsState{}, fmt.Errorf("fleet: dials out of range %q", p)
	}
	s := DialsState{
		State: killswitch.State{
			RetriesOff:    n[0] != 0,
			ShedFraction:  float64(n[1]) / 1e6,
			LimitOverride: int(n[2]),
		},
		Version: n[3],
		Epoch:   n[5],
	}
	if n[4] > 0 {
		s.Updated = time.UnixMilli(n[4])
	}
	return s, nil
}

// WatchConfig configures a [Watcher]. A zero field takes the default in
// brackets; a field outside the bounds given after it is refused by
// [Watch] with an error that names it (wrapping [ErrInvalidConfig]).
type WatchConfig struct {
	// PollInterval is how often the dials are read, whatever pub/sub does
	// [500ms; 10ms to 24h]: it bounds how late a process learns of a
	// change when its subscription is down.
	PollInterval time.Duration
	// Timeout bounds each read [100ms; 1ms to 1m].
	Timeout time.Duration
	// OnChange, if set, runs on the watcher's goroutine after the local
	// dials took a new fleet state. It must not block.
	OnChange func(DialsState)
	// Logger receives the changes and the connection troubles
	// [slog.Default()].
	Logger *slog.Logger
}

// Defaults and bounds of WatchConfig.
const (
	DefaultWatchPoll    = 500 * time.Millisecond
	DefaultWatchTimeout = 100 * time.Millisecond
	minWatchPoll        = 10 * time.Millisecond // a shorter one reads Redis in a loop
	maxWatchPoll        = 24 * time.Hour
)

// withDefaults validates c and fills its zero fields, reporting every
// invalid field at once.
func (c WatchConfig) withDefaults() (WatchConfig, error) {
	var errs []error
	if c.PollInterval == 0 {
		c.PollInterval = DefaultWatchPoll
	}
	if c.PollInterval < minWatchPoll || c.PollInterval > maxWatchPoll {
		errs = append(errs, invalidf("WatchConfig.PollInterval must be in [%v, %v] (0: %v), got %v", minWatchPoll, maxWatchPoll, DefaultWatchPoll, c.PollInterval))
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultWatchTimeout
	}
	if c.Timeout < minTimeout || c.Timeout > maxTimeout {
		errs = append(errs, invalidf("WatchConfig.Timeout must be in [%v, %v] (0: %v), got %v", minTimeout, maxTimeout, DefaultWatchTimeout, c.Timeout))
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, errors.Join(errs...)
}

// Watcher keeps a local *killswitch.Dials in step with the fleet's dials.
// Whenever the dials Redis holds differ from the last fleet state it
// applied, it applies them, whatever their version: so the operator's last
// write wins after a failover to a replica that lagged or a restored backup,
// even when Redis's version went back. It reads them every PollInterval
// (jittered by up to a tenth) and as soon as a change is announced on
// pub/sub; an announcement is only a cue to read: what it says is never
// applied, so a forged or stale PUBLISH changes nothing that Redis does not
// hold. A change reaches every process within PollInterval + Timeout even
// when pub/sub is down. A local change (an admin endpoint) stands until the
// fleet's dials change again. While Redis is unreachable, or when it holds
// no dials (never set, or lost), the local dials keep their value.
//
// Build one with [Watch]; stop it with [Watcher.Close].
type Watcher struct {
	rdb     redis.UniversalClient
	name    string
	key     string
	d       *killswitch.Dials
	cfg     WatchConfig
	log     *slog.Logger
	ps      *redis.PubSub
	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan struct{}
	once    sync.Once

	last      DialsState // owned by the goroutine
	lastRead  time.Time  // owned by the goroutine
	version   atomic.Int64
	applied   atomic.Uint64
	connected atomic.Bool
}

// Watch starts a Watcher that keeps d in step with the dials called name.
// rdb is shared, not owned: close it after the Watcher.
func Watch(rdb redis.UniversalClient, name string, d *killswitch.Dials, cfg WatchConfig) (*Watcher, error) {
	errName := checkName("dials name", name)
	var errNil error
	if rdb == nil || d == nil {
		errNil = invalidf("Watch needs a Redis client and dials")
	}
	cfg, errCfg := cfg.withDefaults()
	if err := errors.Join(errName, errNil, errCfg); err != nil {
		return nil, err
	}
	w := &Watcher{
		rdb: rdb, name: name, key: dialsKey(name), d: d, cfg: cfg,
		log:     cfg.Logger.With("dials", name),
		stopped: make(chan struct{}),
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.ps = rdb.Subscribe(w.ctx, w.key)
	go w.run()
	return w, nil
}

// WatchStats is a snapshot of a Watcher's state, for metrics.
type WatchStats struct {
	Version   int64  // version of the fleet state last applied
	Applied   uint64 // fleet states applied to the local dials
	Connected bool   // the last read or message from Redis succeeded
}

// Stats returns the watcher's state now.
func (w *Watcher) Stats() WatchStats {
	return WatchStats{Version: w.version.Load(), Applied: w.applied.Load(), Connected: w.connected.Load()}
}

// Close stops the watcher and waits for its goroutine to end. The local
// dials keep their value. Close is idempotent.
func (w *Watcher) Close() error {
	var err error
	w.once.Do(func() {
		w.cancel()
		err = w.ps.Close()
		<-w.stopped
	})
	return err
}

func (w *Watcher) run() {
	defer close(w.stopped)
	w.poll()
	next := time.Now().Add(w.jitter())
	for w.ctx.Err() == nil {
		wait := time.Until(next)
		if wait <= 0 {
			w.poll()
			next = time.Now().Add(w.jitter())
			continue
		}
		msg, err := w.ps.ReceiveTimeout(w.ctx, wait)
		if w.ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// The subscription is down; go-redis reconnects on the next
			// receive. Wait a little so as not to spin, polling meanwhile.
			w.connected.Store(false)
			w.sleep(min(wait, 50*time.Millisecond))
			continue
		}
		switch msg.(type) {
		case *redis.Message:
			// A cue to read what Redis holds, never applied as such; a
			// flood of announcements reads at most every announceGap.
			w.connected.Store(true)
			if d := announceGap - time.Since(w.lastRead); d > 0 {
				w.sleep(d)
			}
			w.poll()
		case *redis.Subscription:
			// (Re)subscribed: a change may have been missed meanwhile.
			w.poll()
			next = time.Now().Add(w.jitter())
		}
	}
}

// sleep waits d or until Close.
func (w *Watcher) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.ctx.Done():
	}
}

// jitter returns PollInterval less up to a tenth of it, so that a fleet's
// watchers do not read in step.
func (w *Watcher) jitter() time.Duration {
	return w.cfg.PollInterval - time.Duration(rand.Int64N(int64(w.cfg.PollInterval)/10+1))
}

// announceGap is the shortest time between two reads cued by
// announcements.
const announceGap = 20 * time.Millisecond

// poll reads the dials and applies them if they differ from the last fleet
// state applied.
func (w *Watcher) poll() {
	w.lastRead = time.Now()
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.Timeout)
	s, err := GetDials(ctx, w.rdb, w.name)
	cancel()
	if err != nil {
		refreshTopology(w.rdb)
		if w.connected.Swap(false) && w.ctx.Err() == nil {
			w.log.Warn("fleet dials: cannot read the dials from Redis; keeping the local dials", "err", err)
		}
		return
	}
	if !w.connected.Swap(true) {
		w.log.Info("fleet dials: reading the dials from Redis")
	}
	w.apply(s)
}

// apply sets the local dials to s if s differs from the last fleet state
// applied. A state never set (version 0) changes nothing.
func (w *Watcher) apply(s DialsState) {
	if s.Version == 0 || s == w.last {
		return
	}
	w.last = s
	w.d.SetRetriesDisabled(s.RetriesOff)
	_ = w.d.SetShedFraction(s.ShedFraction) // checked by parseDials
	_ = w.d.SetLimitOverride(s.LimitOverride)
	at := s.Updated
	if at.IsZero() {
		at = time.Now()
	}
	w.d.NoteChange(killswitch.Change{At: at, Origin: killswitch.OriginFleet, By: "fleet " + w.name})
	w.version.Store(s.Version)
	w.applied.Add(1)
	w.log.Info("fleet dials: applied", "version", s.Version, "retries_off", s.RetriesOff, "shed_fraction", s.ShedFraction, "limit_override", s.LimitOverride)
	if w.cfg.OnChange != nil {
		w.cfg.OnChange(s)
	}
}
