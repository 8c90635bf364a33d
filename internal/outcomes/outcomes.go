// Package outcomes drives requests of every outcome the metrics schema
// knows — on the client every retry class and give-up reason, on the server
// every outcome and reason — through a real httpx client and a real
// httpx.Server on 127.0.0.1, and checks that an exporter's series moved by
// exactly the right amount after each kind of request: no event lost, none
// counted twice. The tests of package metrics (Prometheus) and package
// otelx (OpenTelemetry) run the same traffic through their exporter.
package outcomes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/metrics/schema"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/wire"
)

// Exporter is what a test of an exporter plugs in.
type Exporter struct {
	// Client returns the hooks that count a retrier's events as the client
	// of target. It is called once per retrier; several retriers share a
	// target.
	Client func(target string) retry.Hooks
	// Budget exports the retry budget b as the client of target.
	Budget func(target string, b budget.Budget)
	// Configure prepares the configuration of the server target before it
	// is built (its OnQueueWait, say); Register exports its counters.
	Configure func(target string, cfg *httpx.ServerConfig)
	Register  func(target string, stats func() admit.Stats)
	// Read returns the value of every series of the schema now, keyed by
	// [Key]: counters and gauges by their name, histograms by their name
	// with _count (the observations) and _sum.
	Read func(t *testing.T) map[string]float64
}

// Key returns the key of a series in an [Exporter]'s Read: the name, then
// the labels sorted by name, those with an empty value left out (as
// Prometheus does): name{a="1",b="2"}. kv alternates label names and
// values.
func Key(name string, kv ...string) string {
	type pair struct{ k, v string }
	var ps []pair
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			ps = append(ps, pair{kv[i], kv[i+1]})
		}
	}
	slices.SortFunc(ps, func(a, b pair) int { return strings.Compare(a.k, b.k) })
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", p.k, p.v)
	}
	b.WriteByte('}')
	return b.String()
}

// The targets: the server "shop" and its client, and the server "lifo"
// (adaptive LIFO, for queue timeouts) and its client.
const (
	Shop = "shop"
	LIFO = "lifo"
)

// Series keys, for the expectations.
func attempts(target, try string, c retry.Class) string {
	return Key(schema.ClientAttempts.Name, "target", target, "try", try, "class", c.String())
}

func requests(target, outcome, reason string) string {
	return Key(schema.ClientRequestDuration.Name+"_count", "target", target, "outcome", outcome, "reason", reason)
}

func offered(target, try string) string {
	return Key(schema.ServerOffered.Name, "target", target, "try", try)
}

func served(target, outcome, reason string) string {
	return Key(schema.ServerRequests.Name, "target", target, "outcome", outcome, "reason", reason)
}

// QueueWaitCount is the key of a server's queue-wait observations.
func QueueWaitCount(target string) string {
	return Key(schema.ServerQueueWait.Name+"_count", "target", target)
}

// want is what one repetition of a phase moves.
type want map[string]float64

// The client's moves for the usual stories.
var (
	okFirst = want{attempts(Shop, schema.TryFirst, retry.Success): 1, requests(Shop, schema.OutcomeSuccess, ""): 1}
)

// gaveUp returns the moves of a client request on target that gave up for
// reason after the attempts of the given classes.
func gaveUp(target, reason string, classes ...retry.Class) want {
	w := want{requests(target, schema.OutcomeGaveUp, reason): 1}
	for i, c := range classes {
		w[attempts(target, schema.Try(i+1), c)]++
	}
	return w
}

// plus returns the sum of ws.
func plus(ws ...want) want {
	s := want{}
	for _, w := range ws {
		for k, v := range w {
			s[k] += v
		}
	}
	return s
}

// env is the traffic's world: two servers and their clients.
type env struct {
	t                      *testing.T
	shop, lifo             *httpx.Server
	shopURL, lifoURL       string
	dials                  *killswitch.Dials // the shop server's
	shopHold, lifoHold     chan struct{}     // a send releases a request held at /hold
	hung                   chan struct{}     // /hang received a request
	base                   *http.Transport
	raw                    *http.Client // no retries, no metrics
	client, lifoClient     *http.Client // 2 attempts, 1 ms apart, pushback ignored
	budgeted, off, patient *http.Client // a budget that refuses every retry; retries disabled; 5 s backoff
	declined               *http.Client // retry probability 0
}

