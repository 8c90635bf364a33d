package rehearse

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// Output is what `stormguard rehearse --json` prints and a shard writes:
// the runs in the shape of `stormguard sim --json` (scenario, runs[] with
// name, verdict, recovery_s …), what only a rehearsal knows of each run,
// and, with --predict, the fitted models, the simulator's runs of them and
// their comparison with what was measured.
type Output struct {
	Scenario    string          `json:"scenario"`
	Description string          `json:"description,omitempty"`
	Runs        []result.Result `json:"runs"`
	// Rehearsals are the runs' accounts (Run's Result without its series),
	// in the same order.
	Rehearsals []RunNotes `json:"rehearsals"`
	// Fits, Sim and Comparisons are --predict's, in the runs' order.
	Fits        [][]Fit          `json:"fits,omitempty"`
	Sim         []result.Result  `json:"sim,omitempty"`
	Comparisons []lab.Comparison `json:"sim_vs_rehearsal,omitempty"`
	// ModelNotes say what of each run's scenario the model has no
	// counterpart for.
	ModelNotes [][]string `json:"model_notes,omitempty"`
}

// RunNotes is a Result without its series, plus the scenario it ran (for
// a merge).
type RunNotes struct {
	Name string `json:"name"`
	Result
	Scenario scenario.Scenario `json:"scenario"`
}

// Add appends a run.
func (o *Output) Add(p Plan, r Result) {
	o.Runs = append(o.Runs, r.Result)
	n := RunNotes{Name: p.Name, Result: r, Scenario: p.Scenario}
	n.Result.Result = result.Result{}
	o.Rehearsals = append(o.Rehearsals, n)
}

// AddPrediction sets the prediction of the last run added: its fits, the
// simulator's run of the model and the notes.
func (o *Output) AddPrediction(fits []Fit, sim result.Result, notes []string) {
	i := len(o.Runs) - 1
	o.Fits = append(o.Fits, fits)
	o.Sim = append(o.Sim, sim)
	o.ModelNotes = append(o.ModelNotes, notes)
	c := lab.Compare(o.Runs[i], sim, lab.DefaultWindow)
	if c.Inconclusive {
		c.Reason = o.Rehearsals[i].Host.Reason
	}
	o.Comparisons = append(o.Comparisons, c)
}

// Merge puts the shards' outputs of one rehearsal together: every shard
// of 1..N once, the same scenario and start in each. Per run, the
// clients' series add up bin by bin (their latency percentiles come from
// the shards' histograms), their outcomes add up, the services' series
// and the steps are the first shard's (each shard measured the same
// service), the host is the worst shard's; the run is judged again.
func Merge(parts ...Output) (Output, error) {
	if len(parts) == 0 {
		return Output{}, errors.New("rehearse: merge: no parts")
	}
	count := 0
	seen := map[int]bool{}
	for _, p := range parts {
		if len(p.Rehearsals) == 0 {
			return Output{}, errors.New("rehearse: merge: a part has no runs")
		}
		s, err := ParseShard(p.Rehearsals[0].Shard)
		if err != nil {
			return Output{}, fmt.Errorf("rehearse: merge: %w", err)
		}
		if count == 0 {
			count = s.Count
		}
		if s.Count != count || seen[s.Index] {
			return Output{}, fmt.Errorf("rehearse: merge: shard %s does not fit with the others (of %d)", s, count)
		}
		seen[s.Index] = true
	}
	if len(seen) != count {
		return Output{}, fmt.Errorf("rehearse: merge: %d of %d shards given", len(seen), count)
	}
	slices.SortFunc(parts, func(a, b Output) int {
		x, _ := ParseShard(a.Rehearsals[0].Shard)
		y, _ := ParseShard(b.Rehearsals[0].Shard)
		return x.Index - y.Index
	})
	first := parts[0]
	out := Output{Scenario: first.Scenario, Description: first.Description}
	for i := range first.Runs {
		var runs []result.Result
		var notes []RunNotes
		for _, p := range parts {
			if len(p.Runs) != len(first.Runs) || p.Rehearsals[i].Name != first.Rehearsals[i].Name {
				return Output{}, errors.New("rehearse: merge: the parts hold different runs")
			}
			a, _ := json.Marshal(p.Rehearsals[i].Scenario)
			b, _ := json.Marshal(first.Rehearsals[i].Scenario)
			if string(a) != string(b) {
				return Output{}, fmt.Errorf("rehearse: merge: run %s: the parts ran different scenarios (same file, seed and flags for every shard)", first.Rehearsals[i].Name)
			}
			if d := p.Rehearsals[i].StartUnixNano - first.Rehearsals[i].StartUnixNano; math.Abs(float64(d)) > 1e9 {
				return Output{}, fmt.Errorf("rehearse: merge: run %s: shard %s started %.1f s apart from shard %s (give every shard the same --start-at)",
					first.Rehearsals[i].Name, p.Rehearsals[i].Shard, float64(d)/1e9, first.Rehearsals[i].Shard)
			}
			runs = append(runs, p.Runs[i])
			notes = append(notes, p.Rehearsals[i])
		}
		r, n, err := mergeRun(runs, notes)
		if err != nil {
			return Output{}, err
		}
		out.Runs = append(out.Runs, r)
		out.Rehearsals = append(out.Rehearsals, n)
	}
	return out, nil
}

