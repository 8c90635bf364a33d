// Package bench measures stormguard against the retry libraries Go services
// use, in one run, so the figures compare as ratios on a noisy machine.
//
// It is a module of its own so that users of stormguard never download the
// peer libraries. The benchmark names are stable: results are compared over
// time by them (see BENCHMARKS.md at the repository root).
//
//	go test -run '^$' -bench . -benchmem -count 5 ./... | tee new.txt
//
// That gives levels. A claim that one library is faster than another is
// made from paired, alternating runs (A, B, A, B …), whose ratios a noisy
// machine moves less than grouped -count runs; from the repository root:
//
//	scripts/bench-paired -B -m cpu-ns/op -C bench 'BenchmarkRetrySuccess$/^aws$' 'BenchmarkRetrySuccess$/^stormguard$'
//
// The retry benchmarks report CPU time per operation (cpu-ns/op, and
// cpu-ns/attempt in the failing ones) beside the wall clock: on a shared
// machine it is the steadier figure.
package bench
