package alloc

import (
	"fmt"
	"math"
)

// ClientConfig configures a process's side of the protocol. Times are in
// nanoseconds of the process's own clock (any monotonic origin), amounts in
// milli-units.
type ClientConfig struct {
	ID       string
	Kind     Kind
	Capacity int64 // Bucket: the budget's capacity
	MaxCost  int64 // the dearest retry (a Window's retry: Unit)
	// Lease is the most a process asks for beyond its need.
	Lease int64
	// LeaseTTL: what a process holds is given back when it has asked for
	// no retry for this long.
	LeaseTTL int64
	// Heartbeat is the longest a process stays silent: its credit reaches
	// the pool and the server counts it live at least this often.
	Heartbeat int64
	// Horizon is how far ahead a busy process asks: it asks for what it
	// expects to spend within Horizon, and asks again before it runs out.
	Horizon int64
	// Retry is how long after a failed round trip the message is sent
	// again.
	Retry int64
	// Expire: a message unanswered for this long is dropped, its credit
	// lost, so that a server that forgot the process cannot apply it twice
	// (half of Params.LiveUS).
	Expire int64
	// CreditNum/CreditDen convert a credit into milli-units: 1/1 for a
	// Bucket (its credit is milli-tokens), RatioMicro/1000 for a Window (its
	// credit is requests).
	CreditNum, CreditDen int64
	// Rate is Params.Rate: while processes wait for the pool, a process
	// sends what it earned every Live/Rate seconds (at least MinFlush), so
	// that the fleet's earnings reach the pool promptly in about Rate
	// round trips a second.
	Rate     int64
	MinFlush int64 // ns
}

// Validate reports a ClientConfig the process cannot use.
func (c ClientConfig) Validate() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("alloc: empty process id")
	case c.Kind != Bucket && c.Kind != Window:
		return fmt.Errorf("alloc: unknown kind %d", c.Kind)
	case c.MaxCost <= 0 || c.Lease < 0:
		return fmt.Errorf("alloc: max cost %d, lease %d: want a positive cost and a non-negative lease", c.MaxCost, c.Lease)
	case c.LeaseTTL <= 0 || c.Heartbeat <= 0 || c.Horizon < 0 || c.Retry <= 0 || c.Expire <= 0:
		return fmt.Errorf("alloc: lease ttl, heartbeat, retry and expire must be positive, horizon non-negative")
	case c.CreditNum < 0 || c.CreditDen <= 0:
		return fmt.Errorf("alloc: credit conversion %d/%d", c.CreditNum, c.CreditDen)
	case c.Rate <= 0 || c.MinFlush < 0:
		return fmt.Errorf("alloc: rate %d, min flush %d: want a positive rate and a min flush ≥ 0", c.Rate, c.MinFlush)
	}
	return nil
}

// Counts are the amounts a process keeps on its hot path (in atomics, in
// package fleet; in plain fields, in the simulator), as read at one moment.
type Counts struct {
	Hold    int64 // milli-units at hand, granted (or, in fallback, earned)
	Credit  int64 // earned and not yet sent (milli-tokens; a Window's: requests)
	Back    int64 // Bucket: milli-tokens to give back, not yet sent (refunds, unspent leases)
	Waiting int64 // milli-units of retries waiting for a grant
	Asked   int64 // milli-units of retries asked for since the start (granted or not)
}

// Action is what the process should do now.
type Action struct {
	// Expire: give the lease back: move the hold into Back before
	// anything else.
	Expire bool
	// Send a message now: [Client.Message].
	Send bool
	// Wake is when to look again (ns), if nothing happens before.
	Wake int64
	// LowWater: look again as soon as the hold falls below this.
	LowWater int64
	// FlushAt: look again as soon as the credit reaches this.
	FlushAt int64
	// BackAt: look again as soon as what is to be given back reaches this.
	BackAt int64
}

// Client is one process's side of the protocol: when to send, what to ask
// for, what to do with the answer. It does not hold the amounts (see
// [Counts]). The zero Client is not usable; build one with [NewClient]. It is
// not safe for concurrent use.
type Client struct {
	cfg ClientConfig

	seq          int64
	gen          string
	ver          int64
	pending      *Message
	pendingSince int64
	retryAt      int64
	lastSent     int64
	creditSince  int64 // when the credit of the next message began to accrue
	creditSeen   int64 // the last look at which the credit had grown
	lastGather   int64 // the credit and back seen at the last look
	started      bool
	backoffUntil int64
	holdSince    int64
	lastAvail    int64 // what the pool could grant at the last answer; -1: never heard
	lastGrant    int64 // what the last answer granted
	live         int64
	contended    bool // processes were waiting for the pool at the last answer

	rate      float64 // milli-units asked over about the last horizon
	lastAsked int64
	lastLook  int64
}

// NewClient returns a process's side, which has never heard from the
// server.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, lastAvail: -1}, nil
}

