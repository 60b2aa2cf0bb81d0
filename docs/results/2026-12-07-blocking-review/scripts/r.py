import socket, time, sys, select
def enc(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        if isinstance(a, str): a = a.encode()
        elif isinstance(a, (int,float)): a = str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out
class C:
    def __init__(s, port):
        s.port=port
        s.s = socket.create_connection(("127.0.0.1", port))
        s.buf = b""
    def send(s, *args):
        s.s.sendall(enc(*args))
    def raw(s, b): s.s.sendall(b)
    def _fill(s, deadline):
        t = deadline - time.time()
        if t <= 0: return False
        pl=select.poll(); pl.register(s.s, select.POLLIN)
        if not pl.poll(t*1000): return False
        d = s.s.recv(65536)
        if not d: raise EOFError("closed")
        s.buf += d
        return True
    def _line(s, deadline):
        while b"\r\n" not in s.buf:
            if not s._fill(deadline): raise TimeoutError
        i = s.buf.index(b"\r\n"); l = s.buf[:i]; s.buf = s.buf[i+2:]; return l
    def _parse(s, deadline):
        l = s._line(deadline); t = l[:1]; rest = l[1:]
        if t == b"+": return rest.decode()
        if t == b"-": return "ERR:" + rest.decode()
        if t == b":": return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0: return None
            while len(s.buf) < n+2:
                if not s._fill(deadline): raise TimeoutError
            v = s.buf[:n]; s.buf = s.buf[n+2:]; return v.decode(errors="replace")
        if t == b"*":
            n = int(rest)
            if n < 0: return "NULLARRAY"
            return [s._parse(deadline) for _ in range(n)]
        return "??"+l.decode()
    def read(s, timeout=1.0):
        try: return s._parse(time.time()+timeout)
        except TimeoutError: return "<no reply>"
        except EOFError: return "<closed>"
        except ConnectionResetError: return "<reset>"
    def cmd(s, *args, timeout=1.0):
        s.send(*args); return s.read(timeout)
    def close(s): s.s.close()
def both(fn):
    for name, port in (("redis", 6391), ("ours ", 6390)):
        _c=C(port)
        for _d in range(8): _c.cmd("select",_d); _c.cmd("flushdb")
        _c.close()
        try:
            res = fn(port)
        except Exception as e:
            res = "EXC %r" % e
        print(name, res)