// handler serves the paths the phases call; hold is its server's channel.
func (e *env) handler(hold chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
		case "/flaky": // fails first tries
			if deadline.Attempt(r.Context()) == 1 {
				w.WriteHeader(http.StatusInternalServerError)
			}
		case "/late": // returns once its deadline has passed
			if dl, ok := r.Context().Deadline(); ok {
				time.Sleep(time.Until(dl) + time.Millisecond)
			}
		case "/hang": // until the caller leaves
			e.hung <- struct{}{}
			<-r.Context().Done()
		case "/hold": // until released
			<-hold
		default:
			http.NotFound(w, r)
		}
	})
}

// newEnv builds the servers and clients, exported through exp.
func newEnv(t *testing.T, exp Exporter) *env {
	e := &env{
		t: t, dials: new(killswitch.Dials),
		shopHold: make(chan struct{}), lifoHold: make(chan struct{}), hung: make(chan struct{}, 1),
		base: &http.Transport{},
	}
	t.Cleanup(e.base.CloseIdleConnections)
	server := func(target string, cfg httpx.ServerConfig, hold chan struct{}) (*httpx.Server, string) {
		cfg.Limit = limit.Spec{Kind: limit.KindFixed, Limit: 1}
		cfg.MaxTimeout = 5 * time.Second
		exp.Configure(target, &cfg)
		s, err := httpx.NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		exp.Register(target, s.Stats)
		srv := httptest.NewServer(s.Wrap(e.handler(hold)))
		t.Cleanup(srv.Close)
		return s, srv.URL
	}
	e.shop, e.shopURL = server(Shop, httpx.ServerConfig{
		Config: admit.Config{
			Queue: shed.Config{Capacity: 1},
			Dials: e.dials,
		},
		ThrottleClient: func(r *http.Request) bool { return r.Header.Get("X-Throttle") != "" },
	}, e.shopHold)
	e.lifo, e.lifoURL = server(LIFO, httpx.ServerConfig{
		Config: admit.Config{
			Queue: shed.Config{Order: shed.AdaptiveLIFO, CoDelTarget: 5 * time.Millisecond, CoDelInterval: 20 * time.Millisecond},
		},
	}, e.lifoHold)

	quick := retry.Policy{MaxAttempts: 2, Backoff: backoff.Policy{Kind: backoff.Constant, Base: time.Millisecond}, Pushback: retry.Pushback{Ignore: true}}
	client := func(target string, p retry.Policy, opts ...retry.Option) (*http.Client, *retry.Retrier) {
		r := retry.MustNew(p, append(opts, retry.WithHooks(exp.Client(target)))...)
		return httpx.Client(e.base, r), r
	}
	e.raw = &http.Client{Transport: e.base}
	e.client, _ = client(Shop, quick)
	e.lifoClient, _ = client(LIFO, quick)
	var empty emptyBudget
	e.budgeted, _ = client(Shop, quick, retry.WithBudget(empty))
	exp.Budget(Shop, empty)
	off := new(killswitch.Dials)
	off.SetRetriesDisabled(true)
	e.off, _ = client(Shop, quick, retry.WithDials(off))
	slow := quick
	slow.Backoff = backoff.Policy{Kind: backoff.Constant, Base: 5 * time.Second}
	e.patient, _ = client(Shop, slow)
	never := quick
	zero := 0.0
	never.RetryProbability = &zero
	e.declined, _ = client(Shop, never)
	return e
}

// emptyBudget is a retry budget of capacity 5 that has 5 tokens and
// refuses every retry (a token bucket whose retries cost more than it
// holds).
type emptyBudget struct{}

func (emptyBudget) BeginAt(time.Time) {}
func (emptyBudget) RetryAt(time.Time, budget.Cause) (budget.Ticket, bool) {
	return budget.Ticket{}, false
}
func (emptyBudget) EndAt(time.Time, budget.Outcome, budget.Ticket) {}
func (emptyBudget) Level() float64                                 { return 5 }
func (emptyBudget) Capacity() float64                              { return 5 }

