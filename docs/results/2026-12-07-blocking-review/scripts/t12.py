from r import *
import time, sys
NW=int(sys.argv[1]); NK=int(sys.argv[2])
def run(p):
    keys=["q%d"%i for i in range(NK)]
    ws=[]
    for i in range(NW):
        w=C(p); w.send("blpop",*keys,0); ws.append(w)
    time.sleep(1)
    c=C(p); t0=time.time(); r=c.cmd("rpush","q0",*range(NW), timeout=30); dt=time.time()-t0
    t1=time.time(); r2=c.cmd("ping", timeout=30); dt2=time.time()-t1
    got=[w.read(5) for w in ws]; dt3=time.time()-t0
    ok=sum(1 for g in got if isinstance(g,list))
    for w in ws: w.close()
    return r, ok, "push reply %.3fs, next ping %.3fs, all replies %.3fs" % (dt, dt2, dt3)
for p in ((6390,) if len(sys.argv)>3 else (6391,6390)):
    print(p, run(p)); time.sleep(0.5)
