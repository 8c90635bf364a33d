package sim

import (
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/stormguard/stormguard/sim/scenario"
)

// TestReuseSameResult: a run on the buffers of an earlier run of another
// scenario (bigger or smaller, left with work in flight) gives the same
// Result as a run on new buffers.
func TestReuseSameResult(t *testing.T) {
	load := func(name string) scenario.Scenario {
		f, err := scenario.Load(filepath.Join("..", "examples", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return f.Runs[0].Scenario
	}
	tests := []struct{ before, run string }{
		{before: "crash-loop", run: "hotos-toy"},
		{before: "hotos-toy", run: "crash-loop"},
		{before: "hedging", run: "hotos-cache"},
		{before: "hotos-cache", run: "hedging"},
	}
	for _, tt := range tests {
		t.Run(tt.before+"→"+tt.run, func(t *testing.T) {
			s := load(tt.run)
			runtime.GC() // a sync.Pool's items survive one collection
			runtime.GC()
			want := mustRun(t, s, tt.run)
			mustRun(t, load(tt.before), tt.before)
			got := mustRun(t, s, tt.run)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("result after a run of %s differs from a run on new buffers", tt.before)
			}
		})
	}
}
