package httpx_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// denyBudget refuses every retry.
type denyBudget struct{}

func (denyBudget) BeginAt(time.Time) {}
func (denyBudget) RetryAt(time.Time, budget.Cause) (budget.Ticket, bool) {
	return budget.Ticket{}, false
}
func (denyBudget) EndAt(time.Time, budget.Outcome, budget.Ticket) {}

func killed() retry.Option {
	d := new(killswitch.Dials)
	d.SetRetriesDisabled(true)
	return retry.WithDials(d)
}

func TestTransportResponses(t *testing.T) {
	r503 := reply{status: 503, body: "busy"}
	ok := reply{status: 200, body: "ok"}
	with := func(status int, k, v string) reply {
		return reply{status: status, header: map[string]string{k: v}, body: "busy"}
	}
	tests := []struct {
		name          string
		replies       []reply
		opts          []retry.Option
		wantStatus    int
		wantAttempts  int
		wantDelays    []time.Duration // nil: no retry
		wantExhausted bool            // Stormguard-Retries-Exhausted on the response
		wantGiveUp    error           // the reason the OnGiveUp hook saw; nil: none
		wantErr       bool            // a *retry.GiveUpError carrying the response, not the response
	}{
		{name: "first try", replies: []reply{ok},
			wantStatus: 200, wantAttempts: 1},
		{name: "Retry-After 1 twice, clamped to backoff+100ms",
			replies:    []reply{with(503, "Retry-After", "1"), with(503, "Retry-After", "1"), ok},
			wantStatus: 200, wantAttempts: 3, wantDelays: []time.Duration{101 * time.Millisecond, 101 * time.Millisecond}},
		{name: "Retry-After date in the past", replies: []reply{with(503, "Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT"), ok},
			wantStatus: 200, wantAttempts: 2, wantDelays: []time.Duration{time.Millisecond}},
		{name: "Retry-After negative", replies: []reply{with(503, "Retry-After", "-5"), ok},
			wantStatus: 503, wantAttempts: 1, wantExhausted: true, wantErr: true, wantGiveUp: retry.ErrServerSaidStop},
		{name: "Retry-After malformed", replies: []reply{with(503, "Retry-After", "soon"), ok},
			wantStatus: 503, wantAttempts: 1, wantExhausted: true, wantErr: true, wantGiveUp: retry.ErrServerSaidStop},
		{name: "X-Amz-Retry-After honoured", replies: []reply{with(503, "X-Amz-Retry-After", "40"), ok},
			wantStatus: 200, wantAttempts: 2, wantDelays: []time.Duration{40 * time.Millisecond}},
		{name: "X-Amz-Retry-After malformed is ignored", replies: []reply{with(503, "X-Amz-Retry-After", "soon"), ok},
			wantStatus: 200, wantAttempts: 2, wantDelays: []time.Duration{time.Millisecond}},
		{name: "service overloaded", replies: []reply{with(503, "Stormguard-Overload", "service"), ok},
			wantStatus: 503, wantAttempts: 1, wantExhausted: true, wantErr: true, wantGiveUp: retry.ErrServerSaidStop},
		{name: "instance overloaded", replies: []reply{with(503, "Stormguard-Overload", "instance"), ok},
			wantStatus: 200, wantAttempts: 2, wantDelays: []time.Duration{time.Millisecond}},
		{name: "unknown overload value counts as instance", replies: []reply{with(503, "Stormguard-Overload", "meltdown"), ok},
			wantStatus: 200, wantAttempts: 2, wantDelays: []time.Duration{time.Millisecond}},
		{name: "exhausted downstream", replies: []reply{with(503, "Stormguard-Retries-Exhausted", "1"), ok},
			wantStatus: 503, wantAttempts: 1, wantExhausted: true, wantErr: true, wantGiveUp: retry.ErrServerSaidStop},
		{name: "429 throttling backoff", replies: []reply{{status: 429}, ok},
			wantStatus: 200, wantAttempts: 2, wantDelays: []time.Duration{30 * time.Millisecond}},
		{name: "408 retried", replies: []reply{{status: 408}, ok},
			wantStatus: 200, wantAttempts: 2, wantDelays: []time.Duration{time.Millisecond}},
		{name: "404 not retried", replies: []reply{{status: 404}, ok},
			wantStatus: 404, wantAttempts: 1, wantGiveUp: retry.ErrNotRetryable},
		{name: "501 not retried", replies: []reply{{status: 501}, ok},
			wantStatus: 501, wantAttempts: 1, wantGiveUp: retry.ErrNotRetryable},
		{name: "final 503 after retries is marked exhausted", replies: []reply{r503, {status: 502}, {status: 504}},
			wantStatus: 504, wantAttempts: 3, wantDelays: []time.Duration{time.Millisecond, time.Millisecond},
			wantExhausted: true, wantErr: true, wantGiveUp: retry.ErrAttemptsExhausted},
		{name: "retried then not retryable is marked exhausted", replies: []reply{r503, {status: 404}},
			wantStatus: 404, wantAttempts: 2, wantDelays: []time.Duration{time.Millisecond},
			wantExhausted: true, wantGiveUp: retry.ErrNotRetryable},
		{name: "kill switch", replies: []reply{r503, ok}, opts: []retry.Option{killed()},
			wantStatus: 503, wantAttempts: 1, wantExhausted: true, wantErr: true, wantGiveUp: retry.ErrRetriesDisabled},
		{name: "budget empty", replies: []reply{r503, ok}, opts: []retry.Option{retry.WithBudget(denyBudget{})},
			wantStatus: 503, wantAttempts: 1, wantExhausted: true, wantErr: true, wantGiveUp: retry.ErrBudgetExhausted},
		{name: "classifier accepts 404", replies: []reply{{status: 404}},
			opts: []retry.Option{retry.WithClassifiers(retry.ClassifierFunc(func(err error) (retry.Class, bool) {
				var se *httpx.StatusError
				if errors.As(err, &se) && se.StatusCode == 404 {
					return retry.Success, true
				}
				return 0, false
			}))},
			wantStatus: 404, wantAttempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, base, rec := setup(t, fast(), tt.opts...)
			srv := newServer(t, tt.replies...)
			resp, err := tr.RoundTrip(get(t, context.Background(), srv.URL))
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("RoundTrip: err = %v, want an error: %v", err, tt.wantErr)
			}
			if err != nil {
				// The give-up contract: why it stopped, and the last response.
				var gu *retry.GiveUpError
				var se *httpx.StatusError
				if resp != nil || !errors.As(err, &gu) || !errors.Is(err, tt.wantGiveUp) || gu.Attempts != tt.wantAttempts ||
					!errors.As(err, &se) || se.Response == nil {
					t.Fatalf("RoundTrip = %v, %v; want no response and a GiveUpError (%v, %d attempts) carrying the last response", resp, err, tt.wantGiveUp, tt.wantAttempts)
				}
				resp = se.Response
			}
			body := readClose(t, resp)
			if got := resp.StatusCode; got != tt.wantStatus {
				t.Errorf("status = %d, want %d", got, tt.wantStatus)
			}
			if want := tt.replies[tt.wantAttempts-1].body; body != want {
				t.Errorf("body = %q, want %q (the last response, untouched)", body, want)
			}
			if got, want := srv.attempts(), wantAttempts(tt.wantAttempts); !slices.Equal(got, want) {
				t.Errorf("server saw attempts %q, want %q", got, want)
			}
			if got := rec.delays; !slices.Equal(got, tt.wantDelays) {
				t.Errorf("delays = %v, want %v", got, tt.wantDelays)
			}
			if got := resp.Header.Get(wire.HeaderRetriesExhausted) == "1"; got != tt.wantExhausted {
				t.Errorf("Retries-Exhausted header = %v, want %v", got, tt.wantExhausted)
			}
			switch {
			case tt.wantGiveUp == nil && len(rec.giveUps) != 0:
				t.Errorf("gave up with %v, want success", rec.giveUps)
			case tt.wantGiveUp != nil && (len(rec.giveUps) != 1 || !errors.Is(rec.giveUps[0], tt.wantGiveUp)):
				t.Errorf("gave up with %v, want [%v]", rec.giveUps, tt.wantGiveUp)
			}
			// The server's waits were really waited.
			reqs := srv.seen()
			for i, d := range tt.wantDelays {
				if gap := reqs[i+1].at.Sub(reqs[i].at); gap < d {
					t.Errorf("retry %d came %v after the attempt before it, want ≥ %v", i+1, gap, d)
				}
			}
			if closed, _ := base.closed(); closed != tt.wantAttempts {
				t.Errorf("%d response bodies closed, want %d", closed, tt.wantAttempts)
			}
		})
	}
}

