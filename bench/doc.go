// Package bench measures stormguard against the retry libraries Go services
// use, in one run, so the figures compare as ratios on a noisy machine.
//
// It is a module of its own so that users of stormguard never download the
// peer libraries. The benchmark names are stable: results are compared over
// time by them (see BENCHMARKS.md at the repository root).
//
//	go test -run '^$' -bench . -benchmem -count 5 ./... | tee new.txt
package bench
