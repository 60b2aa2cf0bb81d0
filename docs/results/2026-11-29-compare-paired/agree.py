# python3 agree.py A/summary.json B/summary.json [...]: for every pair of
# the runs given, how many of the maxima ratios to Cornflakes agree within
# 15 %, with the ratios `cf compare` reports (paired by repeat: the
# geometric mean of each repeat's ratio) and with ratios of the median
# maxima (what it reported before), and which do not.
import itertools, json, math, statistics, sys


def ratios(path, paired):
    d = json.load(open(path))
    out = {}
    for w in d["workloads"]:
        by = {s["name"]: s for s in w["systems"]}
        cf = by["cornflakes"]
        for name, s in by.items():
            if name == "cornflakes" or not s.get("repeats_max_rps"):
                continue
            if paired:
                # Recomputed from the repeats, so that runs from before
                # `vs_cornflakes` existed count too (it is this, rounded).
                logs = [math.log(a / b) for a, b in zip(s["repeats_max_rps"], cf["repeats_max_rps"])]
                out[(w["workload"], name)] = math.exp(sum(logs) / len(logs))
                if "vs_cornflakes" in s:
                    assert abs(s["vs_cornflakes"] - out[(w["workload"], name)]) < 2e-3, (path, name)
            else:
                out[(w["workload"], name)] = statistics.median(s["repeats_max_rps"]) / statistics.median(
                    cf["repeats_max_rps"]
                )
    return out


for paired in (True, False):
    print("paired by repeat (cf compare's ratios):" if paired else "\nratio of the median maxima (before):")
    runs = {p: ratios(p, paired) for p in sys.argv[1:]}
    for a, b in itertools.combinations(runs, 2):
        off = [(k, runs[b][k] / runs[a][k] - 1) for k in runs[a] if k in runs[b]]
        bad = [(k, c) for k, c in off if abs(c) > 0.15]
        print(f"  {a} vs {b}: {len(off) - len(bad)} of {len(off)} within 15 %")
        for (w, s), c in bad:
            print(f"     off: {w} {s} {c * 100:+.1f} %")
