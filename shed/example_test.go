package shed_test

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/shed"
)

// A full first-tries-first queue makes room for a first try by evicting a
// retry, and refuses a retry outright; every item given up comes back to the
// caller with its reason.
func Example() {
	q, err := shed.New[string](shed.Config{Capacity: 2}) // first tries first, FIFO
	if err != nil {
		panic(err)
	}
	now := time.Unix(0, 0)
	for _, r := range []struct {
		id      string
		attempt int
	}{{"a", 2}, {"b", 2}, {"c", 1}, {"d", 3}, {"e", 1}} {
		adm := q.PushAt(now, shed.Item[string]{Payload: r.id, Attempt: r.attempt})
		if adm.HasVictim() {
			fmt.Printf("%s evicts %s (%v)\n", r.id, adm.Victim.Payload, adm.VictimReason)
		}
		if !adm.Admitted() {
			fmt.Printf("%s refused (%v)\n", r.id, adm.Refused)
		}
	}
	for {
		it, _, ok := q.PopAt(now)
		if !ok {
			break
		}
		fmt.Println("serve", it.Payload)
	}
	st := q.Stats()
	fmt.Printf("first tries: %d pushed, %d served; retries: %d pushed, %d shed\n",
		st.FirstTries.Pushed, st.FirstTries.Served, st.Retries.Pushed, st.Retries.Shed())
	// Output:
	// c evicts b (evicted)
	// d refused (queue-full)
	// e evicts a (evicted)
	// serve c
	// serve e
	// first tries: 2 pushed, 2 served; retries: 3 pushed, 3 shed
}

// PopAt hands back expired items, earliest first, before the item to serve;
// the caller answers each and calls again.
func ExampleQueue_PopAt() {
	q, _ := shed.New[string](shed.Config{MinRemaining: 10 * time.Millisecond})
	t0 := time.Unix(0, 0)
	q.PushAt(t0, shed.Item[string]{Payload: "slow", Deadline: t0.Add(50 * time.Millisecond)})
	q.PushAt(t0, shed.Item[string]{Payload: "patient", Deadline: t0.Add(time.Second)})

	now := t0.Add(45 * time.Millisecond) // "slow" has 5 ms left: less than MinRemaining
	for {
		it, why, ok := q.PopAt(now)
		if !ok {
			fmt.Println("nothing to serve")
			break
		}
		if why != shed.None {
			fmt.Printf("answer %s: %v\n", it.Payload, why)
			continue
		}
		fmt.Printf("serve %s after waiting %v\n", it.Payload, now.Sub(it.Enqueued))
		break
	}
	// Output:
	// answer slow: expired
	// serve patient after waiting 45ms
}

// A simulator (or a production timer) schedules one event at NextExpiry and
// drops queued work exactly at its deadline with ExpireAt.
func ExampleQueue_NextExpiry() {
	q, _ := shed.New[int32](shed.Config{Order: shed.AdaptiveLIFO})
	ns := func(t time.Time) int64 { return t.UnixNano() } // virtual time is int64 ns
	q.PushAt(time.Unix(0, 0), shed.Item[int32]{Payload: 1, Deadline: time.Unix(0, 30e6)})
	q.PushAt(time.Unix(0, 1e6), shed.Item[int32]{Payload: 2}) // no deadline: the queue timeout applies
	for {
		at, ok := q.NextExpiry()
		if !ok {
			break
		}
		for {
			it, why, ok := q.ExpireAt(at)
			if !ok {
				break
			}
			fmt.Printf("t=%dms: request %d %v\n", ns(at)/1e6, it.Payload, why)
		}
	}
	// Output:
	// t=30ms: request 1 expired
	// t=100ms: request 2 queue-timeout
}

// Decide picks the overload signal for a refusal; the HTTP layer turns it
// into a status and the wire.HeaderOverload and Retry-After headers.
func ExampleDecide() {
	for _, c := range []struct {
		why       shed.Reason
		saturated bool
	}{{shed.QueueFull, false}, {shed.QueueTimeout, true}, {shed.Expired, false}} {
		s := shed.Decide(c.why.IsOverload(), c.saturated, 2*time.Second)
		fmt.Printf("%v, service saturated %v: overload=%v retry-after=%v\n", c.why, c.saturated, s.Overload, s.RetryAfter)
	}
	// Output:
	// queue-full, service saturated false: overload=instance retry-after=2s
	// queue-timeout, service saturated true: overload=service retry-after=0s
	// expired, service saturated false: overload=none retry-after=0s
}
