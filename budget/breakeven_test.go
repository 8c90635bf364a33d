package budget

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// REFERENCES.md §1.3: with the AWS SDK retry quota of November 2026 (the
// aws-2026 preset: 500 tokens, a retry after a transient error costs 14, a
// first-try success earns 1, a retry that succeeds is refunded) and the
// default 3 attempts, the bucket starts draining once about 22 % of requests
// fail with sustained transient errors: break-even at p ≈ 0.215, where
// 1 − p = 14(p² + p³).
//
// Where the formula comes from, for one request whose attempts fail
// independently with probability p:
//
//	attempts               probability   change of the level
//	success                1 − p         +1   (first-try reward)
//	failure, success       p(1 − p)       0   (−14, refunded)
//	failure ×2, success    p²(1 − p)     −14  (the first retry's cost is kept)
//	failure ×3             p³            −28  (both retries' costs are kept)
//
// The expected change is 1 − p − 14p² − 14p³, zero where 1 − p = 14(p² + p³).

// breakEvenDrift is the expected change of the level per request.
func breakEvenDrift(p float64) float64 { return 1 - p - 14*(p*p+p*p*p) }

// awsRequest plays one request against b with the real protocol: at most 3
// attempts, each failing (with a transient error) when fail returns true.
func awsRequest(b Budget, now time.Time, fail func() bool) {
	b.BeginAt(now)
	var t Ticket // the first attempt's
	for attempt := 1; ; attempt++ {
		if !fail() {
			b.EndAt(now, Success, t)
			return
		}
		b.EndAt(now, Failure, t)
		if attempt == 3 {
			return
		}
		var ok bool
		if t, ok = b.RetryAt(now, Transient); !ok {
			return
		}
	}
}

func TestAWS2026BreakEven(t *testing.T) {
	t.Run("analytic root", func(t *testing.T) {
		// Bisection on the drift, which falls from +1 at p = 0 to −28 at p = 1.
		lo, hi := 0.0, 1.0
		for range 60 {
			mid := (lo + hi) / 2
			if breakEvenDrift(mid) > 0 {
				lo = mid
			} else {
				hi = mid
			}
		}
		root := (lo + hi) / 2
		t.Logf("break-even p = %.5f", root)
		if math.Abs(root-0.215) > 0.002 {
			t.Errorf("break-even p = %.5f, want 0.215 ± 0.002", root)
		}
	})

	t.Run("the bucket's accounting gives the formula", func(t *testing.T) {
		// Play each row of the table above on a half-full bucket and weigh
		// the change of its level by the row's probability.
		rows := []struct {
			fails int // failed attempts before the success (3: no success)
			prob  func(p float64) float64
			want  float64
		}{
			{0, func(p float64) float64 { return 1 - p }, 1},
			{1, func(p float64) float64 { return p * (1 - p) }, 0},
			{2, func(p float64) float64 { return p * p * (1 - p) }, -14},
			{3, func(p float64) float64 { return p * p * p }, -28},
		}
		change := make([]float64, len(rows))
		for i, row := range rows {
			b := mustPreset(t, "aws-2026").(*TokenBucket)
			b.level.Store(250 * milliPerToken)
			n := 0
			awsRequest(b, t0, func() bool { n++; return n <= row.fails })
			change[i] = b.Level() - 250
			if change[i] != row.want {
				t.Errorf("%d failures: level changed by %g, want %g", row.fails, change[i], row.want)
			}
		}
		for _, p := range []float64{0, 0.1, 0.19, 0.215, 0.24, 0.5, 1} {
			var got float64
			for i, row := range rows {
				got += row.prob(p) * change[i]
			}
			if want := breakEvenDrift(p); math.Abs(got-want) > 1e-12 {
				t.Errorf("p = %g: expected change %g per request, formula says %g", p, got, want)
			}
		}
	})

	t.Run("simulation", func(t *testing.T) {
		// Each run starts from a half-full bucket (250 tokens) and plays
		// 100,000 requests. The expected change per request is +0.21 at
		// p = 0.19 and −0.24 at p = 0.24, with a standard deviation of about
		// 3.5 and 4.5 tokens: after 5,000 requests the drift (≈ ±1,000 tokens)
		// dwarfs the noise (≈ ±300), so the bucket has hit the top or the
		// bottom. From then on the level hovers near the bound it hit, within
		// a few dozen tokens (about σ² / 2|drift| ≈ 30 and 40 on average), so
		// the mean level over the last 50,000 requests must be above 400 or
		// below 100: margins of about 70 and 60 tokens over the expected
		// means, where that mean's own noise is a fraction of a token.
		//
		// Closer to the root (p = 0.205 and 0.225, drift ±0.09) the drift
		// after 5,000 requests (≈ ±450) is within 2σ of the noise and the
		// hovering is wider (≈ 90 tokens), so the test only asks which half
		// of the bucket the mean level stays in (observed: 390–440 and
		// 65–140 for the seeds below).
		const requests = 100_000
		tests := []struct {
			p        float64
			trend    int     // +1: the level after 5,000 requests is above the start; −1: below; 0: not checked
			min, max float64 // bounds on the mean level over the last half
		}{
			{p: 0.19, trend: +1, min: 400, max: 500},
			{p: 0.205, trend: 0, min: 250, max: 500},
			{p: 0.225, trend: 0, min: 0, max: 250},
			{p: 0.24, trend: -1, min: 0, max: 100},
		}
		for _, tt := range tests {
			for seed := uint64(1); seed <= 3; seed++ {
				t.Run(fmt.Sprintf("p=%g/seed=%d", tt.p, seed), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 0x5ea1))
					fail := func() bool { return rng.Float64() < tt.p }
					b := mustPreset(t, "aws-2026").(*TokenBucket)
					b.level.Store(250 * milliPerToken)
					now := t0
					var at5000, sum float64
					for i := range requests {
						awsRequest(b, now, fail)
						now = now.Add(time.Millisecond)
						if i+1 == 5_000 {
							at5000 = b.Level()
						}
						if i >= requests/2 {
							sum += b.Level()
						}
					}
					mean := sum / (requests / 2)
					t.Logf("drift %+.3f/request; level after 5,000 requests %g; mean over the last 50,000 %.1f", breakEvenDrift(tt.p), at5000, mean)
					if (tt.trend > 0 && at5000 <= 250) || (tt.trend < 0 && at5000 >= 250) {
						t.Errorf("level after 5,000 requests = %g from 250, want it to have gone %s", at5000, map[bool]string{true: "up", false: "down"}[tt.trend > 0])
					}
					if mean < tt.min || mean > tt.max {
						t.Errorf("mean level over the last half = %.1f, want in [%g, %g]", mean, tt.min, tt.max)
					}
				})
			}
		}
	})
}
