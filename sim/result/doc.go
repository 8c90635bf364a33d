// Package result is what a run of a scenario gives, whoever ran it: the
// time series per client and service in the vocabulary of the seeds
// ([Result], [ClientBin], [ServiceBin]: offered load, throughput, goodput,
// wasted work, retries, give-ups by reason), the runbook's steps as they
// happened, the JSON `stormguard sim --json` prints ([Output]), and the
// verdict's rule ([Judge]: stable, recovered — and when — or metastable,
// with the reason), which judges the simulator's runs and the lab's
// measured runs alike. [FindHysteresis] reads the collapse and recovery
// thresholds of a load ramp from a client's series.
//
// Package sim produces Results; report, lab, sweep and analyze read them
// without the model.
package result
