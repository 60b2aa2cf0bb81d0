#!/usr/bin/env bash
# Counts instructions per operation of every case of the serialization
# micro-benchmark (crates/cornflakes-bench) under cachegrind: runs
# `shape_iters` at two iteration counts and prints (I_hi - I_lo) / (hi - lo),
# which subtracts start-up, setup and the correctness check. Cachegrind
# counts are repeatable, unlike times on this (counter-less) machine.
#
# Usage: scripts/bench-cachegrind.sh [SYSTEM...]
# Environment: LO (default 1000), HI (default 11000), JOBS (default 2).
# Keeps each run's output in target/cachegrind/; to see where one case's
# instructions go per operation:
#   cg_diff target/cachegrind/S-SHAPE-OP-$LO.out target/cachegrind/S-SHAPE-OP-$HI.out > d.out
#   cg_annotate d.out     (counts are for HI - LO operations)
# Takes 2-4 minutes.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"

# The bench profile: release code generation plus debug info for cg_annotate.
cargo build --profile bench -p cornflakes-bench --bin shape_iters
mkdir -p "$target/cachegrind"

python3 - "$target/release/shape_iters" "$target/cachegrind" "${LO:-1000}" "${HI:-11000}" "${JOBS:-2}" "$@" <<'PY'
import concurrent.futures, re, subprocess, sys

binary, outdir, lo, hi, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
shapes = ["a-1x64", "b-1x4096", "c-4x1024", "d-16x256", "e-8x32", "f-nested"]
ops = ["serialize", "decode"]
systems = sys.argv[6:] or ["cornflakes", "prost", "flatbuffers", "capnp"]

def irefs(system, shape, op, iters):
    out = f"{outdir}/{system}-{shape}-{op}-{iters}.out"
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
           binary, "--system", system, "--shape", shape, "--op", op, "--iters", str(iters)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{res.stderr}")
    m = re.search(r"I\s+refs:\s+([\d,]+)", res.stderr)
    return int(m.group(1).replace(",", ""))

jobs_list = [(s, sh, op, n) for sh in shapes for op in ops for s in systems for n in (lo, hi)]
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
    counts = dict(zip(jobs_list, ex.map(lambda j: irefs(*j), jobs_list)))

print()
print(f"Instructions per operation, cachegrind: (I({hi}) - I({lo})) / {hi - lo}; "
      "ratio = fewest-instruction baseline / cornflakes")
print()
print("| shape | op | " + " | ".join(systems) + (" | fewest baseline | ratio |" if "cornflakes" in systems else " |"))
print("|---|---|" + "---:|" * len(systems) + ("---|---:|" if "cornflakes" in systems else ""))
for sh in shapes:
    for op in ops:
        per = {s: (counts[(s, sh, op, hi)] - counts[(s, sh, op, lo)]) / (hi - lo) for s in systems}
        row = f"| {sh} | {op} | " + " | ".join(f"{per[s]:.0f}" for s in systems) + " |"
        base = {s: v for s, v in per.items() if s != "cornflakes"}
        if "cornflakes" in per and base:
            best = min(base, key=base.get)
            row += f" {best} | {base[best] / per['cornflakes']:.2f} |"
        print(row)
PY
