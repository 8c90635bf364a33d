package lab

import (
	"sync"
	"time"

	"github.com/stormguard/stormguard/shed"
)

// pool is the worker pool of a service without defenses: at most workers
// requests are served at once, the others wait in a queue of the
// scenario's discipline. It knows nothing of deadlines, nor of callers
// that leave: like a database, it serves what it admitted. It is safe for
// concurrent use.
type pool struct {
	mu      sync.Mutex
	q       *shed.Queue[chan bool]
	busy    int
	workers int
}

func newPool(workers int, cfg shed.Config) (*pool, error) {
	q, err := shed.New[chan bool](cfg)
	if err != nil {
		return nil, err
	}
	return &pool{q: q, workers: workers}, nil
}

// acquire waits for a worker and reports whether the request got one; it
// returns false if the queue refused or gave up the request.
func (p *pool) acquire(attempt int) bool {
	p.mu.Lock()
	if p.busy < p.workers && p.q.Len() == 0 {
		p.busy++
		p.mu.Unlock()
		return true
	}
	ch := make(chan bool, 1)
	now := time.Now()
	adm := p.q.PushAt(now, shed.Item[chan bool]{Payload: ch, Attempt: attempt})
	if adm.HasVictim() {
		adm.Victim.Payload <- false
	}
	p.mu.Unlock()
	if !adm.Admitted() {
		return false
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
			it.Payload <- false
			continue
		}
		it.Payload <- true
		return
	}
}

// gauges returns the requests waiting and the workers busy.
func (p *pool) gauges() (queued, busy int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.q.Len(), p.busy
}
