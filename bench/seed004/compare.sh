#!/usr/bin/env bash
# Times seed 004's Python program and stormguard's simulator on the same
# model and parameters (examples/seed004.yaml, scenario A: 5 arrivals and
# 10 admissions per tick, up to 5 retries with ±50 % jittered exponential
# backoff) at 1, 200, 2,000 and 20,000 ticks, and prints the speed ratio,
# then splits each program's cost into a per-run part (the 1-tick run) and a
# per-tick part.
#
# The Python program is read from the seed document at run time; nothing of
# it is stored in this repository. Usage, from the repository root:
#
#   bash bench/seed004/compare.sh [path/to/004_….txt]
set -euo pipefail
cd "$(dirname "$0")/../.."
seed="${1:-$(ls ../shared/seeds/004_*.txt 2>/dev/null | head -1)}"
if [ -z "$seed" ] || [ ! -f "$seed" ]; then
  echo "compare.sh: seed 004 not found; pass its path" >&2; exit 1
fi
py=$(python3 bench/seed004/time_python.py "$seed")
go=$(go test -run '^$' -bench 'Seed004' -benchtime 2s ./sim/)
python3 - "$py" "$go" <<'PY'
import json, re, sys
py = json.loads(sys.argv[1])["seconds_per_run"]
go = {m.group(1): float(m.group(2)) / 1e9
      for m in re.finditer(r"BenchmarkSeed004/ticks=(\d+)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op", sys.argv[2])}
print(f"{'ticks':>7} {'python s/run':>13} {'stormguard s/run':>17} {'ratio':>7}")
for ticks in sorted(go, key=int):
    p, g = py[ticks], go[ticks]
    print(f"{ticks:>7} {p:>13.6f} {g:>17.6f} {p / g:>6.1f}×")
p1, g1 = py["1"], go["1"]
print()
print(f"per run (1 tick):      python {p1 * 1e6:8.1f} µs   stormguard {g1 * 1e6:8.1f} µs")
print(f"per tick, 200 ticks:   python {(py['200'] - p1) / 199 * 1e6:8.2f} µs   stormguard {(go['200'] - g1) / 199 * 1e6:8.2f} µs")
print(f"100× at 200 ticks needs a stormguard run of {py['200'] / 100 * 1e6:.1f} µs")
PY
