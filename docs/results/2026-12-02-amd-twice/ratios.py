# python3 ratios.py runN/summary.json ...: per workload, Cornflakes over the
# best library (and which), over raw, hybrid over only-sg / only-copy,
# serialize-and-send over not, and the run's median copy bandwidth, as
# `cf compare` computed them (its `ratios` object).
import json, sys

for path in sys.argv[1:]:
    d = json.load(open(path))
    print(path, f"copy bandwidth median {d.get('copy_gbps', {}).get('median', float('nan')) if isinstance(d.get('copy_gbps'), dict) else d.get('copy_gbps')}")
    for w in d["workloads"]:
        r = w["ratios"]
        f = lambda k: f"{r[k]:.2f}" if isinstance(r.get(k), (int, float)) else "-"
        print(f"  {w['workload']:14} best {r.get('best_library', '-'):10} cf/best {f('cornflakes_over_best_library')}  cf/raw {f('cornflakes_over_raw')}  /only-sg {f('cornflakes_over_only_sg')}  /only-copy {f('cornflakes_over_only_copy')}  sas/no-sas {f('sas_over_no_sas')}")
