package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/wire"
)

// HeaderDegraded marks a success that an app served with a fallback
// because its downstream call failed.
const HeaderDegraded = "Stormguard-Lab-Degraded"

// service is the app or the backend role: an HTTP handler that accounts
// for every attempt in the simulator's vocabulary, admits through
// httpx.Server (defended) and a worker pool, and does the work: a wait of
// the service time, then, for an app, the downstream call.
//
// As the simulator's service: without defenses the pool (workers and
// their queue) is all its admission; defended with an admission of its
// own (a limiter, a policy file's server block) the gate admits through
// it and the pool then gives admitted requests their workers; defended
// without one, the gate stands for the pool (its limit fixed at the
// workers, its queue the run queue).
type service struct {
	cfg    ServiceConfig
	clk    clock
	counts *serviceCounts

	hs      *httpx.Server // defended
	guarded http.Handler  // hs.Wrap(work or queued)
	pool    *pool         // not defended, or behind an admission of its own
	// retryAfter is the Retry-After of the pool's refusals behind the
	// gate: the gate's own.
	retryAfter string

	client *http.Client // the app's downstream client
	url    string

	rngMu sync.Mutex
	rng   *rand.Rand

	inSystem atomic.Int64
	// svc sums the service times drawn and as they took (see HostStats).
	svc serviceClock
}

// stateKey carries a request's *reqState through httpx.Server.
type stateKey struct{}

// reqState carries an attempt's number through the gate and says whether
// its work started.
type reqState struct {
	attempt int
	ran     bool
}

// newService builds a service role that counts in the bins of clk.
func newService(cfg ServiceConfig, clk clock) (*service, error) {
	s := &service{cfg: cfg, clk: clk, counts: newServiceCounts(clk),
		rng: rand.New(rand.NewPCG(cfg.Seed, streamID("service", cfg.Name)))}
	if !cfg.Defended || cfg.Admission != nil {
		p, err := newPool(cfg.Workers, cfg.Queue)
		if err != nil {
			return nil, err
		}
		s.pool = p
	}
	if cfg.Defended {
		ac := admit.Config{
			Queue:        cfg.Queue,
			MinRemaining: cfg.MinRemaining,
			MaxTimeout:   httpx.DefaultMaxTimeout,
			Limit:        limit.Spec{Kind: limit.KindFixed, Limit: cfg.Workers},
		}
		work := s.work
		if a := cfg.Admission; a != nil {
			ac, work = *a, s.queued
		}
		hs, err := httpx.NewServer(httpx.ServerConfig{Config: ac})
		if err != nil {
			return nil, err
		}
		s.hs = hs
		s.guarded = hs.Wrap(http.HandlerFunc(work))
		s.retryAfter = strconv.FormatInt(int64(max(1, math.Ceil(ac.WithDefaults().RetryAfter.Seconds()))), 10)
	}
	if c := cfg.Call; c != nil {
		r, err := retry.New(c.Policy)
		if err != nil {
			return nil, fmt.Errorf("call policy: %w", err)
		}
		t := &httpx.Transport{Base: newHTTPTransport(), Retrier: r, PropagateDeadline: c.PropagateDeadline}
		s.client = &http.Client{Transport: t}
		s.url = "http://" + c.Upstream + "/"
	}
	return s, nil
}

// newHTTPTransport is the base transport of the lab's clients: loopback
// only, no proxy from the environment, enough idle connections kept for
// the lab's concurrency.
func newHTTPTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
}

// ServeHTTP accounts for an attempt and admits it.
func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	attempt := 1
	if n, ok := wire.ParseAttempt(r.Header.Get(wire.HeaderAttempt)); ok {
		attempt = n
	}
	s.counts.arrived(now, attempt)
	s.inSystem.Add(1)
	defer s.inSystem.Add(-1)
	if s.hs != nil {
		st := &reqState{attempt: attempt}
		cw := &codeWriter{ResponseWriter: w}
		s.guarded.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
		if !st.ran {
			switch cw.code {
			case http.StatusServiceUnavailable, http.StatusTooManyRequests:
				s.counts.shedAt(time.Now())
			default: // 504: expired; nothing written: its caller left while it waited
				s.counts.expiredAt(time.Now())
			}
		}
		return
	}
	if s.pool.acquire(attempt, time.Time{}) != shed.None {
		s.counts.shedAt(time.Now())
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	defer s.pool.release()
	s.work(w, r)
}

