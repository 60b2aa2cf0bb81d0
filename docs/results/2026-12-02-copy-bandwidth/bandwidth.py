# python3 bandwidth.py A/summary.json [B/summary.json ...]: per workload,
# the machine's cross-core copy bandwidth during it (cf compare's probe after
# each point) and Cornflakes' maximum and ratio to the best library, run by
# run; then, over every repeat of every run, how each system's maximum
# relative to its own median moves with the bandwidth of that repeat
# (the slope of log(max) on log(GB/s): 1 = moves as the bandwidth does,
# 0 = does not move with it).
import json, math, statistics, sys
from collections import defaultdict

runs = {p: json.load(open(p)) for p in sys.argv[1:]}
print("workload        run                         copy GB/s (p25-p75)   cornflakes max   / best library")
for p, s in runs.items():
    for w in s["workloads"]:
        c = w.get("copy_gbps") or {}
        by = {x["name"]: x for x in w["systems"]}
        best = w["ratios"].get("best_library")
        print(f"{w['workload']:<15} {p:<27} {c.get('median', float('nan')):5.1f} ({c.get('p25', float('nan')):.1f}-{c.get('p75', float('nan')):.1f})"
              f"     {by['cornflakes'].get('max_achieved_rps', float('nan')):>12.0f}   {w['ratios'].get('cornflakes_over_best_library', float('nan')):.2f} ({best})")
    print(f"{'(the run)':<15} {p:<27} {s.get('copy_gbps', {}).get('median', float('nan')):5.1f}")

# Slope of log(max / the system's median over all runs) on log(GB/s / median GB/s), per workload and system.
print("\nslope of each repeat's maximum on its copy bandwidth (log-log, over every repeat of the runs given):")
pts = defaultdict(list)
for s in runs.values():
    for w in s["workloads"]:
        for x in w["systems"]:
            for m, g in zip(x.get("repeats_max_rps") or [], x.get("repeats_copy_gbps") or []):
                if m and g and m > 0 and g > 0:
                    pts[(w["workload"], x["name"])].append((math.log(g), math.log(m)))
for w in dict.fromkeys(k[0] for k in pts):
    row = []
    for (ww, name), xy in pts.items():
        if ww != w or len(xy) < 3:
            continue
        mx = statistics.mean(a for a, _ in xy); my = statistics.mean(b for _, b in xy)
        sxx = sum((a - mx) ** 2 for a, _ in xy)
        slope = sum((a - mx) * (b - my) for a, b in xy) / sxx if sxx > 0 else float("nan")
        row.append(f"{name} {slope:+.2f}")
    print(f"  {w}: " + ", ".join(row))
