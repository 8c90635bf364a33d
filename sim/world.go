package sim

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/autoscale"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// Event kinds of the model. Every event's Target, A and B are documented
// here; the handlers are in events.go and server.go.
const (
	evArrive       engine.Kind = iota // Target: client; a new request arrives (open loop, burst)
	evThink                           // Target: client, A: user; a closed-loop user sends its next request
	evDeliver                         // A: attempt, B: gen; the attempt reaches its service
	evWorkDone                        // A: attempt, B: gen; a worker finished the local work
	evReply                           // A: attempt, B: gen<<8 | code; the answer reaches the caller
	evTimeout                         // A: attempt, B: gen; the caller's attempt timeout (fixed queue per edge)
	evRetry                           // A: request, B: gen; the backoff is over, send the next attempt
	evExpire                          // Target: service, A: replica; the queue's next item falls due
	evBin                             // end of a statistics bin
	evTriggerOn                       // Target: trigger
	evTriggerOff                      // Target: trigger
	evFleetSync                       // Target: client, A: process; its message reaches the fleet's store
	evFleetGrant                      // Target: client, A: process, B: 0 the store's answer reaches it, 1 it looks again
	evPSDone                          // Target: service, A: replica; the next processor-sharing job is done
	evOverheadDone                    // Target: service, A: replica, B: epoch; a worker finished failure work
	evRelease                         // A: attempt, B: gen; a hung attempt lets its worker go
	evRestart                         // Target: service, A: replica; a crashed replica serves again
	evCacheHit                        // A: request, B: gen; a cache hit's answer reaches the caller
	evAction                          // Target: action; an operator's runbook step
	evAutoscale                       // Target: service; its autoscaler evaluates
	evReady                           // Target: service, A: replica, B: epoch; a new replica's up delay has passed
	evBoot                            // Target: service, A: replica, B: epoch; a new replica makes its next start-up call
	evHedge                           // A: request, B: gen; a hedged request's next hedge may be due
	evPatience                        // A: intent, B: gen; a person's patience with the last tap ran out
)

// Reply codes carried by evReply.
const (
	codeOK         = iota // success
	codeDegraded          // success served with a fallback below
	codeError             // a transient error (500/503 without signals)
	codeShed              // rejected by admission: 503, this instance overloaded
	codeExhausted         // failed after retries below: do not retry
	codeRefused           // connection refused (an outage in drop mode)
	codeSuperseded        // replaced by a newer request with its key: do not retry
	codeNone              // no answer (internal: an attempt dropped unanswered)
)

// noID marks an absent index.
const noID = -1

// A request is one call of a caller to a service, across its attempts: a
// user's request, or a service's downstream call made while serving an
// attempt (its parent).
type request struct {
	edge      int32
	proc      int32  // client process (retrier) index
	parent    int32  // attempt being served that waits for this call; noID for users
	parentGen uint32 //
	user      int32  // closed-loop user; noID otherwise
	cur       int32  // current attempt; noID between attempts
	key       int32  // cache key of a keyed cache miss, filled on success; noID otherwise
	boot      int32  // replica whose start-up call this is; noID otherwise
	hedge     int32  // its state in world.hedges when hedged; noID otherwise
	intent    int32  // the person's intent this request is a tap of; noID otherwise
	intentGen uint32 //
	skey      uint64 // idempotency key its attempts carry; 0: none
	gen       uint32
	arrival   engine.Time
	deadline  engine.Time // 0: none
	call      retry.Call
	degraded  bool
	sent      bool // an attempt has gone out: the next one is a retry
	live      bool
}

// An attempt is one try of a request. The caller side (waiting, timed out,
// answered) and the server side (in the network, queued, in service,
// answered, dropped) end independently; the slot is freed when both have.
type attempt struct {
	req      int32
	reqGen   uint32
	gen      uint32
	number   int32
	svc      int32
	deadline engine.Time // propagated deadline; 0: none
	timeout  engine.Handle
	waiting  bool // the caller still waits for this attempt
	arrived  bool // it reached the service
	decided  bool // the service has settled its fate (completed, shed, expired)
	cliDone  bool
	srvDone  bool
	live     bool
	skey     uint64 // idempotency key; 0: none
	// server side
	rep        int32       // replica
	admitDL    engine.Time // its deadline as its replica's admission core set it; 0: none
	ref        admit.Ref   // the core's reference to it: queued or joined (held), or in service with a key
	held       bool        // queued in its replica's admission core, or waiting there for a twin
	inSvc      bool        // holds a worker of its replica
	hung       bool
	permit     limit.Permit
	hasPermit  bool // admitted by the core and not released yet
	nextCall   int32
	degraded   bool
	callFailed bool // a call it made failed: its failure is overload's
}

