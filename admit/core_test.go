package admit_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
)

// TestCoreDecisions drives an admit.Core's steps with virtual time, as the
// simulator does: arrivals (a number, at a time in ms, with an attempt
// number), releases, and the queue's timer when it falls due; the actions
// are logged.
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
			type held struct {
				p  limit.Permit
				dl time.Time
			}
			running := map[int]held{}
			entries := map[int]admit.Entry{}
			var timer time.Time // the armed timer; zero: none
			exec := func(now time.Time, acts []admit.Action[int]) {
				for _, a := range acts {
					switch a.Kind {
					case admit.Start:
						running[a.H] = held{a.Permit, entries[a.H].Deadline}
						log(now, a.H, "admitted")
					case admit.Respond:
						if d := c.Resolve(a.Decision); d.Reason != 0 || d.Answer == admit.InstanceOverloaded {
							log(now, a.H, fmt.Sprintf("%v (%v)", d.Answer, d.Reason))
						} else {
							log(now, a.H, d.Answer.String())
						}
					case admit.Wait:
						log(now, a.H, "queued")
					case admit.Arm:
						timer = a.At
					case admit.Disarm:
						timer = time.Time{}
					}
				}
			}
			for _, s := range tc.steps {
				// Time passes: the timer fires before the step, as the
				// gate's does.
				for !timer.IsZero() && timer.Before(at(s.at)) {
					now := timer
					timer = time.Time{}
					exec(now, c.TickAt(now))
				}
				now := at(s.at)
				if s.arrive == 0 {
					h := running[s.release]
					delete(running, s.release)
					if _, handOn := c.ReleaseAt(now, &h.p, h.dl, false, admit.Succeeded); handOn {
						exec(now, c.DispatchAt(now))
					}
					continue
				}
				r := admit.Request{Attempt: max(s.attempt, 1)}
				var in admit.Entered
				step := c.EnterAt(now, &r, time.Time{}, false, nil, &in)
				entries[s.arrive] = in.Entry
				switch step {
				case admit.Go:
					exec(now, []admit.Action[int]{{Kind: admit.Start, H: s.arrive, Permit: in.Permit}})
				case admit.Stop:
					exec(now, []admit.Action[int]{{Kind: admit.Respond, H: s.arrive, Decision: in.Decision}})
				default:
					exec(now, c.QueueAt(now, s.arrive, in.Entry, nil))
				}
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
