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
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/wire"
)

// HeaderDegraded marks a success that an app served with a fallback
// because its downstream call failed.
const HeaderDegraded = "Stormguard-Lab-Degraded"

// service is the app or the backend role: an HTTP handler that accounts
// for every attempt in the simulator's vocabulary, admits through
// httpx.Server (defended) or a plain worker pool, and does the work: a
// wait of the service time, then, for an app, the downstream call.
type service struct {
	cfg    ServiceConfig
	clk    clock
	counts *serviceCounts

	hs      *httpx.Server // defended
	guarded http.Handler  // hs.Wrap(work)
	pool    *pool         // not defended

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

// reqState says whether the work of an attempt started.
type reqState struct{ ran bool }

// newService builds a service role that counts in the bins of clk.
func newService(cfg ServiceConfig, clk clock) (*service, error) {
	s := &service{cfg: cfg, clk: clk, counts: newServiceCounts(clk),
		rng: rand.New(rand.NewPCG(cfg.Seed, streamID("service", cfg.Name)))}
	qc := cfg.Queue.ShedConfig(cfg.MinRemaining)
	if cfg.Defended {
		sc := httpx.ServerConfig{Queue: qc, MinRemaining: cfg.MinRemaining, MaxTimeout: httpx.DefaultMaxTimeout,
			Limit: limit.Spec{Kind: limit.KindFixed, Limit: cfg.Workers}}
		if cfg.Limiter != nil {
			sc.Limit = *cfg.Limiter
		}
		hs, err := httpx.NewServer(sc)
		if err != nil {
			return nil, err
		}
		s.hs = hs
		s.guarded = hs.Wrap(http.HandlerFunc(s.work))
	} else {
		p, err := newPool(cfg.Workers, qc)
		if err != nil {
			return nil, err
		}
		s.pool = p
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
		st := &reqState{}
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
	if !s.pool.acquire(attempt) {
		s.counts.shedAt(time.Now())
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	defer s.pool.release()
	s.work(w, r)
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
	s.counts.completedAt(now, r.Context().Err() == nil)
	if code == http.StatusOK && s.failAt(now) {
		code = http.StatusInternalServerError
	}
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
		q, _, _ := s.gauges()
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

// gauges returns the requests queued, the workers busy and the adaptive
// concurrency limit (0 without a limiter, as the simulator reports it).
func (s *service) gauges() (queued, busy, lim int) {
	if s.hs != nil {
		st := s.hs.Stats()
		if s.cfg.Limiter != nil {
			lim = st.Limit
		}
		return st.Queued, st.InFlight, lim
	}
	q, b := s.pool.gauges()
	return q, b, 0
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
func sample(d sim.Dist, r *rand.Rand) time.Duration {
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
