#!/usr/bin/env python3
"""Per-operation instruction counts per source line (or function) of one
benchmark case, from the two cachegrind runs scripts/bench-cachegrind.sh
keeps: (I_hi - I_lo) / (hi - lo) for every line, start-up cancelled out.

Usage: scripts/bench-cg-lines.py SYSTEM SHAPE OP [--lo 1000] [--hi 11000]
                                  [--by line|function] [--top 40]
Reads target/cachegrind/SYSTEM-SHAPE-OP-{lo,hi}.out.
"""
import argparse
import collections
import os
import re

def load(path, by):
    counts = collections.Counter()
    fl = fn = None
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("fl="):
                fl = line[3:]
            elif line.startswith("fn="):
                fn = line[3:]
            elif line and line[0].isdigit():
                lineno, ir = line.split()[:2]
                key = (fl, int(lineno)) if by == "line" else (fn, 0)
                counts[key] += int(ir)
    return counts

def source(path, lineno, cache={}):
    if path not in cache:
        try:
            with open(path) as f:
                cache[path] = f.read().splitlines()
        except OSError:
            cache[path] = []
    lines = cache[path]
    return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""

def short(path):
    path = re.sub(r".*/registry/src/[^/]+/", "", path)
    path = re.sub(r"^/rustc/[0-9a-f]+/", "", path)
    return re.sub(r".*/crates/", "", path)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("system"); ap.add_argument("shape"); ap.add_argument("op")
    ap.add_argument("--lo", type=int, default=1000); ap.add_argument("--hi", type=int, default=11000)
    ap.add_argument("--by", choices=["line", "function"], default="line")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "..", "target", "cachegrind"))
    a = ap.parse_args()
    stem = os.path.join(a.dir, f"{a.system}-{a.shape}-{a.op}")
    lo, hi = load(f"{stem}-{a.lo}.out", a.by), load(f"{stem}-{a.hi}.out", a.by)
    n = a.hi - a.lo
    per = {k: (hi[k] - lo.get(k, 0)) / n for k in hi}
    total = sum(per.values())
    print(f"{a.system} {a.shape} {a.op}: {total:.1f} instructions per operation")
    for (where, lineno), v in sorted(per.items(), key=lambda kv: -kv[1])[: a.top]:
        if v < 0.5:
            break
        if a.by == "line":
            print(f"{v:8.1f}  {short(where)}:{lineno}  {source(where, lineno)[:90]}")
        else:
            print(f"{v:8.1f}  {where[:150]}")

main()