func TestTransportErrors(t *testing.T) {
	hijack := reply{hijack: true}
	tests := []struct {
		name         string
		replies      []reply // nil: no server listening
		wantAttempts int
		wantErr      error // nil: a 200 response
	}{
		{"connection closed twice, then ok", []reply{hijack, hijack, {status: 200}}, 3, nil},
		{"connection always closed", []reply{hijack}, 3, retry.ErrAttemptsExhausted},
		{"connection refused", nil, 3, retry.ErrAttemptsExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, base, rec := setup(t, fast())
			var url string
			var srv *server
			if tt.replies != nil {
				srv = newServer(t, tt.replies...)
				url = srv.URL
			} else {
				dead := newServer(t, reply{status: 200})
				url = dead.URL
				dead.Close()
			}
			resp, err := tr.RoundTrip(get(t, context.Background(), url))
			if got := int(base.trips.Load()); got != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", got, tt.wantAttempts)
			}
			if srv != nil {
				if got, want := srv.attempts(), wantAttempts(tt.wantAttempts); !slices.Equal(got, want) {
					t.Errorf("server saw attempts %q, want %q", got, want)
				}
			}
			for i, c := range rec.classes[:len(rec.classes)-1] {
				if c != retry.Transient {
					t.Errorf("attempt %d: class %v, want transient", i+1, c)
				}
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("RoundTrip: %v", err)
				}
				readClose(t, resp)
				return
			}
			if resp != nil {
				resp.Body.Close()
				t.Fatalf("got a response, want an error")
			}
			var gu *retry.GiveUpError
			if !errors.As(err, &gu) || !errors.Is(err, tt.wantErr) || gu.Attempts != tt.wantAttempts {
				t.Fatalf("err = %v, want a *retry.GiveUpError for %v after %d attempts", err, tt.wantErr, tt.wantAttempts)
			}
		})
	}
}

