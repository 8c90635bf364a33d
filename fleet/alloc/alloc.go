// Package alloc is the allocation rule of the fleet budget: how one shared
// retry budget is handed out to the processes of a fleet. It is the
// deterministic core that package fleet's Lua script mirrors in Redis (a
// differential test holds the two together) and that the simulator runs for
// fleets of any size. It imports only the standard library and package
// budget.
//
// There are two sides. [Step] is the server's: the state of one budget and
// one message from a process in, a grant and the new state out, with the
// time as an argument. [Client] is a process's: when to send a message, what
// to ask for, and what to do with the answer.
//
// # The protocol
//
// The design follows Doorman (YouTube's distributed rate limiter): a process
// says what it wants, the server grants by a rule and tells the process when
// to come back, and a grant is a lease that the process gives back when it
// has not used it in time. It differs in what is shared: not a rate but the
// tokens of one bucket, which the fleet's first-try successes refill.
//
// A message carries what the process earned since its last message (the
// rewards of its first-try successes, the refunds of its retries that
// succeeded, and the unused part of a lease it gives back: the credit), what
// it needs now (the price of a retry that waits, or 0), and what it would
// like (its need plus what it expects to spend before its next message,
// bounded by the lease size). The server
//
//  1. adds the credit to the pool, up to the capacity (a window: counts the
//     requests in its current slot);
//  2. grants min(want, pool) if the pool holds at least the need, else 0
//     (first come, first served, as one shared bucket serves its callers);
//     the grant leaves the pool at once: the server does not track what a
//     process holds, so a process that dies or is cut off takes its lease
//     with it, and the fleet never spends it twice;
//  3. when the need went unmet, or the grant left the pool with less than
//     the need (the pool is contended), counts the process among those that
//     wait (for at least Hold) and tells it to ask again no sooner than
//     ⌈waiting × 1 s / Rate⌉ (within [MinNext, MaxNext]): together the
//     processes that contend for the pool make about Rate round trips a
//     second, whatever the fleet's size.
//
// A process that is not retrying holds nothing and sends nothing but its
// credit, piggybacked on the messages it sends anyway and on a heartbeat.
//
// # The bound
//
// A state the server creates, or finds written by another server (a
// failover, a restart that loaded a copy), or older than what a process saw,
// starts with an empty pool (a window: with its allowance used up). Every
// token the pool grants was put there by a credit, and a credit is applied
// once (each message has a sequence number; a repeat gets the first answer).
// So the fleet's retries, net of refunds, never cost more than the rewards
// the fleet earned: with R the rewards and C the capacity, at most R ≤ C + R.
// See package fleet for what the processes do when Redis cannot be reached.
package alloc

import (
	"fmt"
	"strconv"
)

// Kind is the kind of budget a state holds.
type Kind uint8

// The kinds of budget.
const (
	// Bucket is a token bucket: retries cost tokens, rewards refill it up to
	// its capacity.
	Bucket Kind = 1
	// Window allows retries up to a ratio of the requests of a sliding
	// window plus a floor.
	Window Kind = 2
)

// Slots is the number of slots of a window.
const Slots = 10

// Unit is the number of milli-units in one token (bucket) or one retry
// (window): amounts are integers of thousandths.
const Unit = 1000

// Params is what the server needs besides its state, sent with every
// message (Redis keeps no configuration). Times are in microseconds,
// amounts in milli-units.
type Params struct {
	// Spec names the budget's rules (kind, capacity, costs …); a process
	// whose Spec differs is refused while live processes use the state.
	Spec string
	Kind Kind

	Capacity int64 // Bucket: the most tokens the pool holds

	SlotUS     int64 // Window: the width of one of its Slots slots
	RatioMicro int64 // Window: retries allowed per request, in millionths
	FloorMicro int64 // Window: retries allowed per window regardless, in millionths of a retry

	// Rate is how many round trips a second the processes whose need went
	// unmet make together; it sets how long they wait before asking again.
	Rate int64
	// MinNextUS and MaxNextUS bound that wait.
	MinNextUS, MaxNextUS int64
	// HoldUS is the least a process counts as waiting once it waited (at
	// least twice its wait): the pool is contended while any process does,
	// and a brief lull does not end the contention.
	HoldUS int64
	// LiveUS: a process not heard from for this long is forgotten (its
	// sequence number and last answer). It must exceed the longest a live
	// process stays silent (its heartbeat).
	LiveUS int64
	// MaxProcs bounds the processes remembered; the longest silent ones are
	// forgotten first.
	MaxProcs int64
}

