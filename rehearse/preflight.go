package rehearse

import (
	"context"
	"fmt"
	"time"
)

// Before a run, a preflight checks that every service the clients call
// answers: one request at a time (no retries, the clients' longest
// timeout), every PreflightEvery, until PreflightOK succeed in a row, for
// at most PreflightMax. A service still busy with an earlier run's storm
// (runs follow one another) is given that time to drain; one that never
// answers is rehearsed anyway, and the run's notes say so.
const (
	PreflightEvery = 250 * time.Millisecond
	PreflightOK    = 3
	PreflightMax   = 30 * time.Second
)

// UserAgent is the User-Agent of the requests a rehearsal sends in the
// given role ("client NAME" for a client's requests, "preflight", "probe"
// for --predict's calm phase), so that the service's logs can tell them
// apart from real traffic: "stormguard-rehearse (client checkout)". A
// request template that sets its own User-Agent keeps it. gRPC adds its own
// version after it.
func UserAgent(role string) string { return "stormguard-rehearse (" + role + ")" }

// PreflightWorstCase is the most requests a preflight sends to one
// service.
const PreflightWorstCase = int64(PreflightMax / PreflightEvery)

// preflight checks the called endpoints and returns a note for each.
func preflight(ctx context.Context, p Plan) []string {
	var notes []string
	for _, i := range calledEndpoints(p) {
		notes = append(notes, preflightOne(ctx, p, i))
	}
	return notes
}

func preflightOne(ctx context.Context, p Plan, i int) string {
	e := p.Endpoints[i]
	g, err := NewGuard(PreflightWorstCase, p.Limits.AllowRemote)
	if err != nil {
		return fmt.Sprintf("%s: preflight: %v", e.Name, err)
	}
	timeout := time.Duration(0)
	for _, c := range p.Clients {
		if c.Endpoint == i {
			timeout = max(timeout, c.Timeout)
		}
	}
	call, closeCall, err := prober(e, g, timeout, UserAgent("preflight"))
	if err != nil {
		return fmt.Sprintf("%s: preflight: %v", e.Name, err)
	}
	defer closeCall()
	began := time.Now()
	ok := 0
	var last error
	tick := time.NewTicker(PreflightEvery)
	defer tick.Stop()
	for time.Since(began) < PreflightMax && ctx.Err() == nil {
		if !g.Take() {
			break
		}
		if last = call(ctx); last == nil {
			ok++
			if ok == PreflightOK {
				return fmt.Sprintf("%s answered %d requests in a row within %v, %.1f s after the preflight began", e.Name, ok, timeout, time.Since(began).Seconds())
			}
		} else {
			ok = 0
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	return fmt.Sprintf("%s did NOT answer %d requests in a row within %v in %v before the run (last: %v): it was unhealthy before anything happened", e.Name, PreflightOK, timeout, PreflightMax, last)
}
