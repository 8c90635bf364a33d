package scenario

import (
	"time"

	"github.com/stormguard/stormguard/shed"
)

// DefaultQueueCapacity is a queue's capacity when the scenario gives none:
// in effect unbounded.
const DefaultQueueCapacity = 200_000

// ShedConfig is the shed.Config of the queue q describes, with minRemain as
// the minimum time left to start work: the simulator's and the lab's queues
// are built from it, so a scenario's discipline means the same queue in both.
func (q QueueSpec) ShedConfig(minRemain time.Duration) shed.Config {
	c := shed.Config{Capacity: q.Capacity, CoDelTarget: q.CoDelTarget, CoDelInterval: q.CoDelInterval, MinRemaining: minRemain}
	if c.Capacity == 0 {
		c.Capacity = DefaultQueueCapacity
	}
	switch q.Discipline {
	case "lifo":
		c.Order, c.Priority = shed.LIFO, shed.NoPriority
	case "first-tries-first":
		c.Order, c.Priority = shed.FIFO, shed.FirstTries
	case "adaptive-lifo":
		c.Order, c.Priority = shed.AdaptiveLIFO, shed.NoPriority
	case "first-tries-adaptive-lifo":
		c.Order, c.Priority = shed.AdaptiveLIFO, shed.FirstTries
	default:
		c.Order, c.Priority = shed.FIFO, shed.NoPriority
	}
	return c
}
