package rehearse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"

	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/wire"
)

// generator is one client of a rehearsal: its arrivals, sent through the
// production shells (httpx.Transport, grpcx's unary interceptor) with its
// policy, one retrier (and budget) per process, and its books.
type generator struct {
	cp    ClientPlan
	ep    EndpointPlan
	shard Shard
	guard *Guard
	books *lab.ClientCounter
	hist  *latencyHist // per-bin latency histograms, for a shard's merge
	dials *killswitch.Dials

	retriers []*retry.Retrier
	// HTTP
	transports []*httpx.Transport
	url        string
	userAgent  []string // the User-Agent header's value, unless the request template sets one
	// gRPC
	conn   *grpc.ClientConn
	ics    []grpc.UnaryClientInterceptor
	method string

	patienceMu sync.Mutex
	patience   *rand.Rand

	wg           sync.WaitGroup
	inFlight     atomic.Int64
	humanRetries atomic.Int64
	lag          time.Duration
}

// newGenerator builds client cp's shells towards entry (the endpoint, or
// what stands in front of it).
func newGenerator(p *Plan, cp ClientPlan, entry string, g *Guard, base http.RoundTripper, start time.Time) (*generator, error) {
	sc := p.Scenario
	gen := &generator{cp: cp, ep: p.Endpoints[cp.Endpoint], shard: p.Shard, guard: g, dials: &killswitch.Dials{},
		userAgent: []string{UserAgent("client " + cp.Name)},
		books:     lab.NewClientCounter(start, sc.Bin, sc.Duration),
		patience:  rand.New(rand.NewPCG(sc.Seed, lab.StreamID("client", cp.Name, "patience")))}
	if p.Shard.count() > 1 {
		gen.hist = newLatencyHist(gen.books.Bins())
	}
	for range max(1, cp.Processes) {
		r, err := retry.New(cp.Policy, retry.WithDials(gen.dials))
		if err != nil {
			return nil, fmt.Errorf("client %s: policy: %w", cp.Name, err)
		}
		gen.retriers = append(gen.retriers, r)
	}
	switch gen.ep.Kind {
	case scenario.EndpointHTTP:
		gen.url = "http://" + entry + gen.ep.Path
		for _, r := range gen.retriers {
			t := httpx.NewTransport(capped{g: g, base: base}, r)
			t.PropagateDeadline = cp.PropagateDeadline
			gen.transports = append(gen.transports, t)
		}
	case scenario.EndpointGRPC:
		gen.method = gen.ep.Path
		dial := g.Dialer()
		conn, err := grpc.NewClient("passthrough:///"+entry,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDisableRetry(),
			grpc.WithUserAgent(UserAgent("client "+cp.Name)),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				return dial.DialContext(ctx, "tcp", addr)
			}))
		if err != nil {
			return nil, fmt.Errorf("client %s: %w", cp.Name, err)
		}
		gen.conn = conn
		for _, r := range gen.retriers {
			gen.ics = append(gen.ics, grpcx.UnaryClientInterceptor(r))
		}
	}
	return gen, nil
}

// close releases the client's connections.
func (gen *generator) close() {
	if gen.conn != nil {
		gen.conn.Close()
	}
}

// run sends the client's arrivals from start, each at its time, until
// they are all sent or ctx ends; then it waits for every request it sent
// to end (those in flight when ctx ends end as canceled).
func (gen *generator) run(ctx context.Context, start time.Time) {
	proc := 0
	n := gen.shard.count()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for i, off := range gen.cp.Arrivals {
		at := start.Add(off)
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		gen.lag = max(gen.lag, time.Since(at))
		seq := i*n + gen.shard.Index
		gen.wg.Add(1)
		gen.inFlight.Add(1)
		if gen.cp.Humans != nil {
			go gen.intent(ctx, proc, seq, at)
		} else {
			go gen.request(ctx, proc, seq, at)
		}
		proc = (proc + 1) % len(gen.retriers)
	}
	gen.wg.Wait()
}

// request sends one request and books its one outcome.
func (gen *generator) request(ctx context.Context, proc, seq int, at time.Time) {
	defer gen.wg.Done()
	begin := time.Now()
	gen.books.Sent(at)
	r := gen.send(ctx, proc, seq, 1)
	if !r.ok && ctx.Err() != nil {
		// The run was stopped (Ctrl-C, or the drain's bound): the request
		// did not end, its fate is open; it stays in flight in the books.
		gen.books.Attempts(r.attempts)
		return
	}
	gen.inFlight.Add(-1)
	gen.end(begin, r)
}

