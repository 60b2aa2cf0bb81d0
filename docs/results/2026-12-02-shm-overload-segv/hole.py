import ctypes, os, mmap
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
R = 2 << 20
PROT_NONE, PROT_RW = 0, 3
MAP_SHARED, MAP_PRIVATE, MAP_ANON, MAP_FIXED, MAP_NORESERVE, MAP_POPULATE = 1, 2, 0x20, 0x10, 0x4000, 0x8000
base = libc.mmap(None, 3 * R, PROT_NONE, MAP_PRIVATE | MAP_ANON | MAP_NORESERVE, -1, 0)
at = (base + R - 1) // R * R
fd = os.memfd_create("t", os.MFD_HUGETLB | (21 << 26))
try:
    os.ftruncate(fd, R); print("ftruncate ok")
except OSError as e:
    print("ftruncate", e)
r = libc.mmap(at, R, PROT_RW, MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0)
print("mmap fixed ->", hex(r & (2**64-1)), "errno", ctypes.get_errno())
for l in open("/proc/self/maps"):
    s, e = [int(x, 16) for x in l.split()[0].split("-")]
    if e > base and s < base + 3 * R:
        print(l.strip())
print("reservation", hex(base), "-", hex(base + 3 * R), "region at", hex(at))