func TestTransportAttemptTimeout(t *testing.T) {
	p := fast()
	// Long enough for each attempt to reach the server on a busy host: the
	// test counts the attempts the server saw.
	p.AttemptTimeout = hostspeed.Scale(50 * time.Millisecond)
	tr, _, rec := setup(t, p)
	srv := newServer(t, reply{hang: true})

	start := time.Now()
	resp, err := tr.RoundTrip(get(t, context.Background(), srv.URL))
	if resp != nil {
		resp.Body.Close()
		t.Fatal("got a response from a server that never answers")
	}
	if took := time.Since(start); took > 3*p.AttemptTimeout+hostspeed.Scale(850*time.Millisecond) {
		t.Errorf("took %v, want about 3 × %v", took, p.AttemptTimeout)
	}
	var gu *retry.GiveUpError
	if !errors.As(err, &gu) || gu.Attempts != 3 || !errors.Is(err, retry.ErrAttemptsExhausted) ||
		!errors.Is(err, httpx.ErrAttemptTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a *retry.GiveUpError after 3 attempts, attempts exhausted, wrapping an attempt timeout", err)
	}
	if want := []retry.Class{retry.Timeout, retry.Timeout, retry.Timeout}; !slices.Equal(rec.classes, want) {
		t.Errorf("classes = %v, want %v", rec.classes, want)
	}
	if got, want := srv.attempts(), wantAttempts(3); !slices.Equal(got, want) {
		t.Errorf("server saw attempts %q, want %q", got, want)
	}
	for i, r := range srv.seen() {
		if d, ok := wire.ParseTimeout(r.timeout); !ok || d <= 0 || d > p.AttemptTimeout {
			t.Errorf("attempt %d: %s = %q, want in (0, %v]", i+1, wire.HeaderTimeout, r.timeout, p.AttemptTimeout)
		}
	}
	if !eventually(func() bool { return srv.canceled.Load() == 3 }) {
		t.Errorf("%d hanging handlers saw their request cancelled, want 3", srv.canceled.Load())
	}
}