// get sends GET url with the header pairs kv through c under ctx and
// returns the status code, or the error.
func get(ctx context.Context, c *http.Client, url string, kv ...string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		// A give-up on a failure answer is an error that keeps the last
		// response (httpx's give-up contract): its status is the outcome.
		var se *httpx.StatusError
		if errors.As(err, &se) && se.Response != nil {
			return se.StatusCode, nil
		}
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// call is get on the background context that fails the test on an error.
func (e *env) call(c *http.Client, url string, kv ...string) int {
	e.t.Helper()
	code, err := get(context.Background(), c, url, kv...)
	if err != nil {
		e.t.Fatalf("GET %s: %v", url, err)
	}
	return code
}

// async runs get on a goroutine and delivers its result.
func async(ctx context.Context, c *http.Client, url string, kv ...string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := get(ctx, c, url, kv...)
		ch <- err
	}()
	return ch
}

// waitFor polls cond until it holds, failing the test after a bound scaled
// to the host's speed.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	limit := time.Now().Add(hostspeed.Scale(5 * time.Second))
	for !cond() {
		if time.Now().After(limit) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// settled reports whether s has nothing in progress and every request that
// arrived accounted for.
func settled(s *httpx.Server) bool {
	st := s.Stats()
	return st.InFlight == 0 && st.Queued == 0 &&
		st.Arrived == st.Goodput+st.Failed+st.Wasted+st.ShedTotal()+st.Expired+st.Canceled
}

// holding starts a request at /hold of the server (url, its hold channel,
// its client) and returns once it holds the server's only slot; release
// lets it finish and waits for it.
func (e *env) holding(s *httpx.Server, c *http.Client, url string, hold chan struct{}) (release func()) {
	e.t.Helper()
	done := async(context.Background(), c, url+"/hold")
	e.waitFor("the slot to be held", func() bool { return s.Stats().InFlight == 1 })
	return func() {
		e.t.Helper()
		hold <- struct{}{}
		if err := <-done; err != nil {
			e.t.Fatalf("held request: %v", err)
		}
	}
}

func (e *env) queued(s *httpx.Server, n int) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d request(s) to be queued", n), func() bool { return s.Stats().Queued == n })
}

// phase is one kind of request: run makes one, want is what it moves.
type phase struct {
	name string
	run  func(e *env)
	want want
}