// An edge is a caller → service link with its retry policy: a client
// population's calls, or one service's downstream call.
type edge struct {
	name      string
	client    int32 // client index, or noID for a service's call
	from      int32 // calling service, or noID for a client
	target    int32
	retriers  []*retry.Retrier // one per process
	timeout   time.Duration
	timeoutQ  *engine.FixedQueue
	deadline  time.Duration // per request, from arrival (clients only)
	propagate bool
	latency   scenario.Dist
	rng       engine.Rand
	cache     *cache        // the target's look-aside cache, if any
	noticeTO  time.Duration // failure work a timeout costs the calling service
	paused    bool          // a runbook paused it: attempts are refused at once
	breaker   bool          // its retriers have circuit breakers
	hedged    bool          // its policy hedges (retry.Policy.Hedge)
}

type client struct {
	spec     scenario.Client
	dials    *killswitch.Dials // shared by its processes' retriers
	edge     int32
	rng      engine.Rand
	nextProc int32
	load     float64 // product of active load triggers
	// plain is the rate of an arrival process whose rate never changes (a
	// poisson process at a rate > 0, without a schedule, in a scenario
	// without load triggers), for scheduleArrival's shortcut; 0 otherwise.
	plain float64
	fleet *fleetPool // the shared budget, when the processes share one
	stats clientStats
}

type service struct {
	spec      scenario.Service
	idx       int
	workers   int
	reps      []replica
	rr        int32   // the balancer's next replica
	calls     []int32 // edges
	signals   bool    // answer shedding with stormguard's overload signal
	expire    bool    // drop expired work (queue and admission)
	minRemain time.Duration
	rng       engine.Rand
	draw      func() uint32 // the kill switch's random draw, from rng
	deadlines bool          // its admission reads the attempts' deadlines (expired_drop, or a server block)
	paused    int
	capacity  float64 // product of active capacity triggers
	outages   int
	dropMode  bool
	held      []engine.Event // messages held by an outage
	addLat    time.Duration
	errRate   float64 // error probability: the spec's, or an errors trigger's
	hangP     float64 // hang probability: the spec's, or a hang trigger's
	hangRel   time.Duration
	// the capacity law
	ps               bool    // processor sharing
	psByN            bool    // its speed depends on the attempts in service
	cores            float64 // processor sharing
	perRequest       time.Duration
	leastOutstanding bool
	crashAt          int // queue length past which a replica crashes
	cache            *cache
	dials            *killswitch.Dials // its limiters', its calls' retriers' and its shedding's
	opSpeed          float64           // a runbook's capacity factor [1]
	scaler           *autoscale.Autoscaler
	scaleDelay       time.Duration // how long a new replica takes to serve
	bootEdge         int32         // the start-up calls' edge; noID without
	meter            meter         // what the autoscaler reads, since its last evaluation
	tickStart        engine.Time
	tickCount        int
	stats            serviceStats
}

// world is one run's state.
type world struct {
	sc          scenario.Scenario
	eng         engine.Engine
	clients     []client
	services    []service
	edges       []edge
	reqs        []request
	freeReq     []int32
	atts        []attempt
	freeAtt     []int32
	bin         time.Duration
	nbins       int
	binMask     int   // the per-bin arrays' place of bin b is b & binMask: all ones, or 1 with a spool
	binAt       int   // binOf's kept place, of the bin t / bin for t in [binLo, binHi) clamped to the last bin
	binNum      int   // and that bin
	binLo       int64 //
	binHi       int64 // 0: none kept
	end         engine.Time
	pushItem    shed.Item[uint64]                // admitStart's item for the run queue (PushTo)
	pushAdm     shed.Admission[uint64]           // and the queue's answer
	acts        []admit.Action[int32]            // the admission actions being carried out (see exec)
	traceAnswer func(ai int32, d admit.Decision) // tests: told of every answer of admission
	req         admit.Request                    // admit's request for its core
	entered     admit.Entered                    // and the core's answer
	triggerS    [][2]float64
	svcIdx      map[string]int32
	cliIdx      map[string]int32
	hedges      []hedgeState
	freeHedge   []int32
	intents     []intent
	freeIntent  []int32
	nextKey     uint64 // idempotency keys handed out
	actions     []result.ActionMark
	fastFired   uint64 // the events the fast path delivered, when it ran (fast.go)
	// spool, when set, takes each bin's series as the bin closes (see
	// spool.go); flushed counts the bins it has.
	spool   *result.Spool
	flushed int
}

