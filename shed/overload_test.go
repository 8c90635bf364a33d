package shed

import (
	"math/rand/v2"
	"testing"
	"time"
)

// overloadRun is the outcome of one simulated server run, by kind (0 first
// tries, 1 retries).
type overloadRun struct {
	arrived [2]int
	success [2]int // served and finished before the deadline
	running [2]int // served but still running when the run ended
	shed    [2]int // QueueFull, Evicted or QueueTimeout
	expired [2]int
	stats   Stats
}

func (r overloadRun) successRate(k int) float64 { return float64(r.success[k]) / float64(r.arrived[k]) }

// simulateOverload drives a queue in virtual time (int64 nanoseconds, as the
// simulator does): a server of `workers` workers, each taking `service` per
// request, receives Poisson arrivals at `rate` per second, a fraction
// `retryShare` of them retries (attempt 2 or 3), each with a deadline
// `deadline` after arrival, for `length` of virtual time. Arrivals push into
// the queue; a free worker pops; expiries are processed exactly when
// NextExpiry falls due.
func simulateOverload(t *testing.T, cfg Config, seed uint64, workers int, service time.Duration,
	rate, retryShare float64, deadline, length time.Duration) overloadRun {
	t.Helper()
	q := mustNew[int32](t, cfg)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	type job struct {
		kind     int
		deadline int64
	}
	var (
		run      overloadRun
		jobs     []job // by request id, the payload
		busy     = make([]int64, workers)
		busyJob  = make([]int32, workers)
		idle     = workers
		end      = int64(length)
		never    = int64(1<<63 - 1)
		nextArr  = int64(rng.ExpFloat64() / rate * 1e9)
		ns       = func(ts time.Time) int64 { return ts.UnixNano() }
		giveUp   func(id int32, why Reason)
		dispatch func(now int64)
	)
	for w := range busy {
		busy[w] = never
	}
	giveUp = func(id int32, why Reason) {
		k := jobs[id].kind
		switch {
		case why == Expired:
			run.expired[k]++
		case why.IsOverload():
			run.shed[k]++
		default:
			t.Fatalf("request %d given up with %v", id, why)
		}
	}
	dispatch = func(now int64) {
		for idle > 0 {
			it, why, ok := q.PopAt(time.Unix(0, now))
			if !ok {
				return
			}
			if why != None {
				giveUp(it.Payload, why)
				continue
			}
			for w := range busy {
				if busy[w] == never {
					busy[w], busyJob[w] = now+int64(service), it.Payload
					idle--
					break
				}
			}
		}
	}
	for {
		// The next event: an arrival, a completion or an expiry.
		now, what, worker := nextArr, "arrival", -1
		for w, b := range busy {
			if b < now {
				now, what, worker = b, "completion", w
			}
		}
		if at, ok := q.NextExpiry(); ok && ns(at) < now {
			now, what = ns(at), "expiry"
		}
		if now >= end {
			break
		}
		switch what {
		case "arrival":
			nextArr = now + int64(rng.ExpFloat64()/rate*1e9)
			k, attempt := 0, 1
			if rng.Float64() < retryShare {
				k, attempt = 1, 2+rng.IntN(2)
			}
			id := int32(len(jobs))
			jobs = append(jobs, job{kind: k, deadline: now + int64(deadline)})
			run.arrived[k]++
			a := q.PushAt(time.Unix(0, now), Item[int32]{Payload: id, Attempt: attempt, Deadline: time.Unix(0, jobs[id].deadline)})
			if a.HasVictim() {
				giveUp(a.Victim.Payload, a.VictimReason)
			}
			if !a.Admitted() {
				giveUp(id, a.Refused)
			}
			dispatch(now)
		case "completion":
			j := jobs[busyJob[worker]]
			if now > j.deadline {
				t.Fatalf("request %d finished %v after its deadline", busyJob[worker], time.Duration(now-j.deadline))
			}
			run.success[j.kind]++
			busy[worker] = never
			idle++
			dispatch(now)
		case "expiry":
			for {
				it, why, ok := q.ExpireAt(time.Unix(0, now))
				if !ok {
					break
				}
				giveUp(it.Payload, why)
			}
		}
	}
	for w, b := range busy {
		if b != never {
			run.running[jobs[busyJob[w]].kind]++
		}
	}
	run.stats = q.Stats()
	return run
}

