package rehearse

import (
	"fmt"
	"testing"
	"time"
)

// nginxStorm is the nginx tests' scenario: 300 requests/s through nginx
// (at most 100 requests at once, 503 past that or past 2,000/s) to a slow
// upstream of 8 workers × 20 ms = 400/s; the network to nginx is held for
// 2 s. Clients time out after 200 ms.
const nginxStorm = `
name: nginx-storm
duration: %s
seed: 1
clients:
  - name: users
    target: nginx
    arrivals: {kind: poisson, rate: 300}
    timeout: 200ms
    policy: {preset: naive, max_attempts: 3}
services:
  - name: nginx
    target: http://%s/
triggers:
  - {kind: outage, target: nginx, at: 3s, duration: 2s, mode: hold}
runs:
  - name: naive
  - name: stormguard
    set: {clients.users.policy: stormguard}
`

// Against Debian's nginx with limit_conn and limit_req in front of a slow
// upstream: naive clients keep a storm going after the hold ends (the
// upstream works on requests nobody waits for), stormguard's policy lets
// it come back.
func TestNginxStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("a rehearsal of real time against real servers: not in -short")
	}
	up := startSlowProc(t, 8, 20*time.Millisecond)
	addr := startNginx(t, up, 100, 2000, 500)
	ps := rehearseFile(t, fmt.Sprintf(nginxStorm, "16s", addr), t.TempDir(), Limits{})
	naive := rehearseConclusive(t, ps[0], nil)
	t.Log(summary(naive))
	up2 := startSlowProc(t, 8, 20*time.Millisecond)
	addr2 := startNginx(t, up2, 100, 2000, 500)
	ps2 := rehearseFile(t, fmt.Sprintf(nginxStorm, "16s", addr2), t.TempDir(), Limits{})
	sg := rehearseConclusive(t, ps2[1], nil)
	t.Log(summary(sg))
	if v := naive.Result.Verdict; v != "metastable" {
		t.Errorf("naive: %s, want metastable: %s", v, naive.Result.Why)
	}
	if a := after(naive.Result, 5); a > 0.3 {
		t.Errorf("naive: goodput after the hold %.0f%% of demand, want the storm to outlive it (< 30%%)", 100*a)
	}
	if v := sg.Result.Verdict; v != "recovered" && v != "stable" {
		t.Errorf("stormguard: %s, want recovered: %s", v, sg.Result.Why)
	}
	if a := after(sg.Result, 11); a < 0.9 {
		t.Errorf("stormguard: goodput from 11 s on %.0f%% of demand, want ≥ 90%%", 100*a)
	}
}

// awsBrownout: 100 requests/s through nginx to a fast upstream (8 × 2 ms);
// the error front fails 30 % of the answers from 2 s to 18 s.
const awsBrownout = `
name: aws-brownout
duration: 20s
seed: 1
clients:
  - name: app
    target: nginx
    arrivals: {kind: poisson, rate: 100}
    timeout: 2s
    policy: aws-standard
services:
  - name: nginx
    target: http://%s/
triggers:
  - {kind: errors, target: nginx, at: 2s, duration: 16s, factor: 0.3}
runs:
  - name: aws-standard
  - name: aws-2026
    set: {clients.app.policy: aws-2026}
`

// The AWS SDKs' new retry behaviour against nginx during a brownout: the
// aws-2026 clients' quota drains (a retry costs 14 tokens), so they fail
// more requests, faster, than aws-standard's (5 tokens, 1 s backoff): the
// new shape, met in a test. The simulator's run of the same scenario
// (examples/aws-2026.yaml scaled to 20 s) gave 183 against 33 failures,
// at 16 ms against 169 ms for a success.
func TestNginxAWSNewShape(t *testing.T) {
	if testing.Short() {
		t.Skip("a rehearsal of real time against real servers: not in -short")
	}
	up := startSlowProc(t, 8, 2*time.Millisecond)
	addr := startNginx(t, up, 1000, 5000, 1000)
	ps := rehearseFile(t, fmt.Sprintf(awsBrownout, addr), t.TempDir(), Limits{})
	std := rehearseConclusive(t, ps[0], nil)
	t.Log(summary(std))
	n26 := rehearseConclusive(t, ps[1], nil)
	t.Log(summary(n26))
	s, n := std.Result.Clients[0].Total, n26.Result.Clients[0].Total
	t.Logf("failed: aws-standard %d, aws-2026 %d; mean latency of a success %.0f ms and %.0f ms, of a failure %.0f ms and %.0f ms; retries %d and %d",
		s.Failed, n.Failed, 1000*s.SuccessLatencyS, 1000*n.SuccessLatencyS, 1000*s.FailureLatencyS, 1000*n.FailureLatencyS, s.Retries, n.Retries)
	if n.Failed < 2*s.Failed || n.Failed < 50 {
		t.Errorf("aws-2026 failed %d requests, aws-standard %d: want at least twice as many (and 50) with aws-2026", n.Failed, s.Failed)
	}
	if 3*n.SuccessLatencyS > s.SuccessLatencyS {
		t.Errorf("a success took %.0f ms on average with aws-2026, %.0f ms with aws-standard: want less than a third", 1000*n.SuccessLatencyS, 1000*s.SuccessLatencyS)
	}
	if up := std.Paths[0]; up.Injected == 0 {
		t.Errorf("the error front failed nothing: %+v", up)
	}
}
