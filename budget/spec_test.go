package budget

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestPresetsBuild(t *testing.T) {
	tests := []struct {
		preset string
		want   string // the type New builds
	}{
		{"none", "budget.Unlimited"},
		{"", "budget.Unlimited"},
		{"aws-standard", "*budget.TokenBucket"},
		{"aws-2026", "*budget.TokenBucket"},
		{"grpc", "*budget.TokenRatio"},
		{"sre", "*budget.Window"},
		{"finagle", "*budget.Window"},
		{"linkerd", "*budget.Window"},
		{"envoy", "*budget.Concurrency"},
		{"per-minute", "*budget.Window"},
	}
	if got, want := len(tests)-1, len(Presets); got != want {
		t.Fatalf("the test covers %d presets, Presets lists %d", got, want)
	}
	for _, tt := range tests {
		spec, err := Preset(tt.preset)
		if err != nil {
			t.Fatalf("Preset(%q): %v", tt.preset, err)
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("Preset(%q).Validate(): %v", tt.preset, err)
		}
		b, err := spec.New()
		if err != nil {
			t.Fatalf("Preset(%q).New(): %v", tt.preset, err)
		}
		if got := fmt.Sprintf("%T", b); got != tt.want {
			t.Errorf("Preset(%q).New() is a %s, want %s", tt.preset, got, tt.want)
		}
	}
	if _, err := Preset("hystrix"); err == nil || !strings.Contains(err.Error(), "aws-2026") {
		t.Errorf("Preset(\"hystrix\") error = %v, want one listing the presets", err)
	}
}

