package sim

import (
	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/sim/scenario"
)

// AdmissionOf returns the configuration of the admission core the
// simulator builds for a replica of spec (a service of a scenario with
// its defaults filled in), without its dials, and whether that core has
// a concurrency limit; for the tests of the package's users (the lab's).
func AdmissionOf(spec scenario.Service) (cfg admit.Config, limited bool, err error) {
	v := &service{spec: spec, dials: new(killswitch.Dials)}
	cfg, opts := v.admission()
	core, err := admit.NewCore[int32](cfg, opts...)
	if err != nil {
		return admit.Config{}, false, err
	}
	cfg.Dials = nil
	return cfg, core.Limiter() != nil, nil
}
