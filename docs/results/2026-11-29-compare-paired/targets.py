# python3 targets.py RUN/summary.json ...: the targets per run, as
# `cf compare` computes them since 3d1c903 (ratios paired by repeat; the
# best library is the one Cornflakes leads least). run1 and run2 were made
# by 8f7e953, whose tables picked the best library by its median maximum.
import json, math, sys

LIBS = ["protobuf", "flatbuffers", "capnp", "rkyv"]
print(f"{'run':<6} {'workload':<14} {'best lib':>16} {'/raw':>6} {'/only-sg':>9} {'/only-copy':>11} {'sas':>6}")
for path in sys.argv[1:]:
    d = json.load(open(path))
    for w in d["workloads"]:
        rep = {s["name"]: s.get("repeats_max_rps") for s in w["systems"]}
        cf = rep["cornflakes"]

        def over(name):
            v = rep.get(name)
            if not v:
                return None
            return math.exp(sum(math.log(a / b) for a, b in zip(cf, v)) / len(v))

        libs = [(over(l), l) for l in LIBS if rep.get(l)]
        best, lib = min(libs)
        fmt = lambda x: f"{x:.2f}" if x else "-"
        print(
            f"{path.split('/')[-2]:<6} {w['workload']:<14} {fmt(best) + ' ' + lib:>16} {fmt(over('raw')):>6} "
            f"{fmt(over('cornflakes-only-sg')):>9} {fmt(over('cornflakes-only-copy')):>11} {fmt(over('cornflakes-no-sas')):>6}"
        )
