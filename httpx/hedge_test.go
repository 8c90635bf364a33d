package httpx_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/retry"
)

// hedged returns a policy that hedges: max attempts n, delay d.
func hedged(n int, d time.Duration) retry.Policy {
	p := fast()
	p.Hedge = &retry.HedgePolicy{MaxAttempts: n, Delay: d}
	return p
}

func TestTransportHedge(t *testing.T) {
	ok := reply{status: 200, body: "ok"}
	hang := reply{hang: true}
	tests := []struct {
		name         string
		replies      []reply
		policy       retry.Policy
		opts         []retry.Option
		method       string
		header       map[string]string
		wantStatus   int   // of the response; 0: an error
		wantErr      error // with wantStatus 0
		wantAttempts []string
		wantCanceled int32 // attempts the server saw cancelled (losers)
	}{
		{name: "slow first, hedge wins", replies: []reply{hang, ok}, policy: hedged(2, 20*time.Millisecond),
			wantStatus: 200, wantAttempts: []string{"", "2"}, wantCanceled: 1},
		{name: "non-fatal failure sends the next hedge at once", replies: []reply{{status: 503}, ok}, policy: hedged(3, time.Hour),
			wantStatus: 200, wantAttempts: []string{"", "2"}},
		{name: "fatal answer stops", replies: []reply{{status: 404, body: "nope"}, ok}, policy: hedged(3, time.Hour),
			wantStatus: 404, wantAttempts: []string{""}},
		{name: "all fail", replies: []reply{{status: 503}}, policy: hedged(3, 0),
			wantErr: retry.ErrAttemptsExhausted, wantAttempts: []string{"", "2", "3"}},
		{name: "server said stop", replies: []reply{{status: 503, header: map[string]string{"Stormguard-Overload": "service"}}, ok}, policy: hedged(3, time.Hour),
			wantErr: retry.ErrServerSaidStop, wantAttempts: []string{""}},
		{name: "budget empty: no hedge", replies: []reply{{status: 503}, ok}, policy: hedged(3, time.Hour),
			opts:    []retry.Option{retry.WithBudget(denyBudget{})},
			wantErr: retry.ErrBudgetExhausted, wantAttempts: []string{""}},
		{name: "POST is retried, not hedged", replies: []reply{hang, ok}, policy: func() retry.Policy {
			p := hedged(2, 10*time.Millisecond)
			p.AttemptTimeout = hostspeed.Scale(100 * time.Millisecond) // time for the server to see the first
			return p
		}(), method: http.MethodPost,
			wantStatus: 200, wantAttempts: []string{"", "2"}, wantCanceled: 1},
		{name: "POST with Idempotency-Key is hedged", replies: []reply{hang, ok}, policy: hedged(2, 20*time.Millisecond),
			method: http.MethodPost, header: map[string]string{"Idempotency-Key": "k1"},
			wantStatus: 200, wantAttempts: []string{"", "2"}, wantCanceled: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, base, _ := setup(t, tt.policy, tt.opts...)
			srv := newServer(t, tt.replies...)
			req := get(t, context.Background(), srv.URL)
			if tt.method == http.MethodPost {
				req = post(t, context.Background(), srv.URL, "payload")
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := tr.RoundTrip(req)
			if tt.wantStatus == 0 {
				var gu *retry.GiveUpError
				if err == nil || !errors.Is(err, tt.wantErr) || !errors.As(err, &gu) || gu.Attempts != len(tt.wantAttempts) {
					t.Fatalf("RoundTrip = %v, %v; want a GiveUpError: %v after %d attempts", resp, err, tt.wantErr, len(tt.wantAttempts))
				}
				var se *httpx.StatusError
				if !errors.As(err, &se) || se.Response == nil || se.StatusCode != 503 {
					t.Errorf("the last response is not reachable: %v", err)
				}
			} else {
				if err != nil {
					t.Fatalf("RoundTrip: %v", err)
				}
				readClose(t, resp)
				if resp.StatusCode != tt.wantStatus {
					t.Errorf("status %d, want %d", resp.StatusCode, tt.wantStatus)
				}
			}
			got := srv.attempts()
			slices.Sort(got)
			if !slices.Equal(got, tt.wantAttempts) {
				t.Errorf("server saw attempts %q, want %q", got, tt.wantAttempts)
			}
			if !eventually(func() bool { return srv.canceled.Load() == tt.wantCanceled }) {
				t.Errorf("server saw %d attempts cancelled, want %d", srv.canceled.Load(), tt.wantCanceled)
			}
			// Every response the losers got is closed, too.
			if !eventually(func() bool { c, _ := base.closed(); return int(c) == int(base.trips.Load())-int(tt.wantCanceled) }) {
				c, _ := base.closed()
				t.Errorf("%d response bodies closed of %d round trips (%d cancelled)", c, base.trips.Load(), tt.wantCanceled)
			}
		})
	}
}

// A hedge is charged to the retry budget: with a token bucket, the losing
// hedge keeps its charge, and a winning hedge is refunded.
func TestTransportHedgeBudget(t *testing.T) {
	bk := budget.NewTokenBucket(100, 10, 10, 10, 1, true)
	tr, _, rec := setup(t, hedged(3, 20*time.Millisecond), retry.WithBudget(bk))
	srv := newServer(t, reply{hang: true}, reply{hang: true}, reply{status: 200})
	start := time.Now()
	resp, err := tr.RoundTrip(get(t, context.Background(), srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	readClose(t, resp)
	if el := time.Since(start); el > hostspeed.Scale(2*time.Second) {
		t.Errorf("took %v", el)
	}
	// Hedges 2 and 3 each cost 10; 3 won (refunded), 2 lost (kept).
	if got := bk.Level(); got != 90 {
		t.Errorf("budget level %v, want 90", got)
	}
	if len(rec.delays) != 2 {
		t.Errorf("OnRetry saw %d hedges, want 2", len(rec.delays))
	}
}

// The caller's cancellation ends a hedged call at once, with every attempt.
// The hedges go out 10 ms apart; the deadline leaves them 100 ms, scaled
// with the host's slowness, to be sent (a busy host fires timers late).
func TestTransportHedgeCallerCancels(t *testing.T) {
	tr, _, _ := setup(t, hedged(3, 10*time.Millisecond))
	srv := newServer(t, reply{hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), hostspeed.Scale(100*time.Millisecond))
	defer cancel()
	_, err := tr.RoundTrip(get(t, ctx, srv.URL))
	if !errors.Is(err, retry.ErrCanceled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrCanceled wrapping the deadline", err)
	}
	if !eventually(func() bool { return srv.canceled.Load() == 3 }) {
		t.Errorf("server saw %d of 3 attempts cancelled", srv.canceled.Load())
	}
}
