"""Times seed 004's Python simulator on its own two scenarios.

The program is read from the seed document at run time (argv[1]) and is
never stored in this repository. Prints one JSON object: seconds per run
for each tick count, measured in-process (interpreter start-up excluded),
and the program's own summary of each scenario averaged over 40 seeds.
"""
import json
import statistics
import sys
import time

text = open(sys.argv[1], encoding="utf-8").read()
start = text.index("import random\n")
end = text.index('if __name__ == "__main__":')
ns = {}
exec(compile(text[start:end], "seed004", "exec"), ns)
simulate, summarize = ns["simulate_retry_storm"], ns["summarize"]

SCENARIOS = {
    "A": dict(base_backoff_ticks=1, max_backoff_ticks=20, jitter_fraction=0.5),
    "B": dict(base_backoff_ticks=2, max_backoff_ticks=40, jitter_fraction=0.8),
}
COMMON = dict(external_arrival_rate_per_tick=5.0, capacity_per_tick=10, max_retries=5)

out = {"seconds_per_run": {}, "summary": {}}
for ticks, reps in ((1, 2000), (200, 50), (2000, 3), (20000, 1)):
    t0 = time.perf_counter()
    for i in range(reps):
        simulate(ticks=ticks, seed=3 + i, **SCENARIOS["A"], **COMMON)
    out["seconds_per_run"][str(ticks)] = (time.perf_counter() - t0) / reps
for name, kw in SCENARIOS.items():
    runs = [summarize(simulate(ticks=200, seed=s, **kw, **COMMON)) for s in range(1, 41)]
    out["summary"][name] = {k: statistics.mean(r[k] for r in runs) for k in runs[0]}
json.dump(out, sys.stdout, indent=1)
print()