// A successful attempt's body stays readable after RoundTrip returns,
// although its context is bounded by the attempt timeout, which also bounds
// reading the body.
func TestTransportAttemptTimeoutBody(t *testing.T) {
	tests := []struct {
		name    string
		delay   time.Duration // between the header and the body
		wantErr bool
	}{
		{"body within the timeout", 30 * time.Millisecond, false},
		{"body after the timeout", hostspeed.Scale(500 * time.Millisecond), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fast()
			p.AttemptTimeout = hostspeed.Scale(200 * time.Millisecond)
			tr, base, _ := setup(t, p)
			srv := newServer(t, reply{fn: func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
				select {
				case <-time.After(tt.delay):
					io.WriteString(w, "hello")
				case <-r.Context().Done():
				case <-release:
				}
			}})
			resp, err := tr.RoundTrip(get(t, context.Background(), srv.URL))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("reading the body: %q, %v; want error = %v", b, err, tt.wantErr)
			}
			if !tt.wantErr && string(b) != "hello" {
				t.Errorf("body = %q, want hello", b)
			}
			if closed, _ := base.closed(); closed != 1 {
				t.Errorf("%d bodies closed, want 1", closed)
			}
		})
	}
}

func TestTransportRequestBody(t *testing.T) {
	errRewind := errors.New("cannot rewind")
	tests := []struct {
		name         string
		getBody      func(*http.Request) func() (io.ReadCloser, error) // nil: keep http.NewRequest's
		replies      []reply
		wantAttempts int
		wantStatus   int   // 0: want an error
		wantErr      error // with wantStatus 0
	}{
		{name: "replayed with GetBody", replies: []reply{{status: 503}, {status: 503}, {status: 200}},
			wantAttempts: 3, wantStatus: 200},
		{name: "no GetBody: one attempt", replies: []reply{{status: 503}, {status: 200}},
			getBody:      func(*http.Request) func() (io.ReadCloser, error) { return nil },
			wantAttempts: 1, wantErr: retry.ErrNotRetryable},
		{name: "no GetBody, connection closed: one attempt", replies: []reply{{hijack: true}, {status: 200}},
			getBody:      func(*http.Request) func() (io.ReadCloser, error) { return nil },
			wantAttempts: 1, wantErr: retry.ErrNotRetryable},
		{name: "GetBody fails", replies: []reply{{status: 503}, {status: 200}},
			getBody: func(*http.Request) func() (io.ReadCloser, error) {
				return func() (io.ReadCloser, error) { return nil, errRewind }
			},
			wantAttempts: 1, wantErr: errRewind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _, _ := setup(t, fast())
			srv := newServer(t, tt.replies...)
			req := post(t, context.Background(), srv.URL, "payload")
			body := &trackedReader{Reader: strings.NewReader("payload")}
			req.Body = body
			if tt.getBody != nil {
				req.GetBody = tt.getBody(req)
			}
			resp, err := tr.RoundTrip(req)
			if got := len(srv.seen()); got != tt.wantAttempts {
				t.Errorf("server saw %d attempts, want %d", got, tt.wantAttempts)
			}
			for i, r := range srv.seen() {
				if r.body != "payload" && !tt.replies[min(i, len(tt.replies)-1)].hijack {
					t.Errorf("attempt %d: server read body %q, want payload", i+1, r.body)
				}
			}
			if !eventually(body.closed.Load) {
				t.Error("the caller's request body was not closed")
			}
			if tt.wantStatus == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got %s, want an error", resp.Status)
				}
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			readClose(t, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
		})
	}
}

