# python3 agree.py A/summary.json B/summary.json [...]: for every pair of
# the runs given, how many maxima ratios to Cornflakes agree within 15 %,
# with the geometric mean over all repeats (cf compare before 30153b3) and
# with stalled repeats left out (since 30153b3: a repeat below half the
# system's median maximum, for either system of the pair). Recomputed from
# `repeats_max_rps`, so that runs of either build count alike.
import itertools, json, math, statistics, sys

STALLED = 0.5


def stalled(maxima):
    if len(maxima) < 2:
        return set()
    m = statistics.median(maxima)
    return {i for i, x in enumerate(maxima) if x < STALLED * m}


def ratio(a, b, leave_out):
    pairs = [(i, math.log(x / y)) for i, (x, y) in enumerate(zip(a, b)) if x > 0 and y > 0]
    skip = stalled(a) | stalled(b) if leave_out else set()
    clean = [l for i, l in pairs if i not in skip] or [l for _, l in pairs]
    return math.exp(sum(clean) / len(clean))


def ratios(path, leave_out):
    out = {}
    for w in json.load(open(path))["workloads"]:
        by = {s["name"]: s for s in w["systems"]}
        cf = by["cornflakes"]["repeats_max_rps"]
        for name, s in by.items():
            if name != "cornflakes" and s.get("repeats_max_rps"):
                out[(w["workload"], name)] = ratio(s["repeats_max_rps"], cf, leave_out)
    return out


for leave_out in (False, True):
    print("stalled repeats left out (cf compare since 30153b3):" if leave_out else "geometric mean over every repeat (before):")
    runs = {p: ratios(p, leave_out) for p in sys.argv[1:]}
    for a, b in itertools.combinations(runs, 2):
        off = [(k, runs[b][k] / runs[a][k] - 1) for k in runs[a] if k in runs[b]]
        bad = [(k, c) for k, c in off if abs(c) > 0.15]
        print(f"  {a} vs {b}: {len(off) - len(bad)} of {len(off)} within 15 %")
        for (w, s), c in bad:
            print(f"     off: {w} {s} {c * 100:+.1f} %")
