"""Per system: start order, maximum and server busy capacity in each run of order.sh."""
import gzip, json, re
runs = ["auto-1", "off-1", "auto-2", "off-2"]
data = {}
order = {}
for r in runs:
    s = json.load(open(f"order/{r}/summary.json"))
    for w in s["workloads"]:
        for x in w["systems"]:
            data.setdefault(x["name"], {})[r] = (x["max_achieved_rps"], x["server_busy_capacity_rps"])
    for line in gzip.open(f"order/{r}.log.gz", "rt"):
        m = re.match(r"\[(\d+)/\d+\] \S+ (\S+): starting server", line)
        if m:
            order.setdefault(m.group(2), {})[r] = int(m.group(1))
print("| system | start | " + " | ".join(f"{r} max / busy cap." for r in runs) + " |")
print("|---|---|" + "---:|" * len(runs))
for name in sorted(data, key=lambda n: order[n][runs[0]]):
    cells = " | ".join(f"{data[name][r][0]/1e3:.0f} k / {data[name][r][1]/1e3:.0f} k" for r in runs)
    starts = "/".join(str(order[name][r]) for r in runs)
    print(f"| {name} | {starts} | {cells} |")
