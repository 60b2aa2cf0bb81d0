import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
def index(d):
    return {w['workload']: {s['name']: s for s in w['systems']} for w in d['workloads']}
A, B = index(a), index(b)
print("| workload | system | run 1 max/s | run 2 max/s | run 1 vs cf | run 2 vs cf | ratio change | probe run 1 / run 2 | busy cap. run 1 / run 2 |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
within = total = 0
for wl in A:
    cfa, cfb = A[wl]['cornflakes']['max_achieved_rps'], B[wl]['cornflakes']['max_achieved_rps']
    for name, sa in A[wl].items():
        sb = B[wl][name]
        ra, rb = sa['max_achieved_rps'] / cfa, sb['max_achieved_rps'] / cfb
        ch = rb / ra - 1
        if name != 'cornflakes':
            total += 1; within += abs(ch) <= 0.15
        print(f"| {wl} | {name} | {sa['max_achieved_rps']:.0f} | {sb['max_achieved_rps']:.0f} | {ra:.2f}x | {rb:.2f}x | {ch*100:+.0f} % | {sa['probe_rps']:.0f} / {sb['probe_rps']:.0f} | {sa['server_busy_capacity_rps']:.0f} / {sb['server_busy_capacity_rps']:.0f} |")
print(f"\nratios vs cornflakes within 15 % between the runs: {within} of {total}")
