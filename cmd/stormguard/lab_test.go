package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/sim/result"
)

// labTempDir is a temporary directory removed when the test ends, made
// by lab.MkdirTemp: if the test binary is killed first (by -test.timeout),
// the next lab run removes it.
func labTempDir(t *testing.T) string {
	t.Helper()
	dir, err := lab.MkdirTemp("cmdtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// useLabBinary builds this command into a temporary directory and makes
// the lab start its roles with it (the test binary itself is not
// stormguard).
func useLabBinary(t *testing.T) {
	t.Helper()
	bin := filepath.Join(labTempDir(t), "stormguard")
	gotool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gotool); err != nil {
		gotool = "go"
	}
	if out, err := exec.Command(gotool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building stormguard: %v\n%s", err, out)
	}
	old := labExecutable
	labExecutable = bin
	t.Cleanup(func() { labExecutable = old })
}

func TestLabHelp(t *testing.T) {
	for _, args := range [][]string{{"lab", "--help"}, {"help", "lab"}} {
		code, out, errs := runCmd(t, t.Context(), args...)
		if code != exitOK || !strings.HasPrefix(out, "Usage: stormguard lab") || errs != "" {
			t.Errorf("%q: exit %d, stdout %.40q, stderr %q", args, code, out, errs)
		}
	}
	if _, out, _ := runCmd(t, t.Context(), "help"); !strings.Contains(out, "stormguard lab [FILE]") {
		t.Error("the main help does not list lab")
	}
}

func TestLabUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"lab", "a.yaml", "b.yaml"}, {"lab", "--bogus"}, {"lab", "--seed", "x"}} {
		if code, _, errs := runCmd(t, t.Context(), args...); code != exitUsage || !strings.Contains(errs, "stormguard: lab") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs)
		}
	}
}

