# python3 ratios.py A/summary.json [B/summary.json ...]: the ratios of each run, side by side.
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:]]
keys = ["cornflakes_over_best_library", "cornflakes_over_raw", "cornflakes_over_only_sg", "cornflakes_over_only_copy", "sas_over_no_sas"]
for i, w in enumerate(runs[0]["workloads"]):
    print(f"{w['workload']}:")
    for k in keys:
        vals = []
        for r in runs:
            rt = r["workloads"][i]["ratios"]
            if k in rt:
                v = rt[k]
                extra = f" ({rt['best_library']})" if k == "cornflakes_over_best_library" else ""
                vals.append(f"{v:.2f}{extra}")
        if vals:
            print(f"  {k}: {' / '.join(vals)}")
    tot = []
    for r in runs:
        ws = r["workloads"][i]
        tot.append(f"errors {sum(s['errors'] for s in ws['systems'])} timeouts {sum(s['timeouts'] for s in ws['systems'])} copy {ws['copy_gbps']['median']} GB/s")
    print("  " + " | ".join(tot))
