package admit_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/shed"
)

// TestCoreDecisions drives an admit.Core with virtual time, as the
// simulator does: arrivals (a number, at a time in ms, with an attempt
// number) and releases; after each step the queue's expiries and the freed
// slots are handed on, as the gate's dispatch does. Each request's fate is
// logged.
func TestCoreDecisions(t *testing.T) {
	type step struct {
		at      int // ms
		arrive  int // request number; 0: a release of release
		attempt int
		release int
	}
	cases := []struct {
		name  string
		cfg   admit.Config
		steps []step
		want  []string
	}{
		{"limit, queue, queue full",
			admit.Config{Limit: fixed(1), Queue: shed.Config{Capacity: 1}},
			[]step{{at: 0, arrive: 1}, {at: 10, arrive: 2}, {at: 20, arrive: 3}, {at: 30, release: 1}},
			[]string{"0s r1 admitted", "10ms r2 queued", "20ms r3 instance-overloaded (queue-full)", "30ms r2 admitted"}},
		{"first tries evict retries",
			admit.Config{Limit: fixed(1), Queue: shed.Config{Capacity: 1}},
			[]step{{at: 0, arrive: 1}, {at: 10, arrive: 2, attempt: 2}, {at: 20, arrive: 3}, {at: 30, release: 1}},
			[]string{"0s r1 admitted", "10ms r2 queued", "20ms r3 queued", "20ms r2 instance-overloaded (evicted)", "30ms r3 admitted"}},
		{"expires in the queue at max_timeout − min_remaining",
			admit.Config{Limit: fixed(1), MaxTimeout: 100 * time.Millisecond, MinRemaining: 20 * time.Millisecond},
			[]step{{at: 0, arrive: 1}, {at: 10, arrive: 2}, {at: 95, release: 1}},
			[]string{"0s r1 admitted", "10ms r2 queued", "90ms r2 expired"}},
		{"a slot freed goes to the queue, not to a newcomer",
			admit.Config{Limit: fixed(1)},
			[]step{{at: 0, arrive: 1}, {at: 10, arrive: 2}, {at: 20, release: 1}, {at: 20, arrive: 3}},
			[]string{"0s r1 admitted", "10ms r2 queued", "20ms r2 admitted", "20ms r3 queued"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := admit.NewCore[int](tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			epoch := time.Unix(1000, 0)
			at := func(ms int) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }
			var got []string
			log := func(now time.Time, i int, what string) {
				got = append(got, fmt.Sprintf("%v r%d %s", now.Sub(epoch), i, what))
			}
			held := map[int]admit.Entry{}
			permits := map[int]func(time.Time){}
			dispatch := func(now time.Time) {
				for {
					i, why, ok := c.ExpireAt(now)
					if !ok {
						break
					}
					d := c.Drop(why, true)
					log(now, i, d.Answer.String())
				}
				for {
					it, p, why, ok := c.GrantAt(now)
					if !ok {
						break
					}
					if why != shed.None {
						log(now, it.Payload, c.Drop(why, true).Answer.String())
						continue
					}
					c.Admitted()
					e := held[it.Payload]
					permits[it.Payload] = func(at time.Time) { c.ReleaseAt(at, p, e.Deadline, false, admit.Succeeded) }
					log(now, it.Payload, "admitted")
				}
			}
			for _, s := range tc.steps {
				// Time passes: what falls due before the step is handed on
				// at its time, as the gate's timer does.
				for {
					next, ok := c.NextExpiry()
					if !ok || !next.Before(at(s.at)) {
						break
					}
					dispatch(next)
				}
				now := at(s.at)
				if s.arrive == 0 {
					permits[s.release](now)
					dispatch(now)
					continue
				}
				r := admit.Request{Attempt: max(s.attempt, 1)}
				c.Arrive(r)
				e, d, ok := c.CheckAt(now, r, time.Time{})
				if !ok {
					log(now, s.arrive, d.Answer.String())
					continue
				}
				held[s.arrive] = e
				if p, ok := c.AcquireAt(now); ok {
					c.Admitted()
					permits[s.arrive] = func(at time.Time) { c.ReleaseAt(at, p, e.Deadline, false, admit.Succeeded) }
					log(now, s.arrive, "admitted")
					continue
				}
				adm, d := c.PushAt(now, s.arrive, e)
				if !adm.Admitted() {
					log(now, s.arrive, fmt.Sprintf("%v (%v)", d.Answer, d.Reason))
				} else {
					log(now, s.arrive, "queued")
				}
				if adm.HasVictim() {
					d := c.Drop(adm.VictimReason, true)
					log(now, adm.Victim.Payload, fmt.Sprintf("%v (%v)", d.Answer, d.Reason))
				}
				dispatch(now)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			st := c.Stats()
			if out := st.Goodput + st.ShedTotal() + st.Expired + uint64(st.InFlight) + uint64(st.Queued); out != st.Arrived {
				t.Errorf("books: arrived %d, accounted %d (%+v)", st.Arrived, out, st)
			}
		})
	}
}
