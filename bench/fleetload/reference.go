package main

import (
	"container/heap"
	"math"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// refCounts is what one shared bucket grants in a phase when it is fed the
// run's plan: the same requests at their planned times, the same outcomes,
// the same backoff samples, every retry asked of one budget.TokenBucket of
// the fleet's spec the moment the attempt before it failed.
type refCounts struct {
	Asks, Granted, IsoAsks, IsoGranted int64
}

type refEvent struct {
	at      float64 // seconds from the start
	proc    int
	req     int // -1: the process's next arrival
	attempt int
	phase   int
	call    *retry.Call
}

type refQueue []refEvent

func (q refQueue) Len() int           { return len(q) }
func (q refQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q refQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *refQueue) Push(x any)        { *q = append(*q, x.(refEvent)) }
func (q *refQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// reference replays the plan of n processes through one shared bucket.
func reference(policy retry.Policy, n int, rate float64, seed uint64, ps []phase) ([]refCounts, error) {
	shared, err := policy.Budget.New()
	if err != nil {
		return nil, err
	}
	r, err := retry.New(policy, retry.WithBudget(shared))
	if err != nil {
		return nil, err
	}
	out := make([]refCounts, len(ps))
	end := total(ps).Seconds()
	t0 := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

	// Each process's arrivals, drawn as arrivals() draws them.
	next := make([]float64, n) // the time of the process's last arrival
	reqN := make([]int, n)
	var q refQueue
	gap := func(p int) float64 {
		u := uniform(seed, p, reqN[p], 0, drawGap)
		return -math.Log(1-u) / rate
	}
	for p := range n {
		next[p] = gap(p)
		heap.Push(&q, refEvent{at: next[p], proc: p, req: -1})
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(refEvent)
		if e.req == -1 { // an arrival
			if e.at >= end {
				continue
			}
			p := e.proc
			req := reqN[p]
			reqN[p]++
			next[p] += gap(p)
			heap.Push(&q, refEvent{at: next[p], proc: p, req: -1})
			ph := phaseAt(ps, time.Duration(e.at*float64(time.Second)))
			c := r.StartAt(at(e.at), time.Time{})
			e = refEvent{at: e.at, proc: p, req: req, attempt: 1, phase: ph, call: &c}
		}
		ph := ps[e.phase]
		if !fails(seed, ph, e.proc, e.req, e.attempt) {
			r.EndAt(at(e.at), e.call, retry.Success, retry.Signal{}, 0)
			continue
		}
		u := uniform(seed, e.proc, e.req, e.attempt, drawU)
		asked := e.attempt < policy.MaxAttempts
		d := r.EndAt(at(e.at), e.call, retry.Transient, retry.Signal{}, u)
		if asked {
			c := &out[e.phase]
			iso := e.proc < ph.Isolated
			c.Asks++
			if iso {
				c.IsoAsks++
			}
			if d.Retry {
				c.Granted++
				if iso {
					c.IsoGranted++
				}
			}
		}
		if d.Retry {
			r.NextAt(at(e.at+d.Delay.Seconds()), e.call)
			heap.Push(&q, refEvent{at: e.at + d.Delay.Seconds(), proc: e.proc, req: e.req, attempt: e.attempt + 1, phase: e.phase, call: e.call})
		}
	}
	return out, nil
}
