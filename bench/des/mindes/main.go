// Command mindes is a minimal discrete-event simulation of stormguard's
// M/M/1 benchmark model, written directly in Go: the yardstick that issue
// 27 measures the whole simulator against (BENCHMARKS.md, "The whole
// simulator against a minimal Go DES").
//
// The model is one FIFO server with exponential service of mean -mean,
// Poisson arrivals at -rate per second, a client timeout of -timeout per
// attempt and up to -attempts attempts a request with no backoff (an
// attempt that times out is retried at once; the server still serves
// the abandoned one, as stormguard's does), for -horizon of virtual
// time in bins of 1 s. It is about 300 lines: a binary heap of value
// events ordered by time and scheduling number, a FIFO ring of queued
// attempts, one timeout per attempt in a FIFO ring of its own (they all
// fire the same delay after they are set), dropped lazily when it comes up
// for an attempt already answered, requests in a slice with a free list,
// and each bin's p50 and p99 by quickselect.
//
// It draws from the same random streams as `stormguard sim` does for a
// client named -client and a service named -service with -seed, and
// schedules its events in the same order, so on a scenario of this shape
// it follows the simulator's trajectory exactly: TestSameAsSimulator
// checks served requests, mean latency, events and every bin's served
// count, p50 and p99 against sim.Run.
//
// It prints one JSON object: wall_s (the simulation alone), requests,
// served, failed, mean_latency_s and events.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	p := Params{Bin: time.Second, Client: "app", Service: "db"}
	flag.Float64Var(&p.Rate, "rate", 900, "arrivals per second")
	flag.DurationVar(&p.Mean, "mean", time.Millisecond, "mean service time")
	flag.DurationVar(&p.Timeout, "timeout", time.Second, "client timeout per attempt")
	flag.IntVar(&p.MaxAttempts, "attempts", 2, "attempts per request, at most")
	flag.DurationVar(&p.Horizon, "horizon", 100*time.Second, "virtual time simulated")
	flag.Uint64Var(&p.Seed, "seed", 1, "seed")
	flag.StringVar(&p.Client, "client", p.Client, "client name (picks the random streams)")
	flag.StringVar(&p.Service, "service", p.Service, "service name (picks the random streams)")
	flag.Parse()
	if flag.NArg() > 0 || !(p.Rate > 0) || p.Mean <= 0 || p.Timeout <= 0 || p.MaxAttempts < 1 || p.Horizon <= 0 {
		fmt.Fprintln(os.Stderr, "mindes: want -rate > 0, -mean, -timeout and -horizon above 0, -attempts ≥ 1 and no arguments")
		os.Exit(2)
	}
	t0 := time.Now()
	r := Run(p)
	wall := time.Since(t0).Seconds()
	json.NewEncoder(os.Stdout).Encode(map[string]any{"wall_s": wall, "requests": r.Requests, "served": r.Served,
		"failed": r.Failed, "mean_latency_s": r.LatencyS, "events": r.Events})
}
