# Prints each cf tails point of the spin A/B (run.sh) and the medians per build and load.
import json, glob, os, statistics
here = os.path.dirname(os.path.abspath(__file__))
rows = {}
for f in sorted(glob.glob(os.path.join(here, '*.json'))):
    name = os.path.basename(f)[:-5]           # ab-A-1, ab2-C-3, ab2-pb-A-1
    parts = name.split('-')
    system = 'protobuf' if 'pb' in parts else 'cornflakes'
    build = 'old' if parts[-2] == 'A' else 'new'
    for p in json.load(open(f))['points']:
        key = (system, build, round(p['offered_rps'] / 1e3))
        rows.setdefault(key, []).append((100 * p['slow'] / p['completed'], p['p99_us'], p['p999_us'], p['server_sleeps']))
print('system build load(k/s) points | median: slow % p99 µs p99.9 µs sleeps per point')
for key in sorted(rows):
    v = rows[key]
    med = lambda i: statistics.median(x[i] for x in v)
    print(*key, len(v), '|', f'{med(0):.2f}', f'{med(1):.0f}', f'{med(2):.0f}', f'{med(3):.0f}')
