package shed

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stormguard/stormguard/wire"
)

// refQueue is a deliberately naive model of the rules in the Queue
// documentation: a slice scanned in full at every step. The randomised test
// below checks that the real queue, with its lists and heap, behaves
// identically.
type refQueue struct {
	cfg            Config
	items          []refItem
	lastEmpty      time.Time
	classLastEmpty map[int]time.Time
	seq            int
}

type refItem struct {
	it      Item[int]
	rank    int
	seq     int
	due     time.Time
	hasDue  bool
	timeout bool
}

func (m *refQueue) rank(it Item[int]) int {
	retry := 0
	if it.Attempt > 1 {
		retry = 1
	}
	switch m.cfg.Priority {
	case NoPriority:
		return 0
	case ByCriticality:
		levels := []wire.Criticality{wire.CriticalPlus, wire.Critical, wire.SheddablePlus, wire.Sheddable}
		for i, c := range levels {
			if it.Criticality >= c {
				return 2*i + retry
			}
		}
		return 2*(len(levels)-1) + retry
	}
	return retry
}

func (m *refQueue) overloaded(now time.Time) bool {
	return len(m.items) > 0 && now.Sub(m.lastEmpty) >= m.cfg.CoDelInterval
}

// newestFirst: LIFO, or adaptive LIFO and the class has not been empty for
// an interval.
func (m *refQueue) newestFirst(now time.Time, rank int) bool {
	return m.cfg.Order == LIFO || m.cfg.Order == AdaptiveLIFO && now.Sub(m.classLastEmpty[rank]) >= m.cfg.CoDelInterval
}

func (m *refQueue) holds(rank int) bool {
	for _, x := range m.items {
		if x.rank == rank {
			return true
		}
	}
	return false
}

// due returns the index of the earliest item whose time is up, or -1.
func (m *refQueue) due(now time.Time) int {
	best := -1
	for i, x := range m.items {
		if !x.hasDue || x.due.After(now) {
			continue
		}
		if best < 0 || x.due.Before(m.items[best].due) || x.due.Equal(m.items[best].due) && x.seq < m.items[best].seq {
			best = i
		}
	}
	return best
}

func (m *refQueue) take(i int) refItem {
	x := m.items[i]
	m.items = append(m.items[:i], m.items[i+1:]...)
	return x
}

func (m *refQueue) reason(x refItem) Reason {
	if x.timeout {
		return QueueTimeout
	}
	return Expired
}

// pick returns the index of the item served first (first = true) or last
// among those of the given rank.
func (m *refQueue) pick(rank int, oldest bool) int {
	best := -1
	for i, x := range m.items {
		if x.rank != rank {
			continue
		}
		if best < 0 || (x.seq < m.items[best].seq) == oldest {
			best = i
		}
	}
	return best
}

func (m *refQueue) push(now time.Time, it Item[int]) (refused Reason, victim int, victimWhy Reason) {
	if !it.Deadline.IsZero() && now.Sub(it.Deadline) >= -m.cfg.MinRemaining {
		return Expired, 0, None
	}
	r := m.rank(it)
	var wasEmpty, classWasEmpty bool
	if len(m.items) >= m.cfg.Capacity {
		if i := m.due(now); i >= 0 {
			x := m.take(i)
			victim, victimWhy = x.it.Payload, m.reason(x)
			wasEmpty, classWasEmpty = len(m.items) == 0, !m.holds(r)
		} else {
			wasEmpty, classWasEmpty = len(m.items) == 0, !m.holds(r)
			worst := 0
			for _, x := range m.items {
				worst = max(worst, x.rank)
			}
			newest := m.newestFirst(now, worst)
			if r > worst || r == worst && !newest {
				return QueueFull, 0, None
			}
			x := m.take(m.pick(worst, newest))
			victim, victimWhy = x.it.Payload, Evicted
		}
	} else {
		wasEmpty, classWasEmpty = len(m.items) == 0, !m.holds(r)
	}
	if wasEmpty {
		m.lastEmpty = now
	}
	if classWasEmpty {
		m.classLastEmpty[r] = now
	}
	m.seq++
	x := refItem{it: it, rank: r, seq: m.seq}
	if !it.Deadline.IsZero() {
		x.due, x.hasDue = it.Deadline.Add(-m.cfg.MinRemaining), true
	}
	if m.cfg.Order == AdaptiveLIFO {
		to := now.Add(m.cfg.CoDelTarget)
		if o := m.classLastEmpty[r].Add(m.cfg.CoDelInterval); o.After(to) {
			to = o
		}
		if !x.hasDue || to.Before(x.due) {
			x.due, x.hasDue, x.timeout = to, true, true
		}
	}
	m.items = append(m.items, x)
	return None, victim, victimWhy
}

func (m *refQueue) pop(now time.Time) (payload int, why Reason, ok bool) {
	if len(m.items) == 0 {
		return 0, None, false
	}
	if i := m.due(now); i >= 0 {
		x := m.take(i)
		return x.it.Payload, m.reason(x), true
	}
	best := m.items[0].rank
	for _, x := range m.items {
		best = min(best, x.rank)
	}
	x := m.take(m.pick(best, !m.newestFirst(now, best)))
	return x.it.Payload, None, true
}

func (m *refQueue) expire(now time.Time) (payload int, why Reason, ok bool) {
	if i := m.due(now); i >= 0 {
		x := m.take(i)
		return x.it.Payload, m.reason(x), true
	}
	return 0, None, false
}

func (m *refQueue) remove(payload int) bool {
	for i, x := range m.items {
		if x.it.Payload == payload {
			m.take(i)
			return true
		}
	}
	return false
}

