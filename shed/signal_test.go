package shed

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/wire"
)

func TestDecide(t *testing.T) {
	tests := []struct {
		name              string
		instance, service bool
		retryAfter        time.Duration
		want              Signal
	}{
		{"not overloaded", false, false, time.Second, Signal{}},
		{"instance: retry elsewhere, later", true, false, 2 * time.Second, Signal{wire.OverloadInstance, 2 * time.Second}},
		{"instance, negative hint", true, false, -time.Second, Signal{wire.OverloadInstance, 0}},
		{"service: do not retry, no hint", false, true, 2 * time.Second, Signal{wire.OverloadService, 0}},
		{"service wins over instance", true, true, 2 * time.Second, Signal{wire.OverloadService, 0}},
	}
	for _, tt := range tests {
		if got := Decide(tt.instance, tt.service, tt.retryAfter); got != tt.want {
			t.Errorf("%s: Decide(%v, %v, %v) = %+v; want %+v", tt.name, tt.instance, tt.service, tt.retryAfter, got, tt.want)
		}
	}
}