func phases() []phase {
	ok, fail := "/ok", "/fail"
	S, L := Shop, LIFO
	var (
		first, retried         = schema.TryFirst, schema.TryRetry
		goodput, failed        = schema.OutcomeGoodput, schema.OutcomeFailed
		success                = schema.OutcomeSuccess
		transient, throttling  = retry.Transient, retry.Throttling
		exhausted              = "attempts-exhausted"
		srvFirst, srvRetry     = offered(S, first), offered(S, retried)
		srvGoodput, srvFailed  = served(S, goodput, ""), served(S, failed, "")
		lifoFirst, lifoRetry   = offered(L, first), offered(L, retried)
		lifoOK                 = want{attempts(L, first, retry.Success): 1, requests(L, success, ""): 1}
		onceFailed             = want{srvFirst: 1, srvFailed: 1}
		refusedTwice           = gaveUp(S, exhausted, transient, transient)
		serverAfterTwoRefusals = want{srvFirst: 2, srvRetry: 1, srvGoodput: 1}
	)
	return []phase{
		{"success", func(e *env) { e.call(e.client, e.shopURL+ok) },
			plus(okFirst, want{srvFirst: 1, srvGoodput: 1})},
		{"success after a retry", func(e *env) { e.call(e.client, e.shopURL+"/flaky") },
			want{attempts(S, first, transient): 1, attempts(S, retried, retry.Success): 1, requests(S, success, ""): 1,
				srvFirst: 1, srvRetry: 1, srvFailed: 1, srvGoodput: 1}},
		{"attempts exhausted", func(e *env) { e.call(e.client, e.shopURL+fail) },
			plus(gaveUp(S, exhausted, transient, transient), want{srvFirst: 1, srvRetry: 1, srvFailed: 2})},
		{"not retryable (a 404 is goodput to the server)", func(e *env) { e.call(e.client, e.shopURL+"/missing") },
			plus(gaveUp(S, "not-retryable", retry.NeverRetry), want{srvFirst: 1, srvGoodput: 1})},
		{"shed by the kill switch: the server said stop", func(e *env) {
			if err := e.dials.SetShedFraction(1); err != nil {
				e.t.Fatal(err)
			}
			defer e.dials.SetShedFraction(0)
			e.call(e.client, e.shopURL+ok)
		}, plus(gaveUp(S, "server-said-stop", transient), want{srvFirst: 1, served(S, schema.OutcomeShed, "kill-switch"): 1})},
		{"shed: throttled", func(e *env) { e.call(e.client, e.shopURL+ok, "X-Throttle", "yes") },
			plus(gaveUp(S, exhausted, throttling, throttling), want{srvFirst: 1, srvRetry: 1, served(S, schema.OutcomeShed, "throttled"): 2})},
		{"expired on arrival", func(e *env) { e.call(e.client, e.shopURL+ok, wire.HeaderTimeout, "0n") },
			plus(gaveUp(S, exhausted, transient, transient), want{srvFirst: 1, srvRetry: 1, served(S, schema.OutcomeExpired, schema.ReasonOnArrival): 2})},
		{"wasted: the work outlived its deadline (the client saw a success)", func(e *env) {
			e.call(e.client, e.shopURL+"/late", wire.HeaderTimeout, "50m")
		}, plus(okFirst, want{srvFirst: 1, served(S, schema.OutcomeWasted, schema.ReasonDeadline): 1})},
		{"wasted: the caller left", func(e *env) {
			ctx, cancel := context.WithCancel(context.Background())
			done := async(ctx, e.client, e.shopURL+"/hang")
			<-e.hung
			cancel()
			if err := <-done; !errors.Is(err, retry.ErrCanceled) {
				e.t.Fatalf("got %v; want a give-up for the caller's cancellation", err)
			}
		}, plus(gaveUp(S, "canceled", retry.Canceled), want{srvFirst: 1, served(S, schema.OutcomeWasted, schema.ReasonCallerLeft): 1})},
		{"shed: queue full", func(e *env) {
			release := e.holding(e.shop, e.client, e.shopURL, e.shopHold)
			waiter := async(context.Background(), e.client, e.shopURL+ok)
			e.queued(e.shop, 1)
			e.call(e.client, e.shopURL+ok) // refused, retried, refused
			release()
			if err := <-waiter; err != nil {
				e.t.Fatal(err)
			}
		}, plus(okFirst, okFirst, refusedTwice, want{srvFirst: 3, srvRetry: 1, srvGoodput: 2, served(S, schema.OutcomeShed, "queue-full"): 2})},
		{"shed: a queued retry evicted by a first try", func(e *env) {
			release := e.holding(e.shop, e.client, e.shopURL, e.shopHold)
			evictee := async(context.Background(), e.raw, e.shopURL+ok, wire.HeaderAttempt, "2")
			e.queued(e.shop, 1)
			newcomer := async(context.Background(), e.client, e.shopURL+ok)
			if err := <-evictee; err != nil {
				e.t.Fatal(err)
			}
			e.queued(e.shop, 1)
			release()
			if err := <-newcomer; err != nil {
				e.t.Fatal(err)
			}
		}, plus(okFirst, okFirst, want{srvFirst: 2, srvRetry: 1, srvGoodput: 2, served(S, schema.OutcomeShed, "evicted"): 1})},
		{"shed: adaptive LIFO's queue timeout", func(e *env) {
			release := e.holding(e.lifo, e.lifoClient, e.lifoURL, e.lifoHold)
			e.call(e.lifoClient, e.lifoURL+ok) // timed out in the queue, twice
			release()
		}, plus(lifoOK, gaveUp(L, exhausted, transient, transient),
			want{lifoFirst: 2, lifoRetry: 1, served(L, goodput, ""): 1, served(L, schema.OutcomeShed, "queue-timeout"): 2})},
		{"expired in the queue", func(e *env) {
			release := e.holding(e.shop, e.client, e.shopURL, e.shopHold)
			e.call(e.client, e.shopURL+ok, wire.HeaderTimeout, "30m") // expired in the queue, twice
			release()
		}, plus(okFirst, refusedTwice, serverAfterTwoRefusals, want{served(S, schema.OutcomeExpired, schema.ReasonInQueue): 2})},
		{"canceled: the caller left the queue", func(e *env) {
			release := e.holding(e.shop, e.client, e.shopURL, e.shopHold)
			before := e.shop.Stats().Canceled
			ctx, cancel := context.WithCancel(context.Background())
			done := async(ctx, e.client, e.shopURL+ok)
			e.queued(e.shop, 1)
			cancel()
			if err := <-done; !errors.Is(err, retry.ErrCanceled) {
				e.t.Fatalf("got %v; want a give-up for the caller's cancellation", err)
			}
			e.waitFor("the server to see the caller leave", func() bool { return e.shop.Stats().Canceled == before+1 })
			release()
		}, plus(okFirst, gaveUp(S, "canceled", retry.Canceled), want{srvFirst: 2, srvGoodput: 1, served(S, schema.OutcomeCanceled, ""): 1})},
		{"budget exhausted", func(e *env) { e.call(e.budgeted, e.shopURL+fail) },
			plus(gaveUp(S, "budget-exhausted", transient), onceFailed)},
		{"retries disabled", func(e *env) { e.call(e.off, e.shopURL+fail) },
			plus(gaveUp(S, "retries-disabled", transient), onceFailed)},
		{"no time left before the deadline", func(e *env) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := get(ctx, e.patient, e.shopURL+fail); err != nil {
				e.t.Fatal(err)
			}
		}, plus(gaveUp(S, "deadline", transient), onceFailed)},
		{"retry declined", func(e *env) { e.call(e.declined, e.shopURL+fail) },
			plus(gaveUp(S, "retry-declined", transient), onceFailed)},
	}
}