// TestLabRejectsScenario: a scenario the lab cannot run fails before any
// process starts, naming the reason.
func TestLabRejectsScenario(t *testing.T) {
	file := filepath.Join("..", "..", "examples", "three-tier.yaml")
	code, _, errs := runCmd(t, t.Context(), "lab", file)
	if code != exitUsage || !strings.Contains(errs, "lab: ") || !strings.Contains(errs, "run naive") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

func TestLabRoleErrors(t *testing.T) {
	code, _, errs := runCmd(t, t.Context(), "lab", "backend", "--config", filepath.Join(t.TempDir(), "missing.json"))
	if code != exitError || !strings.Contains(errs, "lab backend") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// quickLab is a small system the lab runs in a few seconds: clients call
// the backend directly; the network is cut for a second.
const quickLab = `name: quick
description: a quick lab run
duration: 4s
clients:
  - {name: users, target: db, arrivals: {kind: poisson, rate: 80}, timeout: 300ms, policy: {preset: naive, max_attempts: 2}}
services:
  - {name: db, workers: 4, service_time: {kind: exponential, mean: 10ms}}
triggers:
  - {kind: outage, target: db, at: 1s, duration: 1s, mode: drop}
`

// TestLabQuickRun runs a small scenario with real processes: the JSON has
// the keys of stormguard sim and the lab's own, every request ended in
// one outcome, and the report has the sim report's files and the lab's.
func TestLabQuickRun(t *testing.T) {
	useLabBinary(t)
	dir := labTempDir(t)
	file := filepath.Join(dir, "quick.yaml")
	if err := os.WriteFile(file, []byte(quickLab), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := filepath.Join(dir, "report")
	code, out, errs := runCmd(t, t.Context(), "lab", file, "--json", "--out", rep)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got lab.Output
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"runs":`, `"name":`, `"verdict":`, `"recovery_s":`, `"sim_vs_lab":`, `"outcomes":`} {
		if !strings.Contains(out, key) {
			t.Errorf("the JSON lacks %s", key)
		}
	}
	if got.Scenario != "quick" || len(got.Runs) != 1 || len(got.Sim) != 1 || len(got.Comparisons) != 1 || len(got.Outcomes) != 1 {
		t.Fatalf("output: scenario %q, %d runs, %d sim, %d comparisons, %d outcomes",
			got.Scenario, len(got.Runs), len(got.Sim), len(got.Comparisons), len(got.Outcomes))
	}
	o := got.Outcomes[0].Outcomes
	if err := o.Check(); err != nil || o.Sent == 0 {
		t.Errorf("outcomes %s: %v", o, err)
	}
	if o.Errors["connection reset"]+o.Errors["connection closed"]+o.Errors["connection refused"] == 0 {
		t.Errorf("the cut caused no connection errors: %s", o)
	}
	if r := got.Runs[0]; r.BinS != 0.1 || len(r.Clients) != 1 || len(r.Services) != 1 || len(r.Clients[0].Bins) != 40 {
		t.Errorf("run: bin %v, %d clients, %d services", r.BinS, len(r.Clients), len(r.Services))
	}
	for _, name := range []string{"index.html", "summary.json", "quick.csv", "quick.png", "lab.png", "lab.json", "compare.csv"} {
		if _, err := os.Stat(filepath.Join(rep, name)); err != nil {
			t.Errorf("report: %v", err)
		}
	}
	for _, p := range got.Outcomes[0].Procs {
		if p.Addr != "" && !strings.HasPrefix(p.Addr, "127.0.0.1:") {
			t.Errorf("%s listened on %s", p.Role, p.Addr)
		}
	}
}

// TestLabInconclusiveOutput: a run on a starved host shows as
// inconclusive, with the figures, in the table, the machine's lines and
// the comparison, and its verdict is not compared with the simulator's.
func TestLabInconclusiveOutput(t *testing.T) {
	rec := 0.0
	reason := "host starved: timers 38 ms late at p99, service time 2.10× nominal"
	starved := lab.RunResult{Result: result.Result{Name: "stormguard", Judgement: result.Judgement{Verdict: "metastable", Why: "goodput was still below 90% of demand at the end"},
		BinS: 1, DurationS: 2, Clients: []result.ClientSeries{{Name: "users", Bins: make([]result.ClientBin, 2)}}},
		Host: lab.Host{Starved: true, Reason: reason}}
	// What RunScenario does to a starved run.
	starved.Host.MeasuredVerdict, starved.Result.Verdict = "metastable", lab.VerdictInconclusive
	starved.Result.Why = "inconclusive (" + reason + "); the lab measured metastable: goodput was still below 90% of demand at the end"
	ok := lab.RunResult{Result: result.Result{Name: "naive", Judgement: result.Judgement{Verdict: "stable", RecoveryS: &rec}, BinS: 1, DurationS: 2,
		Clients: []result.ClientSeries{{Name: "users", Bins: make([]result.ClientBin, 2)}}},
		Host: lab.Host{Reason: "host ok: timers 0.8 ms late at p99, service time 1.00× nominal"}}
	var out lab.Output
	out.Add(ok, result.Result{Name: "naive", Judgement: result.Judgement{Verdict: "stable", RecoveryS: &rec}})
	out.Add(starved, result.Result{Name: "stormguard", Judgement: result.Judgement{Verdict: "recovered", RecoveryS: &rec}})
	var b strings.Builder
	printLabTable(&b, out, nil, time.Second)
	printLab(&b, out)
	// The text wraps at 100 columns: compare with the line breaks undone.
	text := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"stormguard inconclusive",
		"stormguard: inconclusive (host starved: timers 38 ms late at p99, service time 2.10× nominal); the lab measured metastable",
		"stormguard: host starved: timers 38 ms late at p99, service time 2.10× nominal;",
		"naive: host ok: timers 0.8 ms late at p99, service time 1.00× nominal;",
		"stormguard: lab inconclusive (host starved: timers 38 ms late at p99, service time 2.10× nominal), sim recovered; not compared",
		"Not judged: stormguard (inconclusive): the evidence does not decide (see why); an inconclusive run measured a starved machine: run it again on a quieter one.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q:\n%s", want, b.String())
		}
	}
	if c := out.Comparisons[1]; c.Within || !c.Inconclusive {
		t.Errorf("comparison of the starved run: within %v, inconclusive %v", c.Within, c.Inconclusive)
	}
}