// Validate reports a Params the rule cannot use.
func (p Params) Validate() error {
	switch {
	case p.Spec == "":
		return fmt.Errorf("alloc: empty spec")
	case p.Kind == Bucket && p.Capacity <= 0:
		return fmt.Errorf("alloc: capacity %d must be positive", p.Capacity)
	case p.Kind == Window && (p.SlotUS <= 0 || p.RatioMicro < 0 || p.FloorMicro < 0):
		return fmt.Errorf("alloc: window slot %dµs, ratio %d, floor %d: want a positive slot and non-negative ratio and floor", p.SlotUS, p.RatioMicro, p.FloorMicro)
	case p.Kind != Bucket && p.Kind != Window:
		return fmt.Errorf("alloc: unknown kind %d", p.Kind)
	case p.Rate <= 0 || p.MinNextUS <= 0 || p.MaxNextUS < p.MinNextUS || p.HoldUS < 0:
		return fmt.Errorf("alloc: rate %d, next in [%d, %d]µs, hold %dµs: want a positive rate, 0 < min ≤ max and a hold ≥ 0", p.Rate, p.MinNextUS, p.MaxNextUS, p.HoldUS)
	case p.LiveUS <= 0 || p.MaxProcs <= 0:
		return fmt.Errorf("alloc: live %dµs, max processes %d: want both positive", p.LiveUS, p.MaxProcs)
	}
	return nil
}

// Message is one round trip's request from a process.
type Message struct {
	ID    string // the process; unique among live processes
	Seq   int64  // increases with each new message; a repeat carries the same
	Known string // the generation of the state the process last saw ("" none)
	Seen  int64  // the version of that generation it last saw
	// Credit: Bucket, milli-tokens earned by first-try successes since the
	// last message; Window, requests made.
	Credit int64
	// Span is how long the credit and back took to gather, in
	// milliseconds (since the process's last message), and Age how long
	// ago they last grew (ms, at most Span): they accrued over the
	// milliseconds [Span, Age] ago. Bucket only.
	Span, Age int64
	// Room is what the pool lacked at the process's last answer: the most
	// of its earnings, by its account, that one shared bucket could have
	// taken while no process waited for it. Bucket only.
	Room int64
	// Back: Bucket, milli-tokens given back (refunds of retries that
	// succeeded, leases not spent): tokens that left the pool lately.
	Back  int64
	Need  int64 // milli-units: the least grant worth having (0: asks for nothing)
	Want  int64 // milli-units: the most it asks for (at least Need when Need > 0)
	Leave bool  // the process stops: forget it
}

// Answer is the server's reply to a message.
type Answer struct {
	Gen   string // the generation of the state
	Ver   int64  // its version: the messages it applied
	Grant int64  // milli-units granted (≥ 0)
	Next  int64  // µs to wait before asking again, when the need went unmet (else 0)
	Avail int64  // milli-units the pool could still grant
	Live  int64  // processes heard from lately
	// Waiting is the processes whose need went unmet lately, or was met
	// with the pool's last tokens: the pool is contended when it is not 0.
	Waiting int64
	// Lost is the credit that did not count (milli-units): earned while the
	// pool was, by the process's account, full, as one shared bucket loses
	// the rewards that arrive when it is full.
	Lost int64
	Dup  bool  // a repeat: Grant and Next are the first answer's
	Now  int64 // the server's time, µs
	// Note says what happened to the state: "" nothing, "created" (no
	// process knew an earlier one), "lost" (a process did), "moved"
	// (written by another server), "stale" (older than what the process
	// saw), "spec" (replaced a state of another spec no live process used).
	Note string
}

// SpecError is Step's error when the state holds a budget of another spec
// that live processes use.
type SpecError struct {
	Held string // the spec the state holds
	Live int64  // processes using it
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("the key holds a budget of spec %q, in use by %d live processes", e.Held, e.Live)
}

// State is a budget's shared state, as the server holds it. The zero State
// is absent (no budget yet). It is not safe for concurrent use.
type State struct {
	exists bool
	Spec   string
	Gen    string
	Ver    int64
	Srv    string // the server that last applied a message
	Clock  int64  // µs: the latest time seen; the state's time never goes back
	Level  int64  // Bucket: milli-tokens in the pool, in [0, Capacity]
	Since  int64  // µs: since when processes have been waiting for the pool (0: none is)

	Lo    int64           // Window: the oldest slot kept
	SlotQ map[int64]int64 // Window: requests by slot
	SlotR map[int64]int64 // Window: milli-retries granted by slot

	seq     map[string]int64 // the last message applied from each process
	ans     map[string][2]int64
	members zset // processes by when last heard from
	waiting zset // processes whose need went unmet, by when that lapses
}

