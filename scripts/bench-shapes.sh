#!/usr/bin/env bash
# Runs the serialization micro-benchmark (crates/cornflakes-bench,
# benches/shapes.rs) pinned to one CPU, RUNS times, then prints a table:
# per shape and operation, each system's median time in ns and
# "fastest baseline / Cornflakes" (above 1: Cornflakes is faster).
#
# Each cell is the median of the RUNS criterion medians: this machine is a
# shared VM whose speed drifts between runs in both directions (other
# sessions' load slows it, idle periods speed it up), so the middle run of
# runs spread out in time is the most repeatable figure. The "spread"
# column is the largest (max/min - 1) over the row's cells.
#
# Usage: scripts/bench-shapes.sh [extra criterion arguments, e.g. a filter]
#        scripts/bench-shapes.sh --table-only   (re-print the last results)
# Environment: RUNS (default 3), BENCH_CPU (default 1),
#              MEASURE_SECS (default 1.5), WARMUP_SECS (default 0.5).
# Takes about 2 minutes per run (48 benchmarks).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
runs="${RUNS:-3}"

if [ "${1:-}" != "--table-only" ]; then
    # Build once and run that binary in every run, so that all runs measure
    # the same code even if sources change meanwhile.
    bench_bin="$(cargo bench -p cornflakes-bench --bench shapes --no-run --message-format=json \
        | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "shapes" and m.get("executable"):
        print(m["executable"])')"
    echo "bench binary: $bench_bin"
    if [ -d "$target/criterion" ]; then
        find "$target/criterion" -type d -name 'cf-run*' -prune -exec rm -rf {} +
    fi
    for k in $(seq 1 "$runs"); do
        # Times are only meaningful on an otherwise idle machine: report the load.
        echo "run $k/$runs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
        CRITERION_HOME="$target/criterion" taskset -c "${BENCH_CPU:-1}" "$bench_bin" --bench \
            --warm-up-time "${WARMUP_SECS:-0.5}" --measurement-time "${MEASURE_SECS:-1.5}" \
            --save-baseline "cf-run$k" "$@"
    done
    echo "done, load: $(cut -d' ' -f1-3 /proc/loadavg)"
fi

python3 - "$target/criterion" <<'PY'
import glob, json, os, statistics, sys

root = sys.argv[1]
shapes = ["a-1x64", "b-1x4096", "c-4x1024", "d-16x256", "e-8x32", "f-nested"]
ops = ["serialize", "decode"]
systems = ["cornflakes", "prost", "flatbuffers", "capnp"]

def medians(group, system):
    out = []
    for path in glob.glob(os.path.join(root, group, system, "cf-run*", "estimates.json")):
        with open(path) as f:
            out.append(json.load(f)["median"]["point_estimate"])
    return out

nruns = 0
print()
print("Median time per operation (ns), criterion, median of the runs' medians;")
print("ratio = fastest baseline / cornflakes (>1: cornflakes faster); spread = worst max/min - 1 in the row")
print()
print("| shape | op | " + " | ".join(systems) + " | fastest baseline | ratio | spread |")
print("|---|---|" + "---:|" * len(systems) + "---|---:|---:|")
for shape in shapes:
    for op in ops:
        group = f"{shape}-{op}"
        ms = {s: medians(group, s) for s in systems}
        if not any(ms.values()):
            continue
        nruns = max(nruns, *(len(v) for v in ms.values()))
        t = {s: statistics.median(v) if v else None for s, v in ms.items()}
        spread = max((max(v) / min(v) - 1 for v in ms.values() if v), default=0)
        cells = [f"{t[s]:.1f}" if t[s] is not None else "-" for s in systems]
        base = {s: t[s] for s in systems[1:] if t[s] is not None}
        if base and t["cornflakes"]:
            best = min(base, key=base.get)
            ratio = f"{base[best] / t['cornflakes']:.2f}"
        else:
            best, ratio = "-", "-"
        print(f"| {shape} | {op} | " + " | ".join(cells) + f" | {best} | {ratio} | {spread:.0%} |")
print()
print(f"({nruns} runs)")
PY