// queued is the handler behind the gate of a service with an admission
// of its own: the admitted request waits in the pool for a worker, as in
// the simulator's run queue, then works. A request the pool refuses or
// gives up is answered as the gate answers one its own queue gave up:
// 504 if its deadline passed (dropped with expired_drop), else 503 with
// the instance-overload signal and the gate's Retry-After.
func (s *service) queued(w http.ResponseWriter, r *http.Request) {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	attempt := 1
	if st != nil {
		attempt = st.attempt
	}
	var dl time.Time
	if s.cfg.ExpiredDrop {
		dl, _ = r.Context().Deadline()
	}
	switch why := s.pool.acquire(attempt, dl); why {
	case shed.None:
		defer s.pool.release()
		s.work(w, r)
	case shed.Expired:
		w.WriteHeader(http.StatusGatewayTimeout)
	default:
		h := w.Header()
		h.Set(wire.HeaderOverload, wire.OverloadInstance.String())
		h.Set(wire.HeaderRetryAfter, s.retryAfter)
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// work is the handler proper: the service time, then the app's call.
func (s *service) work(w http.ResponseWriter, r *http.Request) {
	if st, ok := r.Context().Value(stateKey{}).(*reqState); ok {
		st.ran = true
	}
	if d := s.serviceTime(time.Now()); d > 0 {
		began := time.Now()
		time.Sleep(d) // a worker is held for the service time, whatever its caller does
		s.svc.add(d, time.Since(began))
	}
	code := http.StatusOK
	if s.cfg.Call != nil {
		code = s.call(w, r)
	}
	now := time.Now()
	if code == http.StatusOK && s.failAt(now) {
		code = http.StatusInternalServerError
	}
	// Counted by the gate's release rule, from the status it answers: its
	// deadline (a defended service's context has the gate's) and whether its
	// caller left.
	ctx := r.Context()
	dl, _ := ctx.Deadline()
	s.counts.completedAt(now, admit.Classify(now, dl, ctx.Err() != nil, httpx.StatusOutcome(code)))
	w.WriteHeader(code)
	if code == http.StatusOK {
		io.WriteString(w, "ok\n")
	}
}

// call makes the app's downstream call and returns the status to answer
// with; it sets the relay headers on w.
func (s *service) call(w http.ResponseWriter, r *http.Request) int {
	ctx := r.Context()
	if !s.cfg.Call.PropagateDeadline {
		// The call does not inherit the caller's deadline, nor its leaving.
		ctx = context.WithoutCancel(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return http.StatusInternalServerError
	}
	resp, err := s.client.Do(req)
	code := http.StatusOK
	switch {
	case err != nil:
		httpx.RelayExhaustedError(w, err)
		code = http.StatusBadGateway
		var ne net.Error
		if errors.Is(err, httpx.ErrAttemptTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			code = http.StatusGatewayTimeout
		}
	default:
		if resp.StatusCode >= 400 {
			httpx.RelayExhausted(w, resp)
			code = http.StatusBadGateway
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	if code != http.StatusOK && s.cfg.Call.OnFailure == "fallback" {
		w.Header().Del(wire.HeaderRetriesExhausted)
		w.Header().Set(HeaderDegraded, "1")
		code = http.StatusOK
	}
	return code
}

// serviceTime draws the time of one request's work started at now: the
// distribution's sample, slowed by the queue (the seed's capacity that
// drops as the queue grows) and by capacity triggers.
func (s *service) serviceTime(now time.Time) time.Duration {
	s.rngMu.Lock()
	d := sample(s.cfg.ServiceTime, s.rng)
	s.rngMu.Unlock()
	if sd := s.cfg.Slowdown; sd.Factor > 0 && sd.Queue > 0 {
		q := s.runQueued()
		d = time.Duration(float64(d) * (1 + sd.Factor*min(1, float64(q)/float64(sd.Queue))))
	}
	t := now.Sub(s.clk.start)
	for _, w := range s.cfg.Triggers {
		if w.Kind == "capacity" && w.active(t) {
			d = time.Duration(float64(d) / w.Factor)
		}
	}
	return d
}

// failAt draws whether a response ending at now fails (error rate, or an
// errors trigger).
func (s *service) failAt(now time.Time) bool {
	p := s.cfg.ErrorRate
	t := now.Sub(s.clk.start)
	for _, w := range s.cfg.Triggers {
		if w.Kind == "errors" && w.active(t) {
			p = w.Factor
		}
	}
	if p <= 0 {
		return false
	}
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64() < p
}

// gauges returns the requests queued (in the gate's queue and the
// pool's, as the simulator counts a replica's), the workers busy and the
// adaptive concurrency limit (0 without a limiter, as the simulator
// reports it).
func (s *service) gauges() (queued, busy, lim int) {
	if s.pool != nil {
		queued, busy = s.pool.gauges()
	}
	if s.hs != nil {
		st := s.hs.Stats()
		queued += st.Queued
		if s.pool == nil {
			busy = st.InFlight
		}
		if s.cfg.Admission != nil {
			lim = st.Limit
		}
	}
	return queued, busy, lim
}

// runQueued returns the requests waiting for a worker: in the pool, or
// in the gate's queue when the gate stands for the pool. The slowdown
// grows with it, as the simulator's with its run queue.
func (s *service) runQueued() int {
	if s.pool != nil {
		q, _ := s.pool.gauges()
		return q
	}
	return s.hs.Stats().Queued
}

// sampleGauges records the gauges at the end of every bin until ctx is
// done or the run is over.
func (s *service) sampleGauges(ctx context.Context) {
	everyBin(ctx, s.clk, func(b int) {
		q, busy, lim := s.gauges()
		s.counts.gauge(b, q, busy, lim)
	})
}

// everyBin calls f(b) at the end of every bin b of clk, until ctx is done
// or the last bin has ended.
func everyBin(ctx context.Context, clk clock, f func(b int)) {
	for b := range clk.n {
		d := time.Until(clk.start.Add(time.Duration(b+1) * clk.bin))
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		f(b)
	}
}

// codeWriter remembers the status written through it.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *codeWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *codeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sample draws a duration from d, as the simulator does.
func sample(d scenario.Dist, r *rand.Rand) time.Duration {
	switch d.Kind {
	case "exponential":
		return time.Duration(r.ExpFloat64() * float64(d.Mean))
	case "uniform":
		return d.Min + time.Duration(r.Float64()*float64(d.Max-d.Min))
	case "lognormal":
		mu := math.Log(float64(d.Mean)) - d.Sigma*d.Sigma/2
		return time.Duration(math.Exp(mu + d.Sigma*r.NormFloat64()))
	}
	return d.Mean
}