func TestSpecDefaults(t *testing.T) {
	tests := []struct {
		spec Spec
		want Spec
	}{
		{
			spec: Spec{Kind: KindTokenBucket},
			want: Spec{Kind: KindTokenBucket, Capacity: 500, RetryCost: 5, ThrottleCost: 5, TimeoutCost: 5, SuccessReward: 1},
		},
		{
			spec: Spec{Kind: KindTokenBucket, RetryCost: 14, ThrottleCost: 5},
			want: Spec{Kind: KindTokenBucket, Capacity: 500, RetryCost: 14, ThrottleCost: 5, TimeoutCost: 14, SuccessReward: 1},
		},
		{
			spec: Spec{Kind: KindTokenRatio},
			want: Spec{Kind: KindTokenRatio, MaxTokens: 10, TokenRatio: 0.1},
		},
		{
			spec: Spec{Kind: KindWindow, Ratio: 0.1},
			want: Spec{Kind: KindWindow, Window: 10 * time.Second, Ratio: 0.1},
		},
		{
			spec: Spec{Kind: KindConcurrency},
			want: Spec{Kind: KindConcurrency, Percent: 0.2, MinConcurrency: 3},
		},
		{
			// Fields of other kinds are left alone.
			spec: Spec{Kind: KindTokenRatio, Capacity: -1, Window: -time.Second},
			want: Spec{Kind: KindTokenRatio, MaxTokens: 10, TokenRatio: 0.1, Capacity: -1, Window: -time.Second},
		},
	}
	for _, tt := range tests {
		if got := tt.spec.WithDefaults(); got != tt.want {
			t.Errorf("%+v with defaults = %+v, want %+v", tt.spec, got, tt.want)
		}
		if err := tt.spec.Validate(); err != nil {
			t.Errorf("%+v: Validate() = %v", tt.spec, err)
		}
	}

	// And the built budgets behave accordingly.
	b, err := Spec{Kind: KindTokenBucket}.New()
	if err != nil {
		t.Fatal(err)
	}
	tb := b.(*TokenBucket)
	if _, ok := tb.RetryAt(t0, Timeout); !ok || tb.Level() != 495 || tb.Capacity() != 500 {
		t.Errorf("default token bucket: ok = %v, level %g, capacity %g; want true, 495, 500", ok, tb.Level(), tb.Capacity())
	}
	b, err = Spec{Kind: KindTokenRatio}.New()
	if err != nil {
		t.Fatal(err)
	}
	if tr := b.(*TokenRatio); tr.MaxTokens() != 10 || tr.Level() != 10 {
		t.Errorf("default token ratio: max %g, level %g; want 10, 10", tr.MaxTokens(), tr.Level())
	}
}

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want []string // substrings of the error; nil: valid
	}{
		{"zero spec", Spec{}, nil},
		{"unknown kind", Spec{Kind: "leaky-bucket"},
			[]string{`kind "leaky-bucket" is unknown`, "none token-bucket token-ratio window concurrency"}},
		{"max tokens above 1000", Spec{Kind: KindTokenRatio, MaxTokens: 2000},
			[]string{"max_tokens must be in (0, 1000]", "got 2000"}},
		{"negative max tokens", Spec{Kind: KindTokenRatio, MaxTokens: -1}, []string{"max_tokens must be in (0, 1000]"}},
		{"NaN max tokens", Spec{Kind: KindTokenRatio, MaxTokens: math.NaN()}, []string{"max_tokens", "got NaN"}},
		{"negative token ratio", Spec{Kind: KindTokenRatio, TokenRatio: -0.1}, []string{"token_ratio must be > 0"}},
		{"token ratio below precision", Spec{Kind: KindTokenRatio, TokenRatio: 0.0001}, []string{"token_ratio", "at least 0.001"}},
		{"max tokens 1000 ratio 0.001", Spec{Kind: KindTokenRatio, MaxTokens: 1000, TokenRatio: 0.001}, nil},
		{"negative capacity", Spec{Kind: KindTokenBucket, Capacity: -500}, []string{"capacity must be in (0, 1000000]"}},
		{"infinite capacity", Spec{Kind: KindTokenBucket, Capacity: math.Inf(1)}, []string{"capacity", "got +Inf"}},
		{"cost above capacity", Spec{Kind: KindTokenBucket, Capacity: 10, RetryCost: 14},
			// the throttle and timeout costs default to the retry cost: three errors
			[]string{"retry_cost must be in (0, capacity = 10]", "throttle_cost", "timeout_cost", "got 14"}},
		{"default cost above small capacity", Spec{Kind: KindTokenBucket, Capacity: 3}, []string{"retry_cost", "got 5"}},
		{"negative cost", Spec{Kind: KindTokenBucket, ThrottleCost: -5}, []string{"throttle_cost", "got -5"}},
		{"negative reward", Spec{Kind: KindTokenBucket, SuccessReward: -1}, []string{"success_reward must be in [0, capacity = 500]"}},
		{"negative window", Spec{Kind: KindWindow, Window: -time.Second, Ratio: 0.1}, []string{"window must be at least 10ns", "got -1s"}},
		{"negative ratio", Spec{Kind: KindWindow, Ratio: -0.1}, []string{"ratio must be in [0, 1000]"}},
		{"negative floor", Spec{Kind: KindWindow, Floor: -1}, []string{"floor must be ≥ 0"}},
		{"ratio and floor zero", Spec{Kind: KindWindow}, []string{"ratio and floor are both 0"}},
		// 0.05/s over 10 s is half a retry per window: never one.
		{"floor below one retry per window", Spec{Kind: KindWindow, Window: 10 * time.Second, Floor: 0.05}, []string{"allows 0.5 retries per window", "at least 0.1", "at least 20s"}},
		{"percent as a number of percent", Spec{Kind: KindConcurrency, Percent: 20}, []string{"percent must be a fraction in [0, 1]", "got 20"}},
		{"negative min concurrency", Spec{Kind: KindConcurrency, MinConcurrency: -3}, []string{"min_concurrency must be in [0, 2147483647]", "got -3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			_, newErr := tt.spec.New()
			if (err == nil) != (newErr == nil) {
				t.Fatalf("Validate() = %v but New() error = %v", err, newErr)
			}
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tt.want)
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("Validate() = %v, which does not wrap ErrInvalidSpec", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestKindUnmarshal(t *testing.T) {
	tests := []struct {
		in      string
		want    Kind
		wantErr string
	}{
		{in: `{"kind": "token-ratio", "max_tokens": 20}`, want: KindTokenRatio},
		{in: `{"kind": ""}`, want: ""},
		{in: `{"kind": "bucket"}`, wantErr: `kind "bucket" is unknown (want one of [none token-bucket token-ratio window concurrency])`},
	}
	for _, tt := range tests {
		var s Spec
		err := json.Unmarshal([]byte(tt.in), &s)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Unmarshal(%s) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("Unmarshal(%s): %v", tt.in, err)
		case s.Kind != tt.want:
			t.Errorf("Unmarshal(%s): kind %q, want %q", tt.in, s.Kind, tt.want)
		}
	}
}

func TestZeroValuesRefuse(t *testing.T) {
	budgets := []struct {
		name string
		b    Budget
	}{
		{"TokenBucket", new(TokenBucket)},
		{"TokenRatio", new(TokenRatio)},
		{"Window", new(Window)},
		{"Concurrency", new(Concurrency)},
	}
	for _, tt := range budgets {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 3 {
				now := t0.Add(time.Duration(i-1) * time.Hour)
				tt.b.BeginAt(now)
				tt.b.EndAt(now, Success, Ticket{})
				tt.b.EndAt(now, Failure, Ticket{retry: true, cost: 7})
				tt.b.EndAt(now, Ignore, Ticket{retry: true, cost: 7})
				for _, c := range []Cause{Transient, Throttling, Timeout, Cause(200)} {
					if tk, ok := tt.b.RetryAt(now, c); ok || tk != (Ticket{}) {
						t.Fatalf("RetryAt(%v) = (%+v, %v), want (zero, false)", c, tk, ok)
					}
				}
			}
		})
	}
	if tk, ok := (Unlimited{}).RetryAt(t0, Transient); !ok || !tk.Retry() {
		t.Errorf("Unlimited.RetryAt = (%+v, %v), want a retry ticket, true", tk, ok)
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{Transient.String(), "transient"},
		{Throttling.String(), "throttling"},
		{Timeout.String(), "timeout"},
		{Cause(7).String(), "budget.Cause(7)"},
		{Success.String(), "success"},
		{Failure.String(), "failure"},
		{Ignore.String(), "ignore"},
		{Outcome(9).String(), "budget.Outcome(9)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