// TestFirstTriesSurviveRetryHeavyOverload is the package's reason to exist:
// under 2× overload with a retry-heavy mix, a queue that serves first tries
// first keeps them succeeding and sheds retries, where plain FIFO fails
// first tries about as often as retries.
//
// The server: 4 workers × 10 ms = 400 requests/s. Offered: 800 arrivals/s
// (Poisson), 60 % retries and 40 % first tries (320/s, under capacity), each
// with a 100 ms deadline; MinRemaining = 10 ms (the service time), so every
// request started finishes in time; capacity 50 (below the ~72 a FIFO holds
// in 90 ms at this rate, so that the full-queue rules take part). 10 s of
// virtual time, about 8,000 arrivals, seeded.
//
// Tolerances: with first tries first, first tries see a 4-server queue at
// 80 % load plus at most one residual service time, so waits near 90 ms are
// vanishingly rare (measured 99.8 % success with this seed, 99.6–100 % over
// seeds 1–30). With adaptive LIFO on top, the first-try class sometimes stays
// non-empty for 100 ms in a burst and a few first tries meet the 5 ms
// timeout (98.7 % here, 97.3–99.5 % over seeds 1–30): ≥ 95 % holds with a
// margin either way, as does "≥ 95 % of the requests lost are retries"
// (≥ 98 % over those seeds). Plain FIFO and plain adaptive LIFO can serve only
// half the arrivals, whatever their kind, so first tries succeed about half
// the time (48–52 % over those seeds): the bound ≤ 70 % and a gap of ≥ 30
// points leave room for any seed.
func TestFirstTriesSurviveRetryHeavyOverload(t *testing.T) {
	const (
		workers    = 4
		service    = 10 * time.Millisecond
		rate       = 800.0
		retryShare = 0.6
		deadline   = 100 * time.Millisecond
		length     = 10 * time.Second
		capacity   = 50
	)
	tests := []struct {
		name           string
		cfg            Config
		prioritised    bool
		minFirstTryOK  float64
		maxFirstTryOK  float64
		minRetriesShed float64 // share of retries among the requests shed or expired
	}{
		{"first-tries-first", Config{}, true, 0.95, 1, 0.95},
		{"first-tries-first, adaptive lifo", Config{Order: AdaptiveLIFO}, true, 0.95, 1, 0.95},
		{"fifo", Config{Priority: NoPriority}, false, 0, 0.70, 0},
		{"adaptive lifo", Config{Order: AdaptiveLIFO, Priority: NoPriority}, false, 0, 0.70, 0},
	}
	rates := map[string]float64{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Capacity, cfg.MinRemaining = capacity, service
			r := simulateOverload(t, cfg, 42, workers, service, rate, retryShare, deadline, length)

			lost := [2]int{r.shed[0] + r.expired[0], r.shed[1] + r.expired[1]}
			retryShareLost := float64(lost[1]) / float64(lost[0]+lost[1])
			goodput := float64(r.success[0]+r.success[1]) / length.Seconds()
			t.Logf("arrived %v; success first %.1f %% retries %.1f %%; shed %v expired %v; retries are %.1f %% of losses; goodput %.0f/s",
				r.arrived, 100*r.successRate(0), 100*r.successRate(1), r.shed, r.expired, 100*retryShareLost, goodput)

			if got := r.successRate(0); got < tt.minFirstTryOK || got > tt.maxFirstTryOK {
				t.Errorf("first-try success %.3f; want in [%.2f, %.2f]", got, tt.minFirstTryOK, tt.maxFirstTryOK)
			}
			if retryShareLost < tt.minRetriesShed {
				t.Errorf("retries are %.3f of the requests shed or expired; want ≥ %.2f", retryShareLost, tt.minRetriesShed)
			}
			// The server stays busy either way: goodput within 10 % of capacity.
			if goodput < 0.9*workers/service.Seconds() {
				t.Errorf("goodput %.0f/s; want ≥ 90 %% of %v/s", goodput, workers/service.Seconds())
			}
			// The queue's books agree with the simulation's.
			for k, c := range []Counts{r.stats.FirstTries, r.stats.Retries} {
				if int(c.Pushed) != r.arrived[k] || int(c.Shed()) != r.shed[k] || int(c.Expired) != r.expired[k] ||
					int(c.Served) != r.success[k]+r.running[k] || c.Removed != 0 {
					t.Errorf("kind %d: stats %+v disagree with the run %+v", k, c, r)
				}
			}
			rates[tt.name] = r.successRate(0)
		})
	}
	if gap := rates["first-tries-first"] - rates["fifo"]; gap < 0.30 {
		t.Errorf("first-try success: first-tries-first %.3f, fifo %.3f: gap %.3f; want ≥ 0.30",
			rates["first-tries-first"], rates["fifo"], gap)
	}
}