// streamID derives a random stream's id from stable names, never from
// construction order: adding a service does not change another's stream.
func streamID(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// newWorld builds the state of a run from a validated scenario with its
// defaults filled in.
func newWorld(sc scenario.Scenario, spool *result.Spool) (*world, error) {
	w := &world{sc: sc, bin: sc.Bin, end: engine.Time(sc.Duration), spool: spool}
	bufs := w.takeBuffers()
	w.nbins = int((sc.Duration + sc.Bin - 1) / sc.Bin)
	w.binMask = -1
	places := w.nbins
	if spool != nil {
		w.binMask, places = 1, 2
	}
	svcIdx := map[string]int32{}
	w.svcIdx = svcIdx
	w.cliIdx = map[string]int32{}
	for i, c := range sc.Clients {
		w.cliIdx[c.Name] = int32(i)
	}
	w.services = make([]service, len(sc.Services))
	for i, spec := range sc.Services {
		svcIdx[spec.Name] = int32(i)
		v := &w.services[i]
		v.spec = spec
		v.idx = i
		v.dials = new(killswitch.Dials)
		v.opSpeed = 1
		v.bootEdge = noID
		v.workers = spec.Workers
		v.capacity = 1
		v.errRate = spec.ErrorRate
		v.signals = spec.Defenses == "stormguard"
		v.expire = spec.ExpiredDrop
		v.minRemain = spec.MinRemaining
		v.rng = engine.Stream(sc.Seed, streamID("service", spec.Name))
		v.draw = func() uint32 { return uint32(v.rng.Float64() * 1e6) }
		v.deadlines = spec.ExpiredDrop || spec.Server != nil
		if h := spec.Hang; h != nil {
			v.hangP, v.hangRel = h.Probability, h.Release
		}
		if l := spec.Law; l != nil {
			v.ps = l.Kind == "processor-sharing"
			v.psByN = l.Knee > 0 || len(l.Curve) > 0
			v.cores = l.Cores
			v.perRequest = l.PerRequest
		}
		v.leastOutstanding = spec.Balancer == "least-outstanding"
		if spec.Crash != nil {
			v.crashAt = spec.Crash.Limit()
		}
		if spec.Cache != nil {
			v.cache = newCache(*spec.Cache, engine.Stream(sc.Seed, streamID("cache", spec.Name)))
		}
		v.reps = make([]replica, spec.Replicas)
		for j := range v.reps {
			r, err := v.newReplica()
			if err != nil {
				return nil, fmt.Errorf("service %s: %w", spec.Name, err)
			}
			v.reps[j] = r
		}
		if a := spec.Autoscale; a != nil {
			sc, err := autoscale.New(a.Policy)
			if err != nil {
				return nil, fmt.Errorf("service %s: autoscale: %w", spec.Name, err)
			}
			v.scaler = sc
			v.scaleDelay = a.UpDelay
			v.meter.on = true
		}
		v.stats.init(places)
	}
	w.reuseQueues(bufs)
	for i, spec := range sc.Services {
		for j, c := range spec.Calls {
			e, err := w.newEdge(fmt.Sprintf("%s→%s#%d", spec.Name, c.Service, j), noID, int32(i), svcIdx[c.Service],
				c.Policy.Policy, c.Breaker, 1, c.Timeout, 0, c.PropagateDeadline, c.Network.Latency, w.services[i].dials)
			if err != nil {
				return nil, fmt.Errorf("service %s: calls[%d]: %w", spec.Name, j, err)
			}
			w.services[i].calls = append(w.services[i].calls, e)
		}
		if a := spec.Autoscale; a != nil && a.Startup != nil {
			st := a.Startup
			e, err := w.newEdge(fmt.Sprintf("%s→%s#startup", spec.Name, st.Service), noID, int32(i), svcIdx[st.Service],
				st.Policy.Policy, nil, 1, st.Timeout, 0, false, scenario.Dist{}, w.services[i].dials)
			if err != nil {
				return nil, fmt.Errorf("service %s: autoscale.startup: %w", spec.Name, err)
			}
			w.services[i].bootEdge = e
		}
	}
	w.clients = make([]client, len(sc.Clients))
	for i, spec := range sc.Clients {
		c := &w.clients[i]
		c.spec = spec
		c.load = 1
		c.dials = new(killswitch.Dials)
		c.rng = engine.Stream(sc.Seed, streamID("client", spec.Name, "arrivals"))
		c.plain = spec.Arrivals.PlainRate(sc.Triggers)
		var shared []budget.Budget
		if spec.Fleet != nil {
			c.fleet = newFleet(w, int32(i), spec.Processes, spec.Policy.Budget, *spec.Fleet)
			for _, l := range c.fleet.procs {
				shared = append(shared, l)
			}
		}
		e, err := w.newEdge(spec.Name, int32(i), noID, svcIdx[spec.Target], spec.Policy.Policy, spec.Breaker, spec.Processes,
			spec.Timeout, spec.Deadline, spec.PropagateDeadline, spec.Network.Latency, c.dials, shared...)
		if err != nil {
			return nil, fmt.Errorf("client %s: %w", spec.Name, err)
		}
		c.edge = e
		c.stats.init(w.nbins, places)
	}
	for _, t := range sc.Triggers {
		w.triggerS = append(w.triggerS, [2]float64{t.At.Seconds(), (t.At + t.Duration).Seconds()})
	}
	return w, nil
}

// newEdge builds an edge whose retriers read dials; budgets, if given, are
// the processes' budgets (a fleet's leases) instead of one built from the
// policy each.
func (w *world) newEdge(name string, cl, from, target int32, p retry.Policy, brk *scenario.BreakerSpec, procs int, timeout, deadline time.Duration, propagate bool, lat scenario.Dist, dials *killswitch.Dials, budgets ...budget.Budget) (int32, error) {
	e := edge{name: name, client: cl, from: from, target: target, timeout: timeout, deadline: deadline, propagate: propagate, latency: lat, breaker: brk != nil,
		hedged: p.Hedge != nil && p.Hedge.MaxAttempts > 1}
	for i := range procs {
		opts := []retry.Option{retry.WithDials(dials)}
		if brk != nil {
			// Each process its own breaker, its jitter from its own stream.
			rng := engine.Stream(w.sc.Seed, streamID("breaker", name, fmt.Sprint(i)))
			b, err := breaker.New(brk.Spec, breaker.WithRand(rng.Float64))
			if err != nil {
				return 0, err
			}
			opts = append(opts, retry.WithBreaker(b))
		}
		if i < len(budgets) {
			opts = append(opts, retry.WithBudget(budgets[i]))
		}
		r, err := retry.New(p, opts...)
		if err != nil {
			return 0, err
		}
		e.retriers = append(e.retriers, r)
	}
	e.timeoutQ = w.eng.NewFixedQueue(timeout)
	e.rng = engine.Stream(w.sc.Seed, streamID("edge", name))
	e.cache = w.services[target].cache
	if from >= 0 {
		e.noticeTO = w.services[from].spec.FailureCost.Timeout
	}
	w.edges = append(w.edges, e)
	return int32(len(w.edges) - 1), nil
}

// budgetLevel returns the fill of a budget as a fraction of full, or -1
// when the budget has no level.
func budgetLevel(b budget.Budget) float64 {
	switch b := b.(type) {
	case *budget.TokenBucket:
		return b.Level() / b.Capacity()
	case *budget.TokenRatio:
		return b.Level() / b.MaxTokens()
	}
	return -1
}

// wall converts virtual time to the time.Time the cores take.
func wall(t engine.Time) time.Time {
	// time.Unix(0, t), with the seconds split off here: a division by a
	// constant the compiler makes a multiplication, where Unix, given all
	// of t as nanoseconds, splits it again in a branch of its own. The
	// same Time for every t (Unix normalises a negative remainder).
	return time.Unix(int64(t)/1e9, int64(t)%1e9)
}
