from r import *
import time, sys
NW=int(sys.argv[1]); NK=int(sys.argv[2])
def run(p):
    keys=["q%d"%i for i in range(NK)]
    ws=[]
    for i in range(NW):
        w=C(p); w.send("blpop",*keys,1.5); ws.append(w)
    c=C(p); worst=0; t0=time.time()
    while time.time()-t0<4:
        t1=time.time(); c.cmd("ping",timeout=20); worst=max(worst,time.time()-t1); time.sleep(0.01)
    got=sum(1 for w in ws if w.read(0.01)=="NULLARRAY")
    for w in ws: w.close()
    return got, "worst PING latency %.3fs" % worst
for p in (6391,6390): print(p, run(p)); time.sleep(0.5)