// Exists reports whether the state holds a budget.
func (s *State) Exists() bool { return s.exists }

// Members returns the processes remembered and when each was last heard
// from (µs), in Redis's order, for tests.
func (s *State) Members() map[string]int64 {
	out := make(map[string]int64)
	for _, e := range s.members.members() {
		out[e.member] = e.score
	}
	return out
}

// Waiting returns the processes counted as waiting, for tests.
func (s *State) Waiting() map[string]int64 {
	out := make(map[string]int64)
	for _, e := range s.waiting.members() {
		out[e.member] = e.score
	}
	return out
}

// Record returns the last sequence number applied from id and its answer
// (grant, next), for tests.
func (s *State) Record(id string) (seq, grant, next int64, ok bool) {
	q, ok := s.seq[id]
	a := s.ans[id]
	return q, a[0], a[1], ok
}

// forgetLimit bounds how many silent processes one message forgets.
const forgetLimit = 100

// Step applies message m to the state at server time now (µs), srv being the
// server's identity (Redis's run_id), and returns the answer. It fails only
// with a *SpecError.
func Step(s *State, p Params, m Message, now int64, srv string) (Answer, error) {
	if s.exists {
		now = max(now, s.Clock)
		// Forget the processes not heard from lately.
		for _, id := range s.members.popUpTo(now-p.LiveUS, forgetLimit) {
			s.forget(id)
		}
	}
	note := ""
	if s.exists && s.Spec != p.Spec {
		if live := s.members.card(); live > 0 {
			return Answer{}, &SpecError{Held: s.Spec, Live: live}
		}
		*s = State{}
		note = "spec"
	}
	if !s.exists {
		s.create(p, m.ID, now, srv)
		switch {
		case note != "":
		case m.Known == "":
			note = "created"
		default:
			note = "lost"
		}
	} else {
		if s.Srv != srv {
			s.drain(p, now)
			s.Srv = srv
			note = "moved"
		}
		if m.Known == s.Gen && m.Seen > s.Ver {
			s.drain(p, now)
			note = "stale"
		}
	}
	s.Clock = now

	// Housekeeping: old slots, lapsed waits.
	if p.Kind == Window {
		s.trim(p, now)
	}
	s.waiting.popUpTo(now, 0)
	if s.waiting.card() == 0 {
		s.Since = 0
	}

	if last, ok := s.seq[m.ID]; ok && m.Seq <= last {
		s.touch(p, m.ID, now)
		a := s.ans[m.ID]
		return Answer{Gen: s.Gen, Ver: s.Ver, Grant: a[0], Next: a[1], Avail: s.avail(p, now),
			Live: s.members.card(), Waiting: s.waiting.card(), Dup: true, Now: now, Note: note}, nil
	}

	// The credit.
	var lost int64
	switch p.Kind {
	case Bucket:
		c, offered := s.counted(m, now)
		lost = offered - c
		s.Level = min(p.Capacity, s.Level+c)
	case Window:
		s.SlotQ[now/p.SlotUS] += max(m.Credit, 0)
	}
	s.Ver++

	if m.Leave {
		s.forget(m.ID)
		s.members.remove(m.ID)
		return Answer{Gen: s.Gen, Ver: s.Ver, Avail: s.avail(p, now), Live: s.members.card(), Waiting: s.waiting.card(), Lost: lost, Now: now, Note: note}, nil
	}

	// The grant: first come, first served, when the pool holds the need.
	avail := s.avail(p, now)
	var grant int64
	if m.Need > 0 && avail >= m.Need {
		grant = min(max(m.Want, m.Need), avail)
		switch p.Kind {
		case Bucket:
			s.Level -= grant
		case Window:
			s.SlotR[now/p.SlotUS] += grant
		}
	}

	// A need unmet, or met with the pool's last tokens, waits: under
	// contention the processes that ask together make about Rate round
	// trips a second.
	var next int64
	if m.Need > 0 && (grant == 0 || s.avail(p, now) < m.Need) {
		if s.waiting.card() == 0 {
			s.Since = now
		}
		s.waiting.add(m.ID, now) // counted now; its lapse is set below
		n := s.waiting.card()
		next = min(max((n*1_000_000+p.Rate-1)/p.Rate, p.MinNextUS), p.MaxNextUS)
		s.waiting.add(m.ID, now+max(2*next, p.HoldUS))
	}

	s.touch(p, m.ID, now)
	s.seq[m.ID] = m.Seq
	s.ans[m.ID] = [2]int64{grant, next}
	return Answer{Gen: s.Gen, Ver: s.Ver, Grant: grant, Next: next, Avail: s.avail(p, now),
		Live: s.members.card(), Waiting: s.waiting.card(), Lost: lost, Now: now, Note: note}, nil
}

