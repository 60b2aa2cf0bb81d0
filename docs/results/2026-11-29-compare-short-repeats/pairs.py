# python3 pairs.py: every pair of run1-run4 side by side: how many of the 38
# maxima ratios to Cornflakes agree within 15 % (as side_by_side.py counts
# them), and which do not, unrounded.
import itertools, json
def ratios(run):
    d = json.load(open(f"{run}/summary.json"))
    out = {}
    for w in d["workloads"]:
        by = {s["name"]: s.get("max_achieved_rps") for s in w["systems"]}
        cf = by["cornflakes"]
        for name, v in by.items():
            if name != "cornflakes" and v and cf:
                out[(w["workload"], name)] = v / cf
    return out
runs = {r: ratios(r) for r in ("run1", "run2", "run3", "run4")}
for a, b in itertools.combinations(runs, 2):
    off = [(k, runs[b][k] / runs[a][k] - 1) for k in runs[a] if k in runs[b]]
    bad = [(k, c) for k, c in off if abs(c) > 0.15]
    print(f"{a} vs {b}: {len(off) - len(bad)} of {len(off)} within 15 %")
    for (w, s), c in bad:
        print(f"   off: {w} {s} {c * 100:+.1f} %")
