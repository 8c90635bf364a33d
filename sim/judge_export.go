package sim

// Judge sets r's Verdict, RecoveryS and Why from its time series by the
// rule the simulator applies to its own runs (stable, recovered or
// metastable; see Result), for results measured elsewhere, such as the
// lab's. s is the scenario r ran; its zero fields take their defaults.
func Judge(r *Result, s Scenario) { judge(r, s.withDefaults()) }
