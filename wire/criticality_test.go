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

func TestCriticalityText(t *testing.T) {
	tests := []struct {
		text    string
		want    Criticality
		wantErr bool
	}{
		{"critical-plus", CriticalPlus, false},
		{"Critical-Plus", CriticalPlus, false},
		{"critical", Critical, false},
		{"sheddable-plus", SheddablePlus, false},
		{"sheddable", Sheddable, false},
		{"", Critical, false},
		{"1", 0, true},
		{"critical_plus", 0, true},
		{"top", 0, true},
	}
	for _, tt := range tests {
		c := Sheddable - 1 // a value UnmarshalText must overwrite, or leave alone on error
		err := c.UnmarshalText([]byte(tt.text))
		switch {
		case tt.wantErr && err == nil:
			t.Errorf("UnmarshalText(%q) = %v, nil; want an error", tt.text, c)
		case tt.wantErr && c != Sheddable-1:
			t.Errorf("UnmarshalText(%q) failed but changed the value to %v", tt.text, c)
		case !tt.wantErr && (err != nil || c != tt.want):
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", tt.text, c, err, tt.want)
		}
	}
	for _, c := range []Criticality{Sheddable, SheddablePlus, Critical, CriticalPlus} {
		b, err := c.MarshalText()
		var back Criticality
		if err != nil || back.UnmarshalText(b) != nil || back != c {
			t.Errorf("%v: MarshalText = %q, %v; round trip gives %v", c, b, err, back)
		}
	}
	for _, c := range []Criticality{Sheddable - 1, CriticalPlus + 1} {
		if b, err := c.MarshalText(); err == nil {
			t.Errorf("Criticality(%d).MarshalText() = %q, nil; want an error", int(c), b)
		}
	}
}
