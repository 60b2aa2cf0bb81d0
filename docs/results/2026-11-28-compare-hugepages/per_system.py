"""Each system's maximum in several `cf compare` runs, with its start order.

usage: python3 per_system.py NAME=DIR ... (DIR holds summary.json and log-*.txt[.gz])
"""
import glob, gzip, json, re, sys

def order(d):
    logs = glob.glob(d + '/../log-' + d.rstrip('/').split('/')[-1] + '.txt*')
    o, w, i = {}, None, 0
    for path in logs:
        text = gzip.open(path, 'rt').read() if path.endswith('.gz') else open(path).read()
        for line in text.splitlines():
            m = re.match(r'kv-server: (\S+) on shm .* workload (\S+),', line)
            if m:
                s, wl = m.groups()
                if wl != w:
                    w, i = wl, 0
                i += 1
                o[(wl, s)] = i
    return o

runs = [a.split('=', 1) for a in sys.argv[1:]]
data = [(n, json.load(open(d + '/summary.json')), order(d)) for n, d in runs]
print('| workload | system | start | ' + ' | '.join(n for n, _, _ in data) + ' |')
print('|---|---|---:|' + '---:|' * len(data))
first = data[0][1]
for wi, w in enumerate(first['workloads']):
    for s in w['systems']:
        k = (w['workload'], s['name'])
        vals = []
        for _, summ, _ in data:
            sys_ = next((x for x in summ['workloads'][wi]['systems'] if x['name'] == s['name']), None)
            vals.append(f"{sys_['max_achieved_rps'] / 1e3:.0f} k" if sys_ and sys_['max_achieved_rps'] else '-')
        starts = '/'.join(str(o.get(k, '?')) for _, _, o in data)
        print(f"| {w['workload']} | {s['name']} | {starts} | " + ' | '.join(vals) + ' |')
