package lab

import (
	"time"

	"github.com/stormguard/stormguard/examples"
	"github.com/stormguard/stormguard/sim/scenario"
)

// DefaultName is the scenario file `stormguard lab` runs without one: the
// HotOS '21 toy example scaled to a small machine, with a naive run and a
// run with stormguard's defenses.
const DefaultName = "lab-hotos.yaml"

// Default returns the default lab scenario file, parsed.
func Default() (scenario.File, error) {
	data, err := examples.Scenarios.ReadFile(DefaultName)
	if err != nil {
		return scenario.File{}, err
	}
	return scenario.Parse(DefaultName, data)
}

// ScaleTime returns sc with every point in time of the run (the duration,
// the triggers, the arrival schedule and the verdict's warm-up) multiplied
// by f, and everything else (rates, timeouts, service times) unchanged:
// the same system, watched for a shorter or longer time. Tests use it to
// run the default scenario quickly.
func ScaleTime(sc scenario.Scenario, f float64) scenario.Scenario {
	scale := func(d *time.Duration) { *d = time.Duration(float64(*d) * f) }
	scale(&sc.Duration)
	scale(&sc.Verdict.Warmup)
	sc.Triggers = append([]scenario.Trigger(nil), sc.Triggers...)
	for i := range sc.Triggers {
		scale(&sc.Triggers[i].At)
		scale(&sc.Triggers[i].Duration)
	}
	sc.Clients = append([]scenario.Client(nil), sc.Clients...)
	for i := range sc.Clients {
		a := &sc.Clients[i].Arrivals
		a.Schedule = append([]scenario.RatePoint(nil), a.Schedule...)
		for j := range a.Schedule {
			scale(&a.Schedule[j].At)
		}
		scale(&a.At)
	}
	return sc
}
