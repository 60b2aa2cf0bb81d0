import socket, time, sys
def cmd(s, *args):
    out = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    s.sendall(out)
    data = b""
    while not data.endswith(b"\r\n"):
        data += s.recv(1 << 20)
    return data
score = b"0." + b"3" * 1000000
for name, port in (("redis-server", 6462), ("ours", 6461)):
    s = socket.create_connection(("127.0.0.1", port))
    args = [b"ZADD", b"z"] + sum([[score, b"m%d" % i] for i in range(8)], [])
    t = time.time(); r = cmd(s, *args); dt = time.time() - t
    t = time.time(); cmd(s, b"ZRANGEBYSCORE", b"z", score, score); dt2 = time.time() - t
    print(f"{name}: ZADD with 8 one-million-digit scores {dt*1000:.1f} ms ({r.strip().decode()}), ZRANGEBYSCORE with two such bounds {dt2*1000:.1f} ms")