// observe updates the demand estimate with the retries asked for since the
// last look.
func (c *Client) observe(now, asked int64) {
	if !c.started {
		c.lastLook, c.lastAsked = now, asked
		c.started = true
		c.lastSent, c.creditSince = now, now
		return
	}
	if dt := now - c.lastLook; dt > 0 && c.cfg.Horizon > 0 {
		c.rate *= math.Exp(-float64(dt) / float64(c.cfg.Horizon))
		c.lastLook = now
	}
	if d := asked - c.lastAsked; d > 0 {
		c.rate += float64(d)
		c.holdSince = now // the lease is in use: it lapses LeaseTTL after the last retry
	}
	c.lastAsked = asked
}

// look is what the process expects to ask for within the horizon, in whole
// dearest retries: what it asked for over about the last horizon (an
// exponentially decayed sum).
func (c *Client) look() int64 {
	n := math.Floor(c.rate / float64(c.cfg.MaxCost))
	if n <= 0 || math.IsNaN(n) {
		return 0
	}
	return min(int64(n), 1<<20) * c.cfg.MaxCost
}

// target is what a busy process keeps at hand ahead of its need: what it
// expects to ask for within the horizon, at most the lease size; 0 unless
// that is at least two dearest retries (a process that retries now and then
// asks when it needs, and holds nothing).
func (c *Client) target() int64 {
	t := min(c.look(), c.cfg.Lease)
	if t < 2*c.cfg.MaxCost {
		return 0
	}
	return t
}

// flushEvery is how often a process sends what it earned while processes
// wait for the pool: Live/Rate seconds (at least MinFlush), so that the
// fleet's earnings reach the pool in about Rate round trips a second; 0
// when nobody waited at the last answer.
func (c *Client) flushEvery() int64 {
	if !c.contended {
		return 0
	}
	return max(c.live*1e9/c.cfg.Rate, c.cfg.MinFlush)
}

// poolLow reports whether the pool was low at the last answer (or was never
// heard of): then credit is worth sending on its own.
func (c *Client) poolLow() bool {
	if c.lastAvail < 0 {
		return true
	}
	low := c.cfg.Capacity / 2
	if c.cfg.Kind == Window {
		low = 2 * max(c.cfg.Lease, c.cfg.MaxCost)
	}
	return c.lastAvail < low
}

// room is what the pool lacked at the last answer (the capacity if the
// process never had one), less what the process itself took then: that
// hole its refund fills, if its retry succeeds. See Message.Room.
func (c *Client) room() int64 {
	if c.cfg.Kind != Bucket {
		return 0
	}
	if c.lastAvail < 0 {
		return c.cfg.Capacity
	}
	return max(c.cfg.Capacity-c.lastAvail-c.lastGrant, 0)
}

// value converts a credit into milli-units.
func (c *Client) value(credit int64) int64 {
	return credit * c.cfg.CreditNum / c.cfg.CreditDen
}

// Decide says what to do at time now, given the counts.
func (c *Client) Decide(now int64, k Counts) Action {
	c.observe(now, k.Asked)
	if g := k.Credit + k.Back; g != c.lastGather {
		if g > c.lastGather {
			c.creditSeen = now
		}
		c.lastGather = g
	}
	const never = math.MaxInt64
	a := Action{Wake: never, LowWater: math.MinInt64, FlushAt: never, BackAt: never}
	if k.Hold > 0 && now >= c.holdSince+c.cfg.LeaseTTL {
		a.Expire = true
		k.Back += k.Hold
		k.Hold = 0
	}
	if c.pending != nil {
		if now >= c.retryAt {
			a.Send = true
		} else {
			a.Wake = c.retryAt
		}
		return a
	}
	target := c.target()
	worth := c.value(k.Credit)+k.Back >= c.cfg.MaxCost && c.poolLow()
	flushAt := c.flushEvery()
	if flushAt > 0 {
		flushAt += c.lastSent
		worth = worth || (now >= flushAt && k.Credit+k.Back > 0)
	}
	busy := k.Waiting > k.Hold || (target > 0 && 2*k.Hold < target) || worth
	switch {
	case busy && now >= c.backoffUntil:
		a.Send = true
		return a
	case now >= c.lastSent+c.cfg.Heartbeat:
		a.Send = true
		return a
	}
	a.Wake = c.lastSent + c.cfg.Heartbeat
	if busy {
		a.Wake = min(a.Wake, c.backoffUntil)
	}
	if flushAt > 0 {
		// Earnings do not wake the process (unless the pool is low):
		// look again when the next flush is due.
		a.Wake = min(a.Wake, max(flushAt, c.backoffUntil, now+c.cfg.MinFlush))
	}
	if k.Hold > 0 {
		a.Wake = min(a.Wake, c.holdSince+c.cfg.LeaseTTL)
	}
	if target > 0 {
		a.LowWater = (target + 1) / 2
	}
	if c.poolLow() && c.cfg.CreditNum > 0 {
		// The credit at which it is worth a dearest retry.
		a.FlushAt = (c.cfg.MaxCost*c.cfg.CreditDen + c.cfg.CreditNum - 1) / c.cfg.CreditNum
	}
	if c.poolLow() {
		a.BackAt = c.cfg.MaxCost
	}
	return a
}

