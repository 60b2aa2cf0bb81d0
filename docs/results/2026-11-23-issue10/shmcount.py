import subprocess, sys, json
rate = sys.argv[1]
p = subprocess.Popen(["/work/wt-udp/target/release/cf","kv-server","--transport","shm","--workload","google:max=4","--addr","/tmp/cfx-count.sock","--core","0","--exit-with-parent"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
p.stdout.readline()
def rep():
    p.stdin.write("\n"); p.stdin.flush(); return json.loads(p.stdout.readline())
a = rep()
out = subprocess.run(["/work/wt-udp/target/release/cf","loadgen","--transport","shm","--workload","google:max=4","--addr","/tmp/cfx-count.sock","--core","1","--rate",rate,"--seconds","2","--warmup","0.5","--timeout-ms","100"], capture_output=True, text=True)
b = rep()
j = json.loads(out.stdout.strip().splitlines()[-1])["points"][0]
print("client: offered", j["offered"], "completed", j["completed"], "timeouts", j["timeouts"], "| server handled", b["handled"]-a["handled"], "received", b["received"]-a["received"], "dropped_full", b["dropped_full"]-a["dropped_full"])
p.stdin.close(); p.wait()
