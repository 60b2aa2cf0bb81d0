import socket
for size in (40, 200):
  for rcv in (65536, 262144, 1<<20, 4<<20):
    r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcv); r.bind(('127.0.0.1',0))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(40000): s.sendto(b'x'*size, r.getsockname())
    r.setblocking(False); n=0
    try:
        while True: r.recv(2000); n+=1
    except BlockingIOError: pass
    print(size, rcv, r.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF), n)
