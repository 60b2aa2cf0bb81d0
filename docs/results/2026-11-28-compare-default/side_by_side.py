# python3 side_by_side.py run1/summary.json run2/summary.json: the two runs'
# maxima, ratios to Cornflakes, and how many ratios agree within 15 %
# (maxima, closed-loop probes, server busy capacities).
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
def index(d):
    return {w['workload']: {s['name']: s for s in w['systems']} for w in d['workloads']}
A, B = index(a), index(b)
print("| workload | system | run 1 max/s | run 2 max/s | run 1 vs cf | run 2 vs cf | ratio change | probe run 1 / run 2 | busy cap. run 1 / run 2 | max below half its probe |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
counts = {'max': [0, 0], 'probe': [0, 0], 'busy': [0, 0]}
def ratio(s, cf, key):
    x, y = s.get(key), cf.get(key)
    return x / y if x and y else None
for wl in A:
    cfa, cfb = A[wl]['cornflakes'], B[wl]['cornflakes']
    for name, sa in A[wl].items():
        sb = B[wl].get(name)
        if sb is None:
            continue
        for k, key in (('max', 'max_achieved_rps'), ('probe', 'probe_rps'), ('busy', 'server_busy_capacity_rps')):
            ra, rb = ratio(sa, cfa, key), ratio(sb, cfb, key)
            if name != 'cornflakes' and ra and rb:
                counts[k][1] += 1
                counts[k][0] += abs(rb / ra - 1) <= 0.15
        ra, rb = ratio(sa, cfa, 'max_achieved_rps'), ratio(sb, cfb, 'max_achieved_rps')
        ch = f"{(rb / ra - 1) * 100:+.0f} %" if ra and rb else "n/a"
        below = "; ".join(x for x in (sa.get('below_probe'), sb.get('below_probe')) if x) or ""
        f = lambda v: f"{v:.0f}" if v else "n/a"
        r = lambda v: f"{v:.2f}x" if v else "n/a"
        print(f"| {wl} | {name} | {f(sa.get('max_achieved_rps'))} | {f(sb.get('max_achieved_rps'))} | {r(ra)} | {r(rb)} | {ch} | {f(sa.get('probe_rps'))} / {f(sb.get('probe_rps'))} | {f(sa.get('server_busy_capacity_rps'))} / {f(sb.get('server_busy_capacity_rps'))} | {'yes' if below else ''} |")
print()
for k, (w, t) in counts.items():
    print(f"{k}: ratios vs cornflakes within 15 % between the runs: {w} of {t}")
