package shed

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	got := Config{}.WithDefaults()
	want := Config{Capacity: 1000, Order: FIFO, Priority: FirstTries, CoDelTarget: 5 * time.Millisecond, CoDelInterval: 100 * time.Millisecond}
	if got != want {
		t.Errorf("Config{}.WithDefaults() = %+v; want %+v", got, want)
	}
	q := mustNew[int](t, Config{})
	if q.Config() != want || q.Cap() != 1000 || q.Len() != 0 {
		t.Errorf("New(Config{}): config %+v, cap %d, len %d", q.Config(), q.Cap(), q.Len())
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		field string // "" when valid
	}{
		{"zero", Config{}, ""},
		{"everything set", Config{Capacity: 5, Order: AdaptiveLIFO, Priority: ByCriticality, CoDelTarget: time.Millisecond, CoDelInterval: time.Second, MinRemaining: time.Millisecond}, ""},
		{"target equals interval", Config{CoDelTarget: time.Second, CoDelInterval: time.Second}, ""},
		{"max capacity", Config{Capacity: MaxCapacity}, ""},
		{"negative capacity", Config{Capacity: -1}, "capacity"},
		{"huge capacity", Config{Capacity: MaxCapacity + 1}, "capacity"},
		{"unknown order", Config{Order: "random"}, "order"},
		{"unknown priority", Config{Priority: "attempt"}, "priority"},
		{"negative target", Config{CoDelTarget: -1}, "codel_target"},
		{"negative interval", Config{CoDelInterval: -1}, "codel_interval"},
		{"target above interval", Config{CoDelTarget: 200 * time.Millisecond}, "codel_target"},
		{"negative min remaining", Config{MinRemaining: -time.Millisecond}, "min_remaining"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var newErr error
			if tt.cfg.Capacity != MaxCapacity { // spare the test a 100 MB allocation
				_, newErr = New[int](tt.cfg)
			}
			if tt.field == "" {
				if err != nil || newErr != nil {
					t.Errorf("Validate = %v, New = %v; want nil", err, newErr)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field) || newErr == nil {
				t.Errorf("Validate = %v, New = %v; want ErrInvalidConfig naming %s", err, newErr, tt.field)
			}
		})
	}
}

func TestConfigJSON(t *testing.T) {
	var c Config
	in := `{"capacity": 64, "order": "adaptive-lifo", "priority": "criticality", "codel_target": 2000000, "min_remaining": 10000000}`
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	want := Config{Capacity: 64, Order: AdaptiveLIFO, Priority: ByCriticality, CoDelTarget: 2 * time.Millisecond, MinRemaining: 10 * time.Millisecond}
	if c != want {
		t.Errorf("decoded %+v; want %+v", c, want)
	}
	for _, bad := range []string{`{"order": "LIFO"}`, `{"priority": "retries-last"}`} {
		if err := json.Unmarshal([]byte(bad), &c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("decoding %s: %v; want ErrInvalidConfig", bad, err)
		}
	}
	out, err := json.Marshal(Config{Order: LIFO})
	if err != nil || string(out) != `{"order":"lifo"}` {
		t.Errorf("Marshal = %s, %v", out, err)
	}
}

func TestReasonString(t *testing.T) {
	tests := []struct {
		r        Reason
		want     string
		overload bool
	}{
		{None, "none", false},
		{QueueFull, "queue-full", true},
		{Evicted, "evicted", true},
		{Expired, "expired", false},
		{QueueTimeout, "queue-timeout", true},
		{Reason(42), "shed.Reason(42)", false},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want || tt.r.IsOverload() != tt.overload {
			t.Errorf("Reason(%d): %q, overload %v; want %q, %v", uint8(tt.r), got, tt.r.IsOverload(), tt.want, tt.overload)
		}
	}
}