// Run builds the servers and clients, exported through exp, and makes n
// requests of each kind; after each kind it checks that every counter of the
// schema moved by exactly what those requests account for (and histogram
// counts: one observation per request that ended, one queue wait per
// request admitted), and that nothing else moved. At the end it checks the
// gauges. It returns the last reading.
func Run(t *testing.T, n int, exp Exporter) map[string]float64 {
	e := newEnv(t, exp)
	last := exp.Read(t)
	for _, p := range phases() {
		for range n {
			p.run(e)
		}
		e.waitFor("the servers to settle", func() bool { return settled(e.shop) && settled(e.lifo) })
		now := exp.Read(t)
		want := want{}
		for k, v := range p.want {
			want[k] = v * float64(n)
		}
		for _, target := range []string{Shop, LIFO} { // one queue wait per request admitted
			for _, outcome := range []string{schema.OutcomeGoodput, schema.OutcomeFailed} {
				want[QueueWaitCount(target)] += want[served(target, outcome, "")]
			}
			for _, reason := range []string{schema.ReasonDeadline, schema.ReasonCallerLeft} {
				want[QueueWaitCount(target)] += want[served(target, schema.OutcomeWasted, reason)]
			}
		}
		checkMoves(t, p.name, last, now, want)
		last = now
	}
	gauges := want{
		Key(schema.ServerInFlight.Name, "target", Shop): 0, Key(schema.ServerQueued.Name, "target", Shop): 0,
		Key(schema.ServerConcurrencyLimit.Name, "target", Shop): 1, Key(schema.ServerConcurrencyLimit.Name, "target", LIFO): 1,
		Key(schema.ClientBudgetTokens.Name, "target", Shop): 5, Key(schema.ClientBudgetCapacity.Name, "target", Shop): 5,
	}
	for k, w := range gauges {
		if got, ok := last[k]; !ok || got != w {
			t.Errorf("gauge %s = %v (exported: %v); want %v", k, got, ok, w)
		}
	}
	return last
}

// checkMoves compares the moves from before to after with want, for every
// series but the gauges and the histograms' sums and buckets.
func checkMoves(t *testing.T, phase string, before, after map[string]float64, want want) {
	t.Helper()
	keys := map[string]bool{}
	for _, m := range []map[string]float64{before, after, want} {
		for k := range maps.Keys(m) {
			keys[k] = true
		}
	}
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		name, _, _ := strings.Cut(k, "{")
		if !moves(name) {
			continue
		}
		if _, ok := after[k]; !ok {
			// An OpenTelemetry histogram has no series before its first
			// observation; every other series must be there.
			if !strings.HasSuffix(name, "_count") || want[k] != 0 {
				bad = append(bad, fmt.Sprintf("%s: not exported", k))
			}
			continue
		}
		if got := after[k] - before[k]; got != want[k] {
			bad = append(bad, fmt.Sprintf("%s moved by %v, want %v", k, got, want[k]))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s:\n\t%s", phase, strings.Join(bad, "\n\t"))
	}
}

// moves reports whether the series of a key's name are checked move by
// move: the counters and the histograms' counts.
func moves(name string) bool {
	if base, ok := strings.CutSuffix(name, "_count"); ok {
		m, known := schema.Lookup(base)
		return known && m.Kind == schema.Histogram
	}
	m, known := schema.Lookup(name)
	return known && m.Kind == schema.Counter
}
