package lab

import (
	"sync"
	"time"

	"github.com/stormguard/stormguard/shed"
)

// pool is the worker pool of a service: at most workers requests are
// served at once, the others wait in a queue of the scenario's discipline
// (the simulator's run queue). Without defenses it is all the service's
// admission; behind a gate with an admission of its own (a limiter, a
// server block) it is where admitted requests wait for a worker. It knows
// nothing of callers that leave: like a database, it serves what it
// admitted; a request given a deadline is dropped if that passes while
// it waits. It is safe for concurrent use.
type pool struct {
	mu      sync.Mutex
	q       *shed.Queue[chan shed.Reason]
	busy    int
	workers int
}

func newPool(workers int, cfg shed.Config) (*pool, error) {
	q, err := shed.New[chan shed.Reason](cfg)
	if err != nil {
		return nil, err
	}
	return &pool{q: q, workers: workers}, nil
}

// acquire waits for a worker for attempt number attempt, whose deadline
// (the zero Time: none) drops it if it passes while it waits. It returns
// shed.None when the request got a worker, else why the queue refused or
// gave it up.
func (p *pool) acquire(attempt int, deadline time.Time) shed.Reason {
	p.mu.Lock()
	if p.busy < p.workers && p.q.Len() == 0 {
		p.busy++
		p.mu.Unlock()
		return shed.None
	}
	ch := make(chan shed.Reason, 1)
	now := time.Now()
	adm := p.q.PushAt(now, shed.Item[chan shed.Reason]{Payload: ch, Attempt: attempt, Deadline: deadline})
	if adm.HasVictim() {
		adm.Victim.Payload <- adm.VictimReason
	}
	p.mu.Unlock()
	if !adm.Admitted() {
		return adm.Refused
	}
	return <-ch
}

// release hands the caller's worker to the next request the queue serves,
// or frees it.
func (p *pool) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for {
		it, why, ok := p.q.PopAt(now)
		if !ok {
			p.busy--
			return
		}
		if why != shed.None {
			it.Payload <- why
			continue
		}
		it.Payload <- shed.None
		return
	}
}

// gauges returns the requests waiting and the workers busy.
func (p *pool) gauges() (queued, busy int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.q.Len(), p.busy
}
