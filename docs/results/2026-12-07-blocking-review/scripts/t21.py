from r import *
import time, sys, threading
NW=int(sys.argv[1]); NK=int(sys.argv[2])
def run(p):
    keys=["q%d"%i for i in range(NK)]
    ws=[]
    for i in range(NW):
        w=C(p); w.send("blpop",*keys,0); ws.append(w)
    c=C(p); c.cmd("ping",timeout=20); time.sleep(0.5)
    for w in ws: w.close()
    worst=0; t0=time.time()
    while time.time()-t0<3:
        t1=time.time(); c.cmd("ping",timeout=20); worst=max(worst,time.time()-t1); time.sleep(0.01)
    return "worst PING latency after closing all waiters %.3fs" % worst, [l for l in c.cmd("info","clients").split("\r\n") if "blocked" in l]
for p in (6391,6390): print(p, run(p)); time.sleep(0.5)
