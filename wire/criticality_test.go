package wire

import "testing"

func TestParseCriticality(t *testing.T) {
	tests := []struct {
		s      string
		want   Criticality
		wantOK bool
	}{
		{"", Critical, true},
		{"critical-plus", CriticalPlus, true},
		{"critical", Critical, true},
		{"sheddable-plus", SheddablePlus, true},
		{"sheddable", Sheddable, true},
		{"CRITICAL", Critical, true},
		{"Sheddable-Plus", SheddablePlus, true},
		{"CRITICAL_PLUS", Critical, false},
		{"critical_plus", Critical, false},
		{"criticalplus", Critical, false},
		{"default", Critical, false},
		{"normal", Critical, false},
		{" critical", Critical, false},
		{"critical ", Critical, false},
		{"sheddable-", Critical, false},
		{"0", Critical, false},
	}
	for _, tt := range tests {
		got, ok := ParseCriticality(tt.s)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseCriticality(%q) = %v, %v; want %v, %v", tt.s, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestCriticalityString(t *testing.T) {
	tests := []struct {
		c    Criticality
		want string
	}{
		{Sheddable, "sheddable"},
		{SheddablePlus, "sheddable-plus"},
		{Critical, "critical"},
		{CriticalPlus, "critical-plus"},
		{-3, "Criticality(-3)"},
		{2, "Criticality(2)"},
		{127, "Criticality(127)"},
		{-128, "Criticality(-128)"},
	}
	for _, tt := range tests {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("Criticality(%d).String() = %q; want %q", int8(tt.c), got, tt.want)
		}
	}
}

func TestCriticalityOrder(t *testing.T) {
	// Servers shed in ascending order, so the levels must ascend.
	levels := []Criticality{Sheddable, SheddablePlus, Critical, CriticalPlus}
	for i := 1; i < len(levels); i++ {
		if levels[i-1] >= levels[i] {
			t.Errorf("%v >= %v; want ascending criticality", levels[i-1], levels[i])
		}
	}
	var zero Criticality
	if zero != DefaultCriticality || DefaultCriticality != Critical {
		t.Errorf("zero Criticality = %v, DefaultCriticality = %v; want both critical", zero, DefaultCriticality)
	}
}