// end books a request's (or a person's) outcome.
func (gen *generator) end(begin time.Time, r sendResult) {
	now := time.Now()
	gen.books.Attempts(r.attempts)
	gen.books.Ended(now, now.Sub(begin), r.ending, r.reason)
	if r.ok && gen.hist != nil {
		gen.hist.add(gen.books.BinOf(now), now.Sub(begin))
	}
}

// intent is one person (see scenario.Humans): a tap, and another after
// their patience runs out or an error comes back, up to Taps; the intent
// succeeds with the first tap that does, and fails when every tap failed.
func (gen *generator) intent(ctx context.Context, proc, seq int, at time.Time) {
	defer gen.wg.Done()
	begin := time.Now()
	gen.books.Sent(at)
	h := gen.cp.Humans
	results := make(chan sendResult, h.Taps)
	taps, pending, attempts := 0, 0, 0
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	tap := func() {
		taps++
		pending++
		if taps > 1 {
			gen.humanRetries.Add(1)
		}
		go func(n int) { results <- gen.send(ctx, proc, seq, n) }(taps)
		if taps < h.Taps {
			gen.patienceMu.Lock()
			p := lab.Sample(h.Patience, gen.patience)
			gen.patienceMu.Unlock()
			timer.Reset(p)
		}
	}
	tap()
	done := false
	for pending > 0 {
		select {
		case r := <-results:
			pending--
			attempts += r.attempts
			switch {
			case done:
			case r.ok:
				done = true
				timer.Stop()
				gen.endIntent(begin, r)
			case taps < h.Taps && ctx.Err() == nil:
				tap() // an error on the screen: the person taps again
			case pending == 0 && ctx.Err() != nil:
				done = true // stopped: the person's fate is open, in flight
			case pending == 0:
				done = true
				gen.endIntent(begin, r)
			}
		case <-timer.C:
			if !done && taps < h.Taps && ctx.Err() == nil {
				tap()
			}
		}
	}
	gen.books.Attempts(attempts)
	if !done { // cannot happen: the last tap ends it
		gen.endIntent(begin, sendResult{ending: lab.EndError("other")})
	}
}

// endIntent books a person's outcome (their taps' attempts are booked
// once they have all ended).
func (gen *generator) endIntent(begin time.Time, r sendResult) {
	gen.inFlight.Add(-1)
	now := time.Now()
	gen.books.Ended(now, now.Sub(begin), r.ending, r.reason)
	if r.ok && gen.hist != nil {
		gen.hist.add(gen.books.BinOf(now), now.Sub(begin))
	}
}

// sendResult is how one request ended.
type sendResult struct {
	ok       bool
	ending   lab.Ending
	reason   error // the retrier's reason for giving up; nil for a success
	attempts int
}

// send makes one request (tap n of a person, 1 otherwise) through the
// client's shell for process proc.
func (gen *generator) send(ctx context.Context, proc, seq, n int) sendResult {
	var count atomic.Int32
	rctx := withAttempts(ctx, &count)
	if d := gen.cp.Deadline; d > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(rctx, d)
		defer cancel()
	}
	body, headers, err := gen.ep.Request.render(TemplateData{Client: gen.cp.Name, Seq: seq, Tap: n})
	if err != nil {
		return sendResult{ending: lab.EndError("template"), reason: retry.ErrNotRetryable}
	}
	var r sendResult
	if gen.conn != nil {
		r = gen.sendGRPC(rctx, proc, seq, body, headers)
	} else {
		r = gen.sendHTTP(rctx, proc, seq, body, headers)
	}
	r.attempts = int(count.Load())
	return r
}

func (gen *generator) sendHTTP(ctx context.Context, proc, seq int, body []byte, headers [][2]string) sendResult {
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, gen.ep.Request.Method, gen.url, rd)
	if err != nil {
		return sendResult{ending: lab.EndError("other"), reason: retry.ErrNotRetryable}
	}
	for _, h := range headers {
		req.Header.Add(h[0], h[1])
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = gen.userAgent
	}
	if gen.cp.IdempotencyKey {
		req.Header.Set("Idempotency-Key", gen.cp.Name+"-"+strconv.Itoa(seq))
	}
	resp, err := gen.transports[proc].RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode < 400 {
			return sendResult{ok: true, ending: lab.EndOK(resp.Header.Get(lab.HeaderDegraded) != "")}
		}
		// A status the policy never retries (404, 400 …): the server's
		// definitive answer.
		return sendResult{ending: httpEnding(resp.StatusCode, resp.Header), reason: retry.ErrNotRetryable}
	}
	r := sendResult{reason: giveUpReason(err)}
	var se *httpx.StatusError
	switch {
	case errors.As(err, &se):
		r.ending = httpEnding(se.StatusCode, se.Header)
	case errors.Is(err, ErrPlanExhausted):
		r.ending = lab.EndError("plan exhausted")
	default:
		r.ending = lab.ClassifyTransport(err, deadlinePassed(ctx))
	}
	return r
}

