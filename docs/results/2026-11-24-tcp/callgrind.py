#!/usr/bin/env python3
"""Server instructions per request, by callgrind: each system's kv-server
under callgrind (instrumentation off during the preload), a fixed open-loop
load from `cf loadgen` (every response checked), then total Ir / requests
handled. Instruction counts do not depend on the machine's load."""
import json, re, subprocess, sys, time

CF = sys.argv[1]
OUT = sys.argv[2]
workloads = sys.argv[3].split()
systems = sys.argv[4].split(",")
rate = sys.argv[5] if len(sys.argv) > 5 else "1500"

for wl in workloads:
    for system in systems:
        tag = f"{system}.{wl.replace(':', '_').replace(',', '_').replace('=', '')}"
        cgout = f"{OUT}/callgrind.{tag}.out"
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={cgout}",
             CF, "kv-server", "--system", system, "--transport", "tcp", "--addr", "127.0.0.1:0",
             "--workload", wl, "--core", "0", "--exit-with-parent"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(f"{OUT}/server.{tag}.err", "w"), text=True)
        line = server.stdout.readline()
        if not line.startswith("READY "):
            print(f"{wl} {system}: server did not start: {line!r}", flush=True)
            server.kill(); continue
        addr = line.split()[1]
        subprocess.run(["callgrind_control", "-i", "on", str(server.pid)], check=True, capture_output=True)
        lg = subprocess.run([CF, "loadgen", "--system", system, "--transport", "tcp", "--addr", addr,
                             "--workload", wl, "--rate", rate, "--seconds", "3", "--warmup", "0.5", "--core", "1"],
                            capture_output=True, text=True)
        report = json.loads(lg.stdout.strip().splitlines()[-1])
        # The counters, then a dump of what was collected, then stop.
        server.stdin.write("\n"); server.stdin.flush()
        # An idle datapath server under valgrind may not wake from its
        # timed wait: a connection (accepted, closed) wakes it to answer.
        import select, socket
        host, port = addr.rsplit(":", 1)
        while not select.select([server.stdout], [], [], 0.5)[0]:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
            except OSError:
                pass
        stats = json.loads(server.stdout.readline())
        subprocess.run(["callgrind_control", "-d", str(server.pid)], check=True, capture_output=True)
        subprocess.run(["callgrind_control", "-i", "off", str(server.pid)], capture_output=True)
        server.stdin.close()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill(); server.wait()
        import glob
        total = 0
        for path in glob.glob(cgout + ".1"):
            with open(path) as f:
                for l in f:
                    if l.startswith("summary:"):
                        total += int(l.split()[1])
        handled = stats["handled"]
        print(json.dumps({"workload": wl, "system": system, "server_instructions": total, "handled": handled,
                          "instructions_per_request": round(total / max(handled, 1)),
                          "loadgen_errors": report["errors"], "loadgen_timeouts": report["timeouts"],
                          "completed": report["points"][0]["completed"]}), flush=True)
