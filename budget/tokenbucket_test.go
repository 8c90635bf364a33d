package budget

import (
	"testing"
	"time"
)

func TestTokenBucketRules(t *testing.T) {
	tests := []struct {
		name  string
		b     func(t *testing.T) *TokenBucket
		steps []step
	}{
		{
			name: "aws-2026: the doc comment's table",
			b:    func(t *testing.T) *TokenBucket { return mustPreset(t, "aws-2026").(*TokenBucket) },
			steps: []step{
				{call: "retry", cause: Transient, wantOK: true, want: 486},
				{call: "end-retry", outcome: Failure, want: 486},
				{call: "retry", cause: Throttling, wantOK: true, want: 481},
				{call: "end-retry", outcome: Success, want: 486}, // refund of 5
				{call: "end", outcome: Success, want: 487},       // first-try reward
				{call: "retry", cause: Transient, n: 34, wantOK: true, want: 11},
				{call: "end-retry", outcome: Failure, n: 34, want: 11},
				{call: "retry", cause: Transient, wantOK: false, want: 11}, // 11 < 14: refused, nothing taken
				{call: "retry", cause: Timeout, wantOK: false, want: 11},
				{call: "retry", cause: Throttling, wantOK: true, want: 6},
				{call: "retry", cause: Throttling, wantOK: true, want: 1},
				{call: "retry", cause: Throttling, wantOK: false, want: 1},
				{call: "end-retry", outcome: Ignore, want: 6}, // abandoned: refunded
				{call: "end-retry", outcome: Success, want: 11},
			},
		},
		{
			name: "aws-2026: the level never exceeds the capacity",
			b:    func(t *testing.T) *TokenBucket { return mustPreset(t, "aws-2026").(*TokenBucket) },
			steps: []step{
				{call: "begin", want: 500},
				{call: "end", outcome: Success, want: 500},
				{call: "retry", cause: Transient, wantOK: true, want: 486},
				{call: "end", outcome: Success, n: 10, want: 496},
				{call: "end-retry", outcome: Success, want: 500}, // refund of 14 capped
				{call: "end", outcome: Failure, n: 3, want: 500},
				{call: "end", outcome: Ignore, want: 500},
			},
		},
		{
			name: "aws-standard: a timeout retry costs 10, an unknown cause is priced as transient",
			b:    func(t *testing.T) *TokenBucket { return mustPreset(t, "aws-standard").(*TokenBucket) },
			steps: []step{
				{call: "retry", cause: Timeout, wantOK: true, want: 490},
				{call: "retry", cause: Transient, wantOK: true, want: 485},
				{call: "retry", cause: Throttling, wantOK: true, want: 480},
				{call: "retry", cause: Cause(9), wantOK: true, want: 475},
				{call: "end-retry", outcome: Success, n: 4, want: 500},
			},
		},
		{
			name: "no refund: a successful retry keeps its cost, an abandoned one does not",
			b: func(t *testing.T) *TokenBucket {
				b, err := Spec{Kind: KindTokenBucket, Capacity: 30, RetryCost: 14, NoRefund: true}.New()
				if err != nil {
					t.Fatal(err)
				}
				return b.(*TokenBucket)
			},
			steps: []step{
				{call: "retry", cause: Transient, n: 2, wantOK: true, want: 2},
				{call: "retry", cause: Throttling, wantOK: false, want: 2}, // throttle cost defaults to retry cost
				{call: "end-retry", outcome: Success, want: 2},
				{call: "end-retry", outcome: Ignore, want: 16},
				{call: "end", outcome: Success, n: 3, want: 19}, // default reward 1
			},
		},
		{
			name: "fractional amounts keep three decimal places",
			b:    func(*testing.T) *TokenBucket { return NewTokenBucket(1, 0.3, 0.3, 0.3, 0.1, true) },
			steps: []step{
				{call: "retry", cause: Transient, n: 3, wantOK: true, want: 0.1},
				{call: "retry", cause: Transient, wantOK: false, want: 0.1},
				{call: "end", outcome: Success, n: 2, want: 0.3},
				{call: "retry", cause: Transient, wantOK: true, want: 0},
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

func TestTokenBucketRefusalChangesNothing(t *testing.T) {
	b := NewTokenBucket(20, 14, 14, 14, 1, true)
	if got, want := b.Capacity(), 20.0; got != want {
		t.Fatalf("Capacity() = %g, want %g", got, want)
	}
	if _, ok := b.RetryAt(t0, Timeout); !ok {
		t.Fatal("first retry refused")
	}
	for range 3 {
		if tk, ok := b.RetryAt(t0, Transient); ok || tk != (Ticket{}) {
			t.Fatalf("RetryAt = (%+v, %v), want (zero, false)", tk, ok)
		}
	}
	if got, want := b.Level(), 6.0; got != want {
		t.Fatalf("Level() = %g, want %g", got, want)
	}
}

func TestNewTokenBucketPanics(t *testing.T) {
	tests := []struct {
		name                                   string
		capacity, retry, throttle, timeout, rw float64
	}{
		{"zero capacity", 0, 1, 1, 1, 1},
		{"cost above capacity", 10, 11, 1, 1, 1},
		{"zero cost", 10, 1, 0, 1, 1},
		{"negative reward", 10, 1, 1, 1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("NewTokenBucket did not panic")
				}
			}()
			NewTokenBucket(tt.capacity, tt.retry, tt.throttle, tt.timeout, tt.rw, true)
		})
	}
}

func TestMilli(t *testing.T) {
	tests := []struct {
		in   float64
		want int64
	}{
		{0, 0}, {0.1, 100}, {0.3, 300}, {0.7, 700}, {1.005, 1005}, {0.1234, 123}, {0.0009, 0}, {14, 14000}, {1e6, 1e9},
	}
	for _, tt := range tests {
		if got := milli(tt.in); got != tt.want {
			t.Errorf("milli(%g) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestTokenBucketSetLevel(t *testing.T) {
	b := NewTokenBucket(100, 10, 10, 10, 1, false)
	for _, tt := range []struct{ set, want float64 }{{42.5, 42.5}, {-3, 0}, {1e9, 100}, {0.0004, 0}} {
		b.SetLevel(tt.set)
		if got := b.Level(); got != tt.want {
			t.Errorf("SetLevel(%v): level %v; want %v", tt.set, got, tt.want)
		}
	}
	b.SetLevel(15)
	if _, ok := b.RetryAt(time.Time{}, Transient); !ok {
		t.Error("15 tokens: a retry of 10 refused")
	}
	if _, ok := b.RetryAt(time.Time{}, Transient); ok {
		t.Error("5 tokens: a retry of 10 granted")
	}
}
