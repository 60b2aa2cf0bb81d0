#!/usr/bin/env python3
"""Hybrid (first turn) against only-sg (0 B) and only-copy (never): server capacity ratios per repeat, and medians."""
import re, statistics, sys

def summarize(path):
    res = {}
    for blk in open(path).read().split('=== ')[1:]:
        w = re.match(r'repeat \d+ workload (\S+)', blk).group(1)
        rows = {}
        for line in blk.splitlines():
            m = re.match(r'\s+(\d+ B|never)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)', line)
            if m:
                rows[m.group(1)] = float(m.group(3))
        hybrid = [k for k in rows if k not in ('0 B', 'never')][0]
        res.setdefault(w, []).append((rows['0 B'] / rows[hybrid], rows['never'] / rows[hybrid]))
    print(f"{path}: hybrid's server capacity / only-sg's, / only-copy's (per repeat | median)")
    for w, v in res.items():
        a, b = [x[0] for x in v], [x[1] for x in v]
        print(f"  {w:14s} {' '.join('%.3f' % x for x in a)} | {statistics.median(a):.3f}    "
              f"{' '.join('%.3f' % x for x in b)} | {statistics.median(b):.3f}")

for p in sys.argv[1:] or ['fixed-order-turns.txt', 'shuffled-turns.txt']:
    summarize(p)
