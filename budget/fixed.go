package budget

import "math"

// The budgets keep fractional amounts in integers, so that they can live in
// one atomic word and add up exactly:
//
//	tokens (TokenBucket, TokenRatio)        milli-tokens: three decimal places, further digits dropped
//	ratios and floors (Window, Concurrency)  millionths: six decimal places, rounded
const (
	milliPerToken = 1000
	microPerUnit  = 1_000_000
)

// milli converts tokens to milli-tokens, keeping three decimal places and
// dropping the rest (gRFC A6 keeps three decimal places of the token ratio).
// The small bias absorbs binary rounding, so that 1.005 gives 1005, not 1004.
func milli(tokens float64) int64 {
	return int64(math.Floor(tokens*milliPerToken + 1e-6))
}

// micro converts a ratio to millionths, rounded to the nearest.
func micro(v float64) int64 {
	return int64(math.Round(v * microPerUnit))
}

// tokens converts milli-tokens back to tokens.
func tokens(m int64) float64 {
	return float64(m) / milliPerToken
}
