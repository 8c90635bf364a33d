package engine_test

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/sim/engine"
)

// Clients send requests with a 100 ms timeout; replies take 0–120 ms. A
// reply in time cancels the timeout; a timeout makes the client retry, and
// a reply to an abandoned attempt is ignored.
func Example() {
	const (
		Send engine.Kind = iota
		Reply
		Timeout
	)
	type client struct {
		rand    engine.Rand
		attempt int64
		timer   engine.Handle
	}
	var e engine.Engine
	timeouts := e.NewFixedQueue(100 * time.Millisecond)
	clients := make([]client, 100)
	for i := range clients {
		clients[i].rand = engine.Stream(1, uint64(i)) // seed 1, client id i
		e.After(0, engine.Event{Kind: Send, Target: uint32(i)})
	}

	var answered, timedOut, late int
	var ev engine.Event
	for e.NextUntil(engine.Time(10*time.Second), &ev) {
		c := &clients[ev.Target]
		switch ev.Kind {
		case Send:
			c.attempt++
			c.timer = timeouts.Add(engine.Event{Kind: Timeout, Target: ev.Target})
			latency := time.Duration(c.rand.Uint64N(uint64(120 * time.Millisecond)))
			e.After(latency, engine.Event{Kind: Reply, Target: ev.Target, A: c.attempt})
		case Reply:
			if ev.A != c.attempt || !e.Cancel(c.timer) {
				late++
				break
			}
			answered++
			e.After(time.Second, engine.Event{Kind: Send, Target: ev.Target}) // think, then send again
		case Timeout:
			timedOut++
			e.After(0, engine.Event{Kind: Send, Target: ev.Target})
		}
	}
	fmt.Printf("at %v: %d answered, %d timed out, %d late replies\n", e.Now(), answered, timedOut, late)
	// Output:
	// at 10s: 994 answered, 194 timed out, 194 late replies
}

// counter is a Handler: the engine calls its Handle method once per event.
type counter struct{ n map[engine.Kind]int }

func (c *counter) Handle(e *engine.Engine, ev engine.Event) {
	c.n[ev.Kind]++
	if ev.Kind == 0 && e.Now() < engine.Time(time.Second) {
		e.After(300*time.Millisecond, ev) // a recurring tick
	}
}

func ExampleEngine_Run() {
	var e engine.Engine
	e.After(0, engine.Event{Kind: 0})
	e.At(engine.Time(500*time.Millisecond), engine.Event{Kind: 1})
	c := &counter{n: map[engine.Kind]int{}}
	e.Run(engine.Time(2*time.Second), c)
	fmt.Println(c.n[0], "ticks,", c.n[1], "other; now", e.Now())
	// Output:
	// 5 ticks, 1 other; now 2s
}