// giveUpReason is why the retrier stopped, from the error of a call that
// gave up (nil for another error).
func giveUpReason(err error) error {
	var gu *retry.GiveUpError
	if errors.As(err, &gu) {
		return gu.Reason
	}
	return nil
}

// httpEnding is the ending of a failure response.
func httpEnding(code int, h http.Header) lab.Ending {
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable && h.Get(wire.HeaderOverload) != "" {
		return lab.EndShed()
	}
	return lab.EndError("http " + strconv.Itoa(code))
}

func (gen *generator) sendGRPC(ctx context.Context, proc, seq int, body []byte, headers [][2]string) sendResult {
	kv := make([]string, 0, 2*len(headers)+2)
	for _, h := range headers {
		kv = append(kv, h[0], h[1])
	}
	if gen.cp.IdempotencyKey {
		kv = append(kv, "idempotency-key", gen.cp.Name+"-"+strconv.Itoa(seq))
	}
	if len(kv) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	var reply rawMessage
	err := gen.ics[proc](ctx, gen.method, rawMessage(body), &reply, gen.conn, gen.invoke)
	if err == nil {
		return sendResult{ok: true, ending: lab.EndOK(false)}
	}
	r := sendResult{reason: giveUpReason(err)}
	var se *grpcx.StatusError
	switch {
	case errors.Is(err, ErrPlanExhausted):
		r.ending = lab.EndError("plan exhausted")
	case errors.As(err, &se):
		r.ending = grpcEnding(se)
	default:
		r.ending = lab.ClassifyTransport(err, deadlinePassed(ctx))
	}
	if r.reason == nil {
		r.reason = retry.ErrNotRetryable // a status the policy never retries
	}
	return r
}

// grpcEnding is the ending of a failed call.
func grpcEnding(se *grpcx.StatusError) lab.Ending {
	code := se.Status.Code()
	overload := len(se.Trailer.Get(wire.HeaderOverload)) > 0 || len(se.Header.Get(wire.HeaderOverload)) > 0
	switch {
	case code == codes.ResourceExhausted, code == codes.Unavailable && overload:
		return lab.EndShed()
	case code == codes.DeadlineExceeded:
		return lab.EndTimedOut()
	}
	return lab.EndError("grpc " + code.String())
}

// invoke sends one attempt of a gRPC call: its place in the Guard first,
// then the call with the raw codec.
func (gen *generator) invoke(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
	if !gen.guard.Take() {
		return ErrPlanExhausted
	}
	countAttempt(ctx)
	return cc.Invoke(ctx, method, req, reply, append(opts, grpc.ForceCodecV2(rawCodec{}))...)
}

// deadlinePassed reports whether ctx ended by its deadline.
func deadlinePassed(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// sampleBudgets records the mean fill of the client's budgets at the end
// of every bin, from start until ctx ends.
func (gen *generator) sampleBudgets(ctx context.Context, start time.Time, bin time.Duration) {
	t := time.NewTimer(time.Until(start.Add(bin)))
	defer t.Stop()
	for b := 0; b < gen.books.Bins(); b++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sum, k := 0.0, 0
		for _, r := range gen.retriers {
			if l := lab.BudgetLevel(r.Budget()); l >= 0 {
				sum += l
				k++
			}
		}
		if k > 0 {
			gen.books.SetBudget(b, sum/float64(k))
		}
		t.Reset(time.Until(start.Add(time.Duration(b+2) * bin)))
	}
}

// rawMessage is a gRPC message as bytes: the serialized request the
// scenario gives (protobuf wire format, which the rehearsal does not
// parse), and the reply it discards.
type rawMessage []byte

// rawCodec sends a rawMessage as it is, under the name "proto" so that
// the server decodes it with its own message type.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(rawMessage)
	if !ok {
		return nil, fmt.Errorf("rehearse: raw codec: %T is not a raw message", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(m)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*rawMessage)
	if !ok {
		return fmt.Errorf("rehearse: raw codec: %T is not a *raw message", v)
	}
	*m = data.Materialize()
	return nil
}

// seedFor derives a seed for a run's own random choices (the error
// front's).
func seedFor(seed uint64, parts ...string) uint64 {
	return rand.New(rand.NewPCG(seed, lab.StreamID(parts...))).Uint64()
}