// counted is the part of a Bucket's credit and back that counts, and what
// was offered. One shared bucket loses the rewards that arrive while it is
// full. While no process waits for the pool, the earnings count up to the
// room the process saw, and what it gives back (refunds, unspent leases:
// tokens that left the pool lately) counts whole. While processes wait
// (since Since), what was gathered since then counts whole (the credit is
// taken to have accrued evenly between Span and Age milliseconds ago); of
// what came before, the earnings count up to the room and what was given
// back is lost: poured late into a pool that a storm drained
// since, it would pay for retries one shared bucket, full then, would never
// have granted. Amounts above the capacity change nothing and are cut
// first, so that the arithmetic stays exact in Lua's numbers.
func (s *State) counted(m Message, now int64) (counted, offered int64) {
	c := min(max(m.Credit, 0), 1_000_000_000)
	b := min(max(m.Back, 0), 1_000_000_000)
	room := max(m.Room, 0)
	span := min(max(m.Span, 0), 1<<22) // 70 min: (c + b) × span stays below 2⁵³
	age := min(max(m.Age, 0), span)
	if s.Since == 0 {
		return min(c, room) + b, c + b
	}
	// The credit accrued over [now-span, now-age] (ms ago), evenly; the part
	// of that since processes began waiting counts whole.
	waited := (now - s.Since) / 1000 // ms
	length := span - age
	var during int64
	switch {
	case waited <= age:
		during = 0
	case length == 0 || waited >= span:
		during = length
	default:
		during = waited - age
	}
	if during == length {
		return c + b, c + b
	}
	before := c - c*during/length
	return (c+b)*during/length + min(before, room), c + b
}

// create makes a new state, empty: a Bucket's pool holds nothing, a
// Window's allowance is used up for its first window.
func (s *State) create(p Params, id string, now int64, srv string) {
	*s = State{
		exists: true,
		Spec:   p.Spec,
		Gen:    strconv.FormatInt(now, 10) + "." + id,
		Srv:    srv,
		Clock:  now,
		seq:    make(map[string]int64),
		ans:    make(map[string][2]int64),
	}
	if p.Kind == Window {
		s.SlotQ = make(map[int64]int64)
		s.SlotR = make(map[int64]int64)
		s.Lo = now/p.SlotUS - (Slots - 1)
	}
	s.drain(p, now)
}

// drain empties the pool: a state that may be old or was rebuilt grants
// only what the fleet earns from now on.
func (s *State) drain(p Params, now int64) {
	switch p.Kind {
	case Bucket:
		s.Level = 0
	case Window:
		s.trim(p, now)
		if a := s.avail(p, now); a > 0 {
			s.SlotR[now/p.SlotUS] += a
		}
	}
}

// trim drops the slots that left the window.
func (s *State) trim(p Params, now int64) {
	first := now/p.SlotUS - (Slots - 1)
	for k := range s.SlotQ {
		if k < first {
			delete(s.SlotQ, k)
		}
	}
	for k := range s.SlotR {
		if k < first {
			delete(s.SlotR, k)
		}
	}
	s.Lo = max(s.Lo, first)
}

// avail is what the pool could grant now: a Bucket's level, a Window's
// allowance (whole retries) less the retries it granted, at least 0.
func (s *State) avail(p Params, now int64) int64 {
	switch p.Kind {
	case Bucket:
		return max(s.Level, 0)
	case Window:
		var q, r int64
		first := now/p.SlotUS - (Slots - 1)
		for k := first; k <= now/p.SlotUS; k++ {
			q += s.SlotQ[k]
			r += s.SlotR[k]
		}
		allowed := (p.RatioMicro*q + p.FloorMicro) / 1_000_000 * Unit
		return max(allowed-r, 0)
	}
	return 0
}

// touch records that id was heard from at now and, beyond MaxProcs
// processes, forgets the longest silent ones (forgetLimit at most).
func (s *State) touch(p Params, id string, now int64) {
	s.members.add(id, now)
	if over := s.members.card() - p.MaxProcs; over > 0 {
		for _, c := range s.members.popMin(min(over, forgetLimit)) {
			s.forget(c)
		}
	}
}

// forget drops a process's bookkeeping.
func (s *State) forget(id string) {
	delete(s.seq, id)
	delete(s.ans, id)
	s.waiting.remove(id)
}