// Pending reports whether a message awaits its answer: [Client.Message]
// then returns it unchanged, and takes no credit.
func (c *Client) Pending() bool { return c.pending != nil }

// Message returns the message to send at time now. If one awaits its
// answer it is returned unchanged (credit and back are then ignored),
// unless it has waited longer than Expire: it is dropped and what it
// carried lost (returned as dropped), and a new one is built. A new message
// carries credit (the earnings the caller took out of its counts) with the
// time it took to earn them and the room the pool had at the last answer,
// and back (refunds and unspent leases: tokens that left the pool lately),
// and asks for what k says is needed.
func (c *Client) Message(now int64, credit, back int64, k Counts) (m Message, dropped int64) {
	if !c.started {
		c.observe(now, 0)
	}
	if c.pending != nil {
		if now-c.pendingSince < c.cfg.Expire {
			c.lastSent = now
			return *c.pending, 0
		}
		dropped = c.pending.Credit + c.pending.Back
		c.pending = nil
	}
	span := max(now-c.creditSince, 0) / 1e6
	age := min(max(now-max(c.creditSeen, c.creditSince), 0)/1e6, span)
	if credit+back > c.lastGather {
		age = 0 // it grew since the last look
	}
	c.lastGather = 0
	var need, want int64
	target := c.target()
	switch {
	case k.Waiting > k.Hold:
		need = min(k.Waiting-k.Hold, c.cfg.MaxCost)
	case target > 0 && 2*k.Hold < target:
		need = c.cfg.MaxCost
	}
	if need > 0 {
		want = max(need, k.Waiting+target-k.Hold)
		if c.cfg.Kind == Window {
			need = (need + Unit - 1) / Unit * Unit
			want = (want + Unit - 1) / Unit * Unit
		}
	}
	c.seq++
	m = Message{ID: c.cfg.ID, Seq: c.seq, Known: c.gen, Seen: c.ver, Credit: credit, Span: span, Age: age, Room: c.room(), Back: back, Need: need, Want: want}
	c.pending = &m
	c.pendingSince, c.lastSent, c.creditSince = now, now, now
	return m, dropped
}

// Leave returns the last message of a process that stops, carrying its
// earnings (credit) and what it gives back (back: its hold included). If a
// message awaits its answer, it must be sent first.
func (c *Client) Leave(now int64, credit, back int64) Message {
	if !c.started {
		c.observe(now, 0)
	}
	c.seq++
	m := Message{ID: c.cfg.ID, Seq: c.seq, Known: c.gen, Seen: c.ver, Credit: credit, Span: max(now-c.creditSince, 0) / 1e6,
		Room: c.room(), Back: back, Leave: true}
	c.pending = &m
	c.pendingSince, c.lastSent = now, now
	return m
}

// Apply takes the answer to the pending message at time now and returns the
// grant, which the caller adds to its hold.
func (c *Client) Apply(now int64, a Answer) int64 {
	c.pending = nil
	c.gen, c.ver = a.Gen, a.Ver
	c.lastAvail, c.live, c.lastGrant = a.Avail, a.Live, a.Grant
	c.contended = a.Waiting > 0
	c.backoffUntil = 0
	if a.Next > 0 {
		c.backoffUntil = now + a.Next*1000
	}
	if a.Grant > 0 {
		c.holdSince = now
	}
	return a.Grant
}

// Failed records that the round trip of the pending message failed at time
// now: it is sent again after Retry.
func (c *Client) Failed(now int64) {
	c.retryAt = now + c.cfg.Retry
}

// BackingOff reports whether, at time now, the process was told to wait
// before asking again: a retry it cannot pay for is refused at once rather
// than waiting for a round trip.
func (c *Client) BackingOff(now int64) bool { return now < c.backoffUntil }

// BackoffUntil returns when the process may ask again (ns; 0 if it may now).
func (c *Client) BackoffUntil() int64 { return c.backoffUntil }

// Live returns the processes the server counted live at the last answer.
func (c *Client) Live() int64 { return c.live }

// Avail returns what the pool could grant at the last answer (-1 if the
// process never had one).
func (c *Client) Avail() int64 { return c.lastAvail }

// Gen returns the generation of the state at the last answer.
func (c *Client) Gen() string { return c.gen }

// Rejoined resets what the process knew of the server's timing after an
// outage: it may ask at once.
func (c *Client) Rejoined() { c.backoffUntil, c.retryAt = 0, 0 }
