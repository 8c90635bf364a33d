package shed

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/wire"
)

// t0 is the start of virtual time in the tests, as the simulator gives it.
var t0 = time.Unix(0, 0)

// ms returns the instant d milliseconds after t0.
func ms(d float64) time.Time { return t0.Add(time.Duration(d * float64(time.Millisecond))) }

// req describes an item by a short name: the attempt number and criticality
// are set by the fields, the name is the payload.
type req struct {
	name     string
	attempt  int
	crit     wire.Criticality
	deadline time.Time
}

func (r req) item() Item[string] {
	return Item[string]{Payload: r.name, Attempt: r.attempt, Criticality: r.crit, Deadline: r.deadline}
}

func first(name string) req { return req{name: name, attempt: 1} }
func retry(name string) req { return req{name: name, attempt: 2} }

func mustNew[T any](t testing.TB, c Config) *Queue[T] {
	t.Helper()
	q, err := New[T](c)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// drain pops everything at now and returns the payloads served and, apart,
// those dropped with their reasons.
func drain(q *Queue[string], now time.Time) (served []string, dropped []string) {
	for {
		it, why, ok := q.PopAt(now)
		if !ok {
			return served, dropped
		}
		if why != None {
			dropped = append(dropped, it.Payload+":"+why.String())
			continue
		}
		served = append(served, it.Payload)
	}
}

// checkBooks verifies that every item pushed is accounted for exactly once.
func checkBooks[T any](t *testing.T, q *Queue[T]) {
	t.Helper()
	st := q.Stats()
	for _, c := range []Counts{st.FirstTries, st.Retries} {
		if c.Queued < 0 {
			t.Errorf("negative queued count: %+v", c)
		}
		out := uint64(c.Queued) + c.Served + c.Removed + c.Shed() + c.Expired
		if c.Pushed != out {
			t.Errorf("books do not balance: pushed %d, accounted for %d: %+v", c.Pushed, out, c)
		}
	}
	if got := st.Total().Queued; got != q.Len() {
		t.Errorf("Stats queued = %d, Len = %d", got, q.Len())
	}
}
