# Starts `cf kv-server --transport udp` (google:max=4) under parent control, asks for its report
# (pool bytes, datapath counters) and VmRSS, floods N 9-byte datagrams as fast as one socket sends, asks again.
import subprocess, socket, sys, time, json, os
n = int(sys.argv[1]); sockbuf = sys.argv[2] if len(sys.argv) > 2 else None
args = ["/work/wt-udp/target/release/cf", "kv-server", "--transport", "udp", "--workload", "google:max=4",
        "--addr", "127.0.0.1:0", "--core", "0", "--exit-with-parent"]
if sockbuf: args += ["--udp-socket-buffer", sockbuf]
p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
addr = p.stdout.readline().split()[1]; host, port = addr.rsplit(":", 1)
def rep(label):
    p.stdin.write("\n"); p.stdin.flush(); r = json.loads(p.stdout.readline())
    rss = [l for l in open(f"/proc/{p.pid}/status") if l.startswith("VmRSS")][0].split()[1]
    print(f"{label}: VmRSS {int(rss)/1024:.1f} MiB, pool {r['pool_bytes']/2**20:.1f} MiB, live slots {r['pool_live_slots']}, "
          f"received {r['received']}, malformed {r['malformed']}, dropped_no_buffer {r['dropped_no_buffer']}, "
          f"recv_held_back {r['transport']['recv_held_back']}, fixed_buffer_updates {r['transport']['fixed_buffer_updates']}")
rep("before the flood")
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
pkts = [i.to_bytes(4, 'little') + b'\0\0\0\0x' for i in range(1024)]
t = time.time(); a = (host, int(port))
for i in range(n): s.sendto(pkts[i & 1023], a)
print(f"sent {n} datagrams of 9 bytes in {time.time()-t:.2f} s")
time.sleep(1); rep("1 s after the flood")
p.stdin.close(); p.wait()
