package leakcheck

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeTB records what Check does with a test.
type fakeTB struct {
	cleanups []func()
	errors   []string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Cleanup(fn func())         { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(s string, a ...any) { f.errors = append(f.errors, fmt.Sprintf(s, a...)) }

func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

//go:noinline
func parkedForLeakcheckTest(stop <-chan struct{}) { <-stop }

func TestCheck(t *testing.T) {
	tests := []struct {
		name     string
		run      func(stop chan struct{}) // starts goroutines; stop ends them
		stopLate bool                     // close stop only after the check
		wantLeak bool
	}{
		{"nothing started", func(chan struct{}) {}, false, false},
		{"ends before the check", func(stop chan struct{}) { go parkedForLeakcheckTest(stop) }, false, false},
		{"ends during the wait", func(stop chan struct{}) {
			go parkedForLeakcheckTest(stop)
			go func() { time.Sleep(20 * time.Millisecond); close(stop) }()
		}, true, false},
		{"leaks", func(stop chan struct{}) { go parkedForLeakcheckTest(stop) }, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			Check(t) // the checker checks itself
			f := new(fakeTB)
			stop := make(chan struct{})
			check(f, 200*time.Millisecond)
			tt.run(stop)
			if !tt.stopLate {
				close(stop)
			}
			f.runCleanups()
			if tt.stopLate && tt.wantLeak {
				close(stop)
			}
			gotLeak := len(f.errors) > 0
			if gotLeak != tt.wantLeak {
				t.Fatalf("leak reported = %v, want %v; errors: %q", gotLeak, tt.wantLeak, f.errors)
			}
			if tt.wantLeak && !strings.Contains(f.errors[0], "parkedForLeakcheckTest") {
				t.Errorf("report lacks the leaked stack:\n%s", f.errors[0])
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		entry  string
		wantID uint64
		wantOK bool
	}{
		{"goroutine 42 [chan receive]:\nmain.f()", 42, true},
		{"goroutine 7 [running]:", 7, true},
		{"goroutine x [running]:", 0, false},
		{"something else", 0, false},
	}
	for _, tt := range tests {
		g, ok := parse(tt.entry)
		if g.id != tt.wantID || ok != tt.wantOK {
			t.Errorf("parse(%q) = %d, %v; want %d, %v", tt.entry, g.id, ok, tt.wantID, tt.wantOK)
		}
	}
}