func TestTransportDoesNotMutateRequest(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
	}{
		{"with headers", http.Header{"X-Trace": {"abc"}, wire.HeaderAttempt: {"7"}}},
		{"nil header", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _, _ := setup(t, fast())
			srv := newServer(t, reply{status: 503}, reply{status: 200})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req := post(t, ctx, srv.URL+"/path?q=1", "payload")
			req.Header = tt.header.Clone()
			wantHeader := tt.header.Clone()
			wantURL, wantBody, wantGetBody := req.URL.String(), req.Body, reflect.ValueOf(req.GetBody).Pointer()

			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			readClose(t, resp)

			if !reflect.DeepEqual(req.Header, wantHeader) {
				t.Errorf("request header = %v, want %v", req.Header, wantHeader)
			}
			if req.URL.String() != wantURL || req.Body != wantBody || reflect.ValueOf(req.GetBody).Pointer() != wantGetBody || req.Context() != ctx {
				t.Error("request URL, body, GetBody or context changed")
			}
			if got, want := srv.attempts(), wantAttempts(2); !slices.Equal(got, want) {
				t.Errorf("server saw attempts %q, want %q (the transport's, not the caller's)", got, want)
			}
		})
	}
}

func TestTransportDrainsDiscardedBodies(t *testing.T) {
	small := strings.Repeat("x", 1<<10)
	big := strings.Repeat("x", 1<<20)
	tests := []struct {
		name          string
		replies       []reply
		timeout       time.Duration // AttemptTimeout
		wantDrained   int           // discarded bodies read to the end
		wantDials     int
		wantReadFinal string
	}{
		{"small bodies", []reply{{status: 503, body: small}, {status: 500, body: small}, {status: 200, body: "ok"}},
			0, 2, 1, "ok"},
		{"small bodies, attempt timeout", []reply{{status: 503, body: small}, {status: 500, body: small}, {status: 200, body: "ok"}},
			time.Second, 2, 1, "ok"},
		{"a body too long to drain", []reply{{status: 503, body: big}, {status: 200, body: "ok"}},
			0, 0, 2, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fast()
			p.AttemptTimeout = tt.timeout
			tr, base, _ := setup(t, p)
			srv := newServer(t, tt.replies...)
			resp, err := tr.RoundTrip(get(t, context.Background(), srv.URL))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			discarded := len(tt.replies) - 1
			if closed, drained := base.closed(); closed != discarded || drained != tt.wantDrained {
				t.Errorf("before the caller closes: %d closed, %d drained; want %d closed, %d drained",
					closed, drained, discarded, tt.wantDrained)
			}
			if got := readClose(t, resp); got != tt.wantReadFinal {
				t.Errorf("body = %q, want %q", got, tt.wantReadFinal)
			}
			if closed, _ := base.closed(); closed != len(tt.replies) {
				t.Errorf("%d bodies closed, want %d", closed, len(tt.replies))
			}
			if got := int(base.dials.Load()); got != tt.wantDials {
				t.Errorf("%d connections dialled, want %d", got, tt.wantDials)
			}
		})
	}
}

func TestTransportDeadline(t *testing.T) {
	tests := []struct {
		name           string
		ctxTimeout     time.Duration // 0: no deadline
		attemptTimeout time.Duration
		propagate      bool
		wantMax        time.Duration // 0: want no header
	}{
		{"caller deadline", 2 * time.Second, 0, true, 2 * time.Second},
		{"no deadline", 0, 0, true, 0},
		{"propagation off", 2 * time.Second, 0, false, 0},
		{"attempt timeout sooner", 2 * time.Second, 300 * time.Millisecond, true, 300 * time.Millisecond},
		{"attempt timeout only", 0, 300 * time.Millisecond, true, 300 * time.Millisecond},
		{"caller deadline sooner", 300 * time.Millisecond, 2 * time.Second, true, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fast()
			p.AttemptTimeout = tt.attemptTimeout
			tr, _, _ := setup(t, p)
			tr.PropagateDeadline = tt.propagate
			srv := newServer(t, reply{status: 200})
			ctx := context.Background()
			if tt.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxTimeout)
				defer cancel()
			}
			// The remaining time can only shrink from here; rounding up adds
			// at most one unit (a microsecond at these magnitudes).
			limit := tt.wantMax + time.Microsecond
			if dl, ok := ctx.Deadline(); ok {
				limit = min(limit, time.Until(dl)+time.Microsecond)
			}
			resp, err := tr.RoundTrip(get(t, ctx, srv.URL))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			readClose(t, resp)
			got := srv.seen()[0].timeout
			if tt.wantMax == 0 {
				if got != "" {
					t.Errorf("%s = %q, want none", wire.HeaderTimeout, got)
				}
				return
			}
			d, ok := wire.ParseTimeout(got)
			if !ok || d <= 0 || d > limit {
				t.Errorf("%s = %q (%v), want in (0, %v]", wire.HeaderTimeout, got, d, limit)
			}
		})
	}
}

