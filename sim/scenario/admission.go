package scenario

import (
	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/shed"
)

// Admission is the configuration of service v's admission, as the
// simulator's admit.Core and the lab's gate (httpx.Server) both take it:
// the server block of its policy file when it has one (Server); else the
// scenario's own admission, said as admit.Config says it: the limiter,
// which refuses a request over its limit at once (RejectAtLimit, true
// unless reject_at_limit says otherwise), the least time a request needs
// to start (min_remaining) and supersession (supersede). MaxTimeout and
// the runtime fields (Dials, …) are left zero, for the caller to set.
//
// limited reports whether the admission has a concurrency limit of its
// own: a server block's or the limiter's. Without one (no server block,
// no limiter) cfg.Limit is the zero spec and is not the service's limit:
// its workers and run queue (RunQueue) are all that bound it, and the
// simulator builds its core admit.WithoutLimit.
func (v Service) Admission() (cfg admit.Config, limited bool) {
	if v.Server != nil {
		return *v.Server, true
	}
	cfg.MinRemaining = v.MinRemaining
	if l := v.Limiter; l != nil {
		cfg.Limit = *l
		cfg.RejectAtLimit = v.RejectAtLimit == nil || *v.RejectAtLimit
	}
	if s := v.Supersede; s != nil {
		cfg.Supersede = &admit.SupersedeConfig{MaxKeys: s.Max, TTL: s.TTL, MaxWaiters: s.MaxWaiters}
	}
	return cfg, v.Limiter != nil
}

// RunQueue is the configuration of the queue where service v's admitted
// requests wait for a worker: with a policy file's server block, a FIFO
// queue (of the default capacity, in effect unbounded) without a least
// remaining time, as production runs what it admitted at once and the
// workers only model its CPU; else the scenario's queue, with
// min_remaining (see QueueSpec.ShedConfig).
func (v Service) RunQueue() shed.Config {
	if v.Server != nil {
		return QueueSpec{}.ShedConfig(0)
	}
	return v.Queue.ShedConfig(v.MinRemaining)
}
