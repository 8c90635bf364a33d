package killswitch

import (
	"sync"
	"testing"
	"time"
)

func TestDials(t *testing.T) {
	var d Dials
	if d.RetriesDisabled() || d.ShedFraction() != 0 {
		t.Fatal("the zero Dials must have retries on and nothing shed")
	}
	if _, ok := d.LimitOverride(); ok {
		t.Fatal("the zero Dials must have no limit override")
	}
	d.SetRetriesDisabled(true)
	if !d.RetriesDisabled() {
		t.Error("SetRetriesDisabled(true) did not turn retries off")
	}
	tests := []struct {
		f       float64
		wantPPM uint32
		wantErr bool
	}{
		{0, 0, false},
		{0.25, 250_000, false},
		{1, 1_000_000, false},
		{-0.1, 1_000_000, true}, // refused: the previous value stays
		{1.5, 1_000_000, true},
	}
	for _, tt := range tests {
		err := d.SetShedFraction(tt.f)
		if (err != nil) != tt.wantErr || d.ShedPPM() != tt.wantPPM {
			t.Errorf("SetShedFraction(%v): ppm %d, err %v; want ppm %d, error %v", tt.f, d.ShedPPM(), err, tt.wantPPM, tt.wantErr)
		}
	}
	if err := d.SetLimitOverride(-1); err == nil {
		t.Error("SetLimitOverride(-1): no error")
	}
	if err := d.SetLimitOverride(8); err != nil {
		t.Fatal(err)
	}
	if l, ok := d.LimitOverride(); !ok || l != 8 {
		t.Errorf("LimitOverride() = %d, %v; want 8, true", l, ok)
	}
	if err := d.SetLimitOverride(0); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.LimitOverride(); ok {
		t.Error("SetLimitOverride(0) did not remove the override")
	}
}

// TestDialsConcurrent flips the dials while readers read them (run with -race).
func TestDialsConcurrent(t *testing.T) {
	var d Dials
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 1000 {
				if i%2 == 0 {
					d.SetRetriesDisabled(j%2 == 0)
					_ = d.SetShedFraction(float64(j%10) / 10)
				} else {
					_ = d.RetriesDisabled()
					if f := d.ShedFraction(); f < 0 || f > 1 {
						t.Errorf("shed fraction %v out of range", f)
					}
				}
			}
		}()
	}
	wg.Wait()
}

// The dials remember their last change: none at first; a setter records a
// local change now; NoteChange records who and when, as the admin endpoint
// and a fleet watcher's OnChange do.
func TestLastChange(t *testing.T) {
	d := new(Dials)
	if c := d.LastChange(); c != (Change{}) || c.Origin.String() != "none" {
		t.Errorf("new dials: last change %+v; want none", c)
	}
	before := time.Now()
	d.SetRetriesDisabled(true)
	c := d.LastChange()
	if c.Origin != OriginLocal || c.At.Before(before) || time.Since(c.At) > time.Minute || c.By != "" {
		t.Errorf("after SetRetriesDisabled: %+v; want a local change now", c)
	}
	at := time.Unix(1_800_000_000, 0)
	d.NoteChange(Change{At: at, Origin: OriginFleet, By: "fleet default"})
	if c := d.LastChange(); c.Origin != OriginFleet || !c.At.Equal(at) || c.By != "fleet default" || c.Origin.String() != "fleet" {
		t.Errorf("after NoteChange: %+v", c)
	}
	for _, set := range []func(){
		func() { _ = d.SetShedFraction(0.5) },
		func() { _ = d.SetLimitOverride(3) },
	} {
		d.NoteChange(Change{Origin: OriginFleet})
		set()
		if o := d.LastChange().Origin; o != OriginLocal {
			t.Errorf("a setter left the origin %v; want local", o)
		}
	}
	if got := Origin(9).String(); got != "killswitch.Origin(9)" {
		t.Errorf("Origin(9) = %q", got)
	}
}