func TestTransportExpiredContext(t *testing.T) {
	expired, cancel1 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel1()
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	tests := []struct {
		name    string
		ctx     context.Context
		wantErr error
	}{
		{"deadline passed", expired, context.DeadlineExceeded},
		{"cancelled", canceled, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, base, rec := setup(t, fast())
			srv := newServer(t, reply{status: 200})
			req := post(t, tt.ctx, srv.URL, "payload")
			body := &trackedReader{Reader: strings.NewReader("payload")}
			req.Body = body
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
				t.Fatal("got a response, want a local failure")
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if n := base.trips.Load(); n != 0 {
				t.Errorf("%d round trips, want none", n)
			}
			if n := len(srv.seen()); n != 0 {
				t.Errorf("server saw %d requests, want none", n)
			}
			if len(rec.classes) != 0 || len(rec.giveUps) != 0 {
				t.Errorf("retrier saw attempts %v, give-ups %v; want none", rec.classes, rec.giveUps)
			}
			if !body.closed.Load() {
				t.Error("request body not closed")
			}
		})
	}
}

func TestTransportCancelDuringWait(t *testing.T) {
	p := fast()
	p.Backoff.Base = 10 * time.Second
	p.Backoff.Cap = 10 * time.Second
	waiting := make(chan struct{})
	tr, base, _ := setup(t, p, retry.WithHooks(retry.Hooks{OnRetry: func(int, time.Duration) { close(waiting) }}))
	srv := newServer(t, reply{status: 503, body: "busy"}, reply{status: 200})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-waiting
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	resp, err := tr.RoundTrip(get(t, ctx, srv.URL))
	took := time.Since(start)
	<-done
	if resp != nil {
		resp.Body.Close()
		t.Fatal("got a response, want an error")
	}
	if took > hostspeed.Scale(time.Second) {
		t.Errorf("returned after %v, want promptly after the cancel", took)
	}
	var gu *retry.GiveUpError
	if !errors.As(err, &gu) || gu.Attempts != 1 || !errors.Is(err, retry.ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a *retry.GiveUpError after 1 attempt matching retry.ErrCanceled and context.Canceled", err)
	}
	var se *httpx.StatusError
	if !errors.As(err, &se) || se.StatusCode != 503 {
		t.Errorf("err = %v, want it to keep the last response's status 503", err)
	}
	if n := len(srv.seen()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
	if closed, drained := base.closed(); closed != 1 || drained != 1 {
		t.Errorf("%d bodies closed, %d drained; want 1, 1", closed, drained)
	}
}

func TestClient(t *testing.T) {
	tr, base, _ := setup(t, fast())
	srv := newServer(t, reply{status: 503}, reply{status: 200, body: "ok"})
	c := httpx.Client(base, tr.Retrier)
	defer c.CloseIdleConnections()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := readClose(t, resp); resp.StatusCode != 200 || got != "ok" {
		t.Errorf("got %d %q, want 200 ok", resp.StatusCode, got)
	}
	if got, want := srv.attempts(), wantAttempts(2); !slices.Equal(got, want) {
		t.Errorf("server saw attempts %q, want %q", got, want)
	}
}

// The zero Transport sends once through http.DefaultTransport, a first
// try (no Stormguard-Attempt).
func TestZeroTransport(t *testing.T) {
	leakcheck.Check(t)
	srv := newServer(t, reply{status: 503}, reply{status: 200})
	var tr httpx.Transport
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := tr.RoundTrip(get(t, context.Background(), srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	readClose(t, resp)
	if resp.StatusCode != 503 || resp.Header.Get(wire.HeaderRetriesExhausted) != "" {
		t.Errorf("got %d, exhausted %q; want 503 unmarked", resp.StatusCode, resp.Header.Get(wire.HeaderRetriesExhausted))
	}
	if got, want := srv.attempts(), wantAttempts(1); !slices.Equal(got, want) {
		t.Errorf("server saw attempts %q, want %q", got, want)
	}
}
