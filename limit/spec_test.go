package limit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSpecNew(t *testing.T) {
	tests := []struct {
		name  string
		spec  Spec
		want  any // the algorithm's Config(), or the Fixed itself
		limit int
	}{
		{"empty is vegas", Spec{}, VegasConfig{Initial: 20, Min: 1, Max: 1000, Smoothing: 1, ProbeMultiplier: 30}, 20},
		{"vegas no probe", Spec{Kind: KindVegas, Vegas: VegasConfig{NoProbe: true}}, VegasConfig{Initial: 20, Min: 1, Max: 1000, Smoothing: 1, ProbeMultiplier: 30, NoProbe: true}, 20},
		{"fixed", Spec{Kind: KindFixed, Limit: 7}, Fixed{N: 7}, 7},
		{"aimd", Spec{Kind: KindAIMD}, AIMDConfig{Initial: 20, Min: 1, Max: 200, BackoffRatio: 0.9, Timeout: 5 * time.Second}, 20},
		{"aimd initial follows max", Spec{Kind: KindAIMD, AIMD: AIMDConfig{Max: 10}}, AIMDConfig{Initial: 10, Min: 1, Max: 10, BackoffRatio: 0.9, Timeout: 5 * time.Second}, 10},
		{"gradient2", Spec{Kind: KindGradient2}, Gradient2Config{Initial: 20, Min: 20, Max: 200, Smoothing: 0.2, QueueSize: 4, LongWindow: 600, Tolerance: 1.5}, 20},
		{"gradient2 initial follows min", Spec{Kind: KindGradient2, Gradient2: Gradient2Config{Min: 30}}, Gradient2Config{Initial: 30, Min: 30, Max: 200, Smoothing: 0.2, QueueSize: 4, LongWindow: 600, Tolerance: 1.5}, 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alg, err := tc.spec.New()
			if err != nil {
				t.Fatal(err)
			}
			var got any = alg
			switch a := alg.(type) {
			case *AIMD:
				got = a.Config()
			case *Vegas:
				got = a.Config()
			case *Gradient2:
				got = a.Config()
			}
			if got != tc.want {
				t.Errorf("New() config = %+v, want %+v", got, tc.want)
			}
			if alg.Limit() != tc.limit {
				t.Errorf("Limit() = %d, want %d", alg.Limit(), tc.limit)
			}
		})
	}
}

func TestSpecInvalid(t *testing.T) {
	tests := []struct {
		spec Spec
		want []string // substrings of the error
	}{
		{Spec{Kind: "reno"}, []string{`kind "reno" is unknown`, "gradient2"}},
		{Spec{Kind: KindFixed}, []string{"limit must be in [1, 1073741824]"}},
		{Spec{Kind: KindAIMD, AIMD: AIMDConfig{Max: 1 << 31}}, []string{"max must be at most 1073741824"}},
		{Spec{Kind: KindAIMD, AIMD: AIMDConfig{BackoffRatio: 1.5, Timeout: -time.Second}}, []string{"backoff_ratio must be in (0, 1), got 1.5", "timeout must be positive"}},
		{Spec{Kind: KindAIMD, AIMD: AIMDConfig{Min: 10, Max: 5}}, []string{"max must be at least min (10), got 5", "initial must be in [min, max] = [10, 5], got 10"}},
		{Spec{Kind: KindAIMD, AIMD: AIMDConfig{Min: -1}}, []string{"min must be at least 1, got -1"}},
		{Spec{Kind: KindVegas, Vegas: VegasConfig{Smoothing: 2, ProbeMultiplier: -1}}, []string{"smoothing must be in (0, 1], got 2", "probe_multiplier must be in [1, 1048576], got -1"}},
		{Spec{Vegas: VegasConfig{Initial: 2000}}, []string{"initial must be in [min, max] = [1, 1000], got 2000"}},
		{Spec{Kind: KindGradient2, Gradient2: Gradient2Config{Max: 10}}, []string{"max must be at least min (20), got 10"}},
		{Spec{Kind: KindGradient2, Gradient2: Gradient2Config{Smoothing: -1, QueueSize: -4, LongWindow: -1, Tolerance: 0.5}}, []string{"smoothing", "queue_size", "long_window", "tolerance must be in [1, 1e6], got 0.5"}},
	}
	for _, tc := range tests {
		t.Run(string(tc.spec.Kind), func(t *testing.T) {
			alg, err := tc.spec.New()
			if err == nil {
				t.Fatalf("New() = %+v, want an error", alg)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %q does not wrap ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if err2 := tc.spec.Validate(); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("Validate() = %v, want %v", err2, err)
			}
		})
	}
}

func TestSpecJSON(t *testing.T) {
	const doc = `{"kind": "gradient2", "gradient2": {"min": 1, "max": 100, "tolerance": 2}}`
	var s Spec
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatal(err)
	}
	want := Spec{Kind: KindGradient2, Gradient2: Gradient2Config{Min: 1, Max: 100, Tolerance: 2}}
	if s != want {
		t.Errorf("decoded %+v, want %+v", s, want)
	}
	out, err := json.Marshal(Spec{Kind: KindFixed, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"kind":"fixed","limit":5}`; got != want {
		t.Errorf("encoded %s, want %s", got, want)
	}
	err = json.Unmarshal([]byte(`{"kind": "reno"}`), &s)
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("decoding an unknown kind: error %v, want one wrapping ErrInvalidConfig", err)
	}
}
