# Makes the table of README.md from the nine summary.json files: python3 make_table.py
import json,glob,sys
rows=[]
print("| workload | system | offered/s (share of probe) | p50 µs | p99 µs | p99.9 µs | over 50 µs | of them: client gap / server gap / asleep / long batch / none | slow with no span, share of all | client lost | server lost | machine alone, core 0 / 1 |")
print("|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|")
for w in ["ycsb","twitter","cdn"]:
  for s in ["cornflakes","protobuf","flatbuffers"]:
    d=json.load(open(f"{w}-{s}/summary.json"))
    m=" / ".join("%.2f %%"%(100*h['lost_over_20us_share']) for h in d['machine'])
    for i,p in enumerate(d['points']):
      sl=p['slow']; o=p['slow_overlapping']; f=lambda k: "%.0f"%(100*o.get(k,0)/max(sl,1))
      frac=p['offered_rps']/d['probe_rps']
      print(f"| {w} | {s} | {p['offered_rps']:.0f} ({100*frac:.0f} %) | {p['p50_us']:.1f} | {p['p99_us']:.0f} | {p['p999_us']:.0f} | {100*sl/p['completed']:.2f} % | {f('client-gap')} / {f('server-gap')} / {f('server-sleep')} / {f('server-batch')} / {100*p['slow_unexplained']/max(sl,1):.0f} % | {100*p['slow_unexplained']/p['completed']:.3f} % | {100*p['client_lost_share']:.2f} % | {100*p['server_lost_share']:.2f} % | {m if i==0 else ''} |")