// mergeRun merges one run's shards (in shard order).
func mergeRun(runs []result.Result, notes []RunNotes) (result.Result, RunNotes, error) {
	r := runs[0]
	r.Clients = slices.Clone(r.Clients)
	n := notes[0]
	n.Shard = fmt.Sprintf("merged from %d shards", len(runs))
	n.Clients = slices.Clone(n.Clients)
	n.Latency = nil
	bins := len(r.Clients[0].Bins)
	for _, x := range runs[1:] {
		if len(x.Clients) != len(r.Clients) {
			return r, n, errors.New("rehearse: merge: the shards have different clients")
		}
		bins = min(bins, len(x.Clients[0].Bins))
	}
	for ci := range r.Clients {
		c := r.Clients[ci]
		c.Bins = slices.Clone(c.Bins[:bins])
		hist := newLatencyHist(bins)
		budgets := make([]int, bins)
		for si, x := range runs {
			xc := x.Clients[ci]
			if h := notes[si].Latency[xc.Name]; h != nil {
				hist.merged(h)
			}
			if si > 0 {
				c.Total = addTotals(c.Total, xc.Total)
			}
			for b := range bins {
				if si > 0 {
					c.Bins[b] = addBins(c.Bins[b], xc.Bins[b])
				}
				if xc.Bins[b].Budget >= 0 {
					budgets[b]++
				}
			}
			if si > 0 {
				o := &n.Clients[ci]
				o.Outcomes = addOutcomes(o.Outcomes, notes[si].Clients[ci].Outcomes)
				o.HumanRetries += notes[si].Clients[ci].HumanRetries
				o.MaxLagS = max(o.MaxLagS, notes[si].Clients[ci].MaxLagS)
			}
		}
		for b := range bins {
			c.Bins[b].LatencyP50 = hist.quantile(b, 0.50)
			c.Bins[b].LatencyP99 = hist.quantile(b, 0.99)
			if budgets[b] > 0 {
				// The mean of the shards' means (each of its processes').
				sum := 0.0
				for _, x := range runs {
					if l := x.Clients[ci].Bins[b].Budget; l >= 0 {
						sum += l
					}
				}
				c.Bins[b].Budget = sum / float64(budgets[b])
			}
		}
		r.Clients[ci] = c
	}
	r.DurationS = float64(bins) * r.BinS
	for i := range r.Services {
		r.Services[i].Bins = r.Services[i].Bins[:min(bins, len(r.Services[i].Bins))]
	}
	r.Events = 0
	for _, x := range runs {
		r.Events += x.Events
	}
	hosts := []lab.RoleHost{}
	for si, x := range notes {
		n.Sent, n.WorstCase, n.Refused = n.Sent+x.Sent*b2i(si > 0), n.WorstCase+x.WorstCase*b2i(si > 0), n.Refused+x.Refused*b2i(si > 0)
		n.Interrupted = n.Interrupted || x.Interrupted
		for _, h := range x.Host.Roles {
			h.Role = "shard " + x.Shard
			hosts = append(hosts, h)
		}
	}
	sc := n.Scenario
	sc.Duration = scenarioDuration(r)
	result.Judge(&r, sc)
	for i, note := range n.Services {
		if !note.Measured && i < len(r.Services) {
			r.Services[i].Judgement = runs[0].Services[i].Judgement
		}
	}
	n.Host = lab.JudgeHost(hosts)
	lr := lab.RunResult{Result: r, Host: n.Host}
	lr.MarkInconclusive()
	return lr.Result, n, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// scenarioDuration is r's length as a duration.
func scenarioDuration(r result.Result) time.Duration {
	return time.Duration(math.Round(r.DurationS * 1e9))
}

func addBins(a, b result.ClientBin) result.ClientBin {
	a.Demand += b.Demand
	a.Goodput += b.Goodput
	a.Degraded += b.Degraded
	a.GaveUp = addGiveUps(a.GaveUp, b.GaveUp)
	a.ArrivedOK += b.ArrivedOK
	a.ArrivedFailed += b.ArrivedFailed
	return a
}

func addGiveUps(a, b result.GiveUps) result.GiveUps {
	return result.GiveUps{Attempts: a.Attempts + b.Attempts, Budget: a.Budget + b.Budget, Deadline: a.Deadline + b.Deadline,
		NotRetryable: a.NotRetryable + b.NotRetryable, ServerStop: a.ServerStop + b.ServerStop, Disabled: a.Disabled + b.Disabled,
		Declined: a.Declined + b.Declined, BreakerOpen: a.BreakerOpen + b.BreakerOpen}
}

func addTotals(a, b result.ClientTotal) result.ClientTotal {
	sl := a.SuccessLatencyS*float64(a.Succeeded) + b.SuccessLatencyS*float64(b.Succeeded)
	fl := a.FailureLatencyS*float64(a.Failed) + b.FailureLatencyS*float64(b.Failed)
	out := result.ClientTotal{Requests: a.Requests + b.Requests, Succeeded: a.Succeeded + b.Succeeded, Degraded: a.Degraded + b.Degraded,
		Failed: a.Failed + b.Failed, InFlight: a.InFlight + b.InFlight, Attempts: a.Attempts + b.Attempts, Retries: a.Retries + b.Retries,
		HumanRetries: a.HumanRetries + b.HumanRetries, GaveUp: addGiveUps(a.GaveUp, b.GaveUp)}
	if out.Succeeded > 0 {
		out.SuccessLatencyS = sl / float64(out.Succeeded)
	}
	if out.Failed > 0 {
		out.FailureLatencyS = fl / float64(out.Failed)
	}
	return out
}

func addOutcomes(a, b lab.Outcomes) lab.Outcomes {
	out := a
	out.Errors = map[string]int64{}
	for k, v := range a.Errors {
		out.Errors[k] += v
	}
	for k, v := range b.Errors {
		out.Errors[k] += v
	}
	out.Sent += b.Sent
	out.Succeeded += b.Succeeded
	out.TimedOut += b.TimedOut
	out.Shed += b.Shed
	out.InFlight += b.InFlight
	return out
}
