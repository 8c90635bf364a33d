package budget

import (
	"testing"
	"time"
)

func TestTokenRatioRules(t *testing.T) {
	tests := []struct {
		name  string
		b     func(t *testing.T) *TokenRatio
		steps []step
	}{
		{
			name: "grpc preset: the doc comment's table",
			b:    func(t *testing.T) *TokenRatio { return mustPreset(t, "grpc").(*TokenRatio) },
			steps: []step{
				{call: "retry", wantOK: true, want: 10},
				{call: "end", outcome: Failure, n: 4, want: 6},
				{call: "retry", wantOK: true, want: 6}, // RetryAt charges nothing
				{call: "end", outcome: Failure, want: 5},
				{call: "retry", wantOK: false, want: 5}, // 5 is not above 10/2
				{call: "end", outcome: Success, want: 5.1},
				{call: "retry", wantOK: true, want: 5.1},
				{call: "end", outcome: Failure, want: 4.1},
				{call: "retry", wantOK: false, want: 4.1},
				{call: "end", outcome: Success, n: 10, want: 5.1},
				{call: "retry", wantOK: true, want: 5.1},
				{call: "end", outcome: Failure, n: 60, want: 0}, // floor 0
				{call: "retry", wantOK: false, want: 0},
				{call: "end", outcome: Success, n: 150, want: 10}, // capped at maxTokens
				{call: "retry", wantOK: true, want: 10},
			},
		},
		{
			name: "retry attempts count like first tries; Ignore counts for nothing",
			b:    func(t *testing.T) *TokenRatio { return mustPreset(t, "grpc").(*TokenRatio) },
			steps: []step{
				{call: "begin", want: 10},
				{call: "end", outcome: Failure, want: 9},
				{call: "retry", wantOK: true, want: 9},
				{call: "end-retry", outcome: Failure, want: 8},
				{call: "retry", wantOK: true, want: 8},
				{call: "end-retry", outcome: Ignore, want: 8},
				{call: "retry", wantOK: true, want: 8},
				{call: "end-retry", outcome: Success, want: 8.1},
				{call: "end", outcome: Ignore, n: 5, want: 8.1},
			},
		},
		{
			name: "gRFC A6 keeps three decimal places of token_ratio",
			b:    func(*testing.T) *TokenRatio { return NewTokenRatio(3, 0.1239) },
			steps: []step{
				{call: "end", outcome: Failure, n: 2, want: 1},
				{call: "retry", wantOK: false, want: 1},
				{call: "end", outcome: Success, n: 4, want: 1.492}, // 4 × 0.123
				{call: "retry", wantOK: false, want: 1.492},
				{call: "end", outcome: Success, want: 1.615},
				{call: "retry", wantOK: true, want: 1.615}, // 1.615 > 1.5
			},
		},
		{
			name: "odd maxTokens: the threshold is exactly half",
			b:    func(*testing.T) *TokenRatio { return NewTokenRatio(1, 0.5) },
			steps: []step{
				{call: "retry", wantOK: true, want: 1},
				{call: "end", outcome: Success, want: 1},
				{call: "end", outcome: Failure, want: 0},
				{call: "end", outcome: Success, want: 0.5},
				{call: "retry", wantOK: false, want: 0.5},
				{call: "end", outcome: Success, want: 1},
				{call: "retry", wantOK: true, want: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.b(t)
			runSteps(t, b, func(time.Time) float64 { return b.Level() }, tt.steps)
		})
	}
}

func TestTokenRatioMaxTokens(t *testing.T) {
	r := NewTokenRatio(1000, 0.001)
	if got, want := r.MaxTokens(), 1000.0; got != want {
		t.Fatalf("MaxTokens() = %g, want %g", got, want)
	}
	if got, want := r.Level(), 1000.0; got != want {
		t.Fatalf("Level() = %g, want %g", got, want)
	}
}

func TestNewTokenRatioPanics(t *testing.T) {
	tests := []struct {
		name       string
		max, ratio float64
	}{
		{"zero max", 0, 0.1},
		{"max above 1000", 1000.5, 0.1},
		{"zero ratio", 10, 0},
		{"ratio below 0.001", 10, 0.0004},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("NewTokenRatio did not panic")
				}
			}()
			NewTokenRatio(tt.max, tt.ratio)
		})
	}
}
