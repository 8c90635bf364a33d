package wire

import "testing"

func TestParseOverload(t *testing.T) {
	tests := []struct {
		s      string
		want   Overload
		wantOK bool
	}{
		{"", OverloadNone, true},
		{"none", OverloadNone, true},
		{"instance", OverloadInstance, true},
		{"service", OverloadService, true},
		{"Instance", OverloadInstance, true},
		{"SERVICE", OverloadService, true},
		{"ſervice", OverloadNone, false}, // long s: Unicode folding is not ASCII case
		{"serviſe", OverloadNone, false},
		{" service", OverloadNone, false},
		{"service ", OverloadNone, false},
		{"services", OverloadNone, false},
		{"servic", OverloadNone, false},
		{"1", OverloadNone, false},
		{"cluster", OverloadNone, false},
		{"instance,service", OverloadNone, false},
	}
	for _, tt := range tests {
		got, ok := ParseOverload(tt.s)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseOverload(%q) = %v, %v; want %v, %v", tt.s, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestOverloadString(t *testing.T) {
	tests := []struct {
		o    Overload
		want string
	}{
		{OverloadNone, "none"},
		{OverloadInstance, "instance"},
		{OverloadService, "service"},
		{3, "Overload(3)"},
		{255, "Overload(255)"},
	}
	for _, tt := range tests {
		if got := tt.o.String(); got != tt.want {
			t.Errorf("Overload(%d).String() = %q; want %q", uint8(tt.o), got, tt.want)
		}
		if o, ok := ParseOverload(tt.want); ok && o != tt.o {
			t.Errorf("ParseOverload(%q) = %v; want %v", tt.want, o, tt.o)
		}
	}
}

func TestParseExhausted(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{"1", true},
		{ExhaustedValue, true},
		{"true", true},
		{"TRUE", true},
		{"True", true},
		{"", false},
		{"0", false},
		{"false", false},
		{"yes", false},
		{"01", false},
		{"2", false},
		{" 1", false},
		{"1 ", false},
		{"true ", false},
		{"truee", false},
		{"١", false},
	}
	for _, tt := range tests {
		if got := ParseExhausted(tt.s); got != tt.want {
			t.Errorf("ParseExhausted(%q) = %v; want %v", tt.s, got, tt.want)
		}
	}
}
