# python3 side_by_side.py A/summary.json B/summary.json > side_by_side.md:
# two runs of `cf compare`, every system side by side: median maxima, the
# ratio to Cornflakes as the run reports it (`vs_cornflakes`, paired by
# repeat), and how much that ratio moved.
import json, sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("| workload | system | run A max/s | run B max/s | run A vs cf | run B vs cf | ratio change | repeats A | repeats B |")
print("|---|---|---:|---:|---:|---:|---:|---|---|")
for wa, wb in zip(a["workloads"], b["workloads"]):
    sb = {s["name"]: s for s in wb["systems"]}
    for s in wa["systems"]:
        t = sb[s["name"]]
        va, vb = s.get("vs_cornflakes") or 1.0, t.get("vs_cornflakes") or 1.0
        reps = lambda x: "/".join(f"{m / 1000:.0f}k" for m in x["repeats_max_rps"])
        print(
            f"| {wa['workload']} | {s['name']} | {s['max_achieved_rps']:.0f} | {t['max_achieved_rps']:.0f} "
            f"| {va:.2f}x | {vb:.2f}x | {(vb / va - 1) * 100:+.0f} % | {reps(s)} | {reps(t)} |"
        )