func (m *refQueue) nextDue() (time.Time, bool) {
	var at time.Time
	ok := false
	for _, x := range m.items {
		if x.hasDue && (!ok || x.due.Before(at)) {
			at, ok = x.due, true
		}
	}
	return at, ok
}

// TestAgainstModel runs random operations on random configurations against
// the real queue and the model, and requires identical answers. Some runs
// push no deadlines and remove nothing, or only late, with capacities up
// to 300, so that plain queues (one class, fifo or lifo) stay rings while
// they grow, wrap and fill, and become lists part of the way through.
func TestAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	orders := []Order{FIFO, LIFO, AdaptiveLIFO}
	prios := []Priority{FirstTries, ByCriticality, NoPriority}
	var seen [QueueTimeout + 1]int // reasons met, to check the test reaches every rule
	runs, ops := 300, 2000
	if testing.Short() {
		runs = 30
	}
	rings, converted := 0, 0 // runs that ended as rings, and that became lists midway
	for run := range runs {
		capacity := 1 + rng.IntN(6)
		if rng.IntN(2) == 0 {
			capacity = 1 + rng.IntN(300)
		}
		// Deadlines: in a third of the pushes, in none, or in none
		// before a random point (as removals).
		withDeadlines, plainUntil := rng.IntN(3) > 0, 0
		if !withDeadlines {
			plainUntil = ops
			if rng.IntN(2) == 0 {
				plainUntil = rng.IntN(ops)
			}
		}
		cfg := Config{
			Capacity:      capacity,
			Order:         orders[rng.IntN(len(orders))],
			Priority:      prios[rng.IntN(len(prios))],
			CoDelTarget:   time.Duration(1+rng.IntN(5)) * time.Millisecond,
			CoDelInterval: time.Duration(5+rng.IntN(30)) * time.Millisecond,
			MinRemaining:  time.Duration(rng.IntN(3)) * time.Millisecond,
		}
		q := mustNew[int](t, cfg)
		m := &refQueue{cfg: q.Config(), classLastEmpty: map[int]time.Time{}}
		handles := map[int]Handle{}
		now := t0
		fail := func(op int, format string, args ...any) {
			t.Fatalf("run %d (%+v), op %d at %v: %s", run, cfg, op, now.Sub(t0), fmt.Sprintf(format, args...))
		}
		wasRing := q.ring
		for op := range ops {
			now = now.Add(time.Duration(rng.IntN(4000)) * time.Microsecond)
			switch k := rng.IntN(10); {
			case k < 5 || k == 9 && op < plainUntil:
				it := Item[int]{Payload: op, Attempt: rng.IntN(4), Criticality: wire.Criticality(rng.IntN(6) - 3)}
				if (withDeadlines || op >= plainUntil) && rng.IntN(3) > 0 {
					it.Deadline = now.Add(time.Duration(rng.IntN(40000)) * time.Microsecond)
				}
				a := q.PushAt(now, it)
				refused, victim, victimWhy := m.push(now, it)
				if a.Refused != refused || a.VictimReason != victimWhy || victimWhy != None && a.Victim.Payload != victim {
					fail(op, "push: got %v, victim %d (%v); model %v, victim %d (%v)",
						a.Refused, a.Victim.Payload, a.VictimReason, refused, victim, victimWhy)
				}
				if a.Admitted() {
					handles[op] = a.Handle
				}
				seen[a.Refused]++
				seen[a.VictimReason]++
			case k < 8:
				it, why, ok := q.PopAt(now)
				p, mwhy, mok := m.pop(now)
				if ok != mok || why != mwhy || ok && it.Payload != p {
					fail(op, "pop: got %d %v %v; model %d %v %v", it.Payload, why, ok, p, mwhy, mok)
				}
				seen[why]++
				if why == None && ok && !it.Deadline.IsZero() && it.Deadline.Sub(now) <= cfg.MinRemaining {
					fail(op, "served %d with %v left", it.Payload, it.Deadline.Sub(now))
				}
			case k < 9:
				it, why, ok := q.ExpireAt(now)
				p, mwhy, mok := m.expire(now)
				if ok != mok || why != mwhy || ok && it.Payload != p {
					fail(op, "expire: got %d %v %v; model %d %v %v", it.Payload, why, ok, p, mwhy, mok)
				}
			default:
				victim := op - 1 - rng.IntN(20)
				_, ok := q.Remove(handles[victim])
				if mok := m.remove(victim); ok != mok {
					fail(op, "remove %d: got %v; model %v", victim, ok, mok)
				}
			}
			if q.Len() != len(m.items) || q.Overloaded(now) != m.overloaded(now) {
				fail(op, "len %d, overloaded %v; model %d, %v", q.Len(), q.Overloaded(now), len(m.items), m.overloaded(now))
			}
			at, ok := q.NextExpiry()
			if mat, mok := m.nextDue(); ok != mok || !at.Equal(mat) {
				fail(op, "next expiry %v %v; model %v %v", at, ok, mat, mok)
			}
		}
		switch {
		case q.ring:
			rings++
		case wasRing:
			converted++
		}
		st := q.Stats()
		for _, c := range []Counts{st.FirstTries, st.Retries} {
			if c.Pushed != uint64(c.Queued)+c.Served+c.Removed+c.Shed()+c.Expired {
				t.Fatalf("run %d: books do not balance: %+v", run, c)
			}
		}
	}
	for r, n := range seen {
		if n < 10 {
			t.Errorf("reason %v met %d times: the test does not exercise it", Reason(r), n)
		}
	}
	if rings == 0 || converted == 0 {
		t.Errorf("%d runs ended as rings, %d became lists: the test does not exercise both", rings, converted)
	}
	t.Logf("reasons met: %v; %d runs ended as rings, %d became lists midway", seen, rings, converted)
}
