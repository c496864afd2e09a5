"""Issue 27, phase (b)'s condition: a checkpoint buffer that outlives a killed worker.

    .venv/bin/python benchmarks/experiments/shared_checkpoint.py

Today's checkpoint buffer is one 4 GiB MAP_PRIVATE anonymous reservation
(host/memory_checkpoint._reserve). A supervisor could keep a MAP_SHARED mapping of
an os.memfd_create file instead. This times, for both, what a checkpoint does:
the first full copy of 100 MB (page faults), a second full copy, and the ~150
scattered pages a `1+1` cell dirties (median of 200), three rounds alternating.
"""
import ctypes, mmap, os, statistics, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
SPACE = 1 << 32
NORES = getattr(mmap, "MAP_NORESERVE", 0x4000)
def reserve(shared):
    if shared:
        fd = os.memfd_create("wk-checkpoint", os.MFD_CLOEXEC)
        os.ftruncate(fd, SPACE)
        return libc.mmap(None, SPACE, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | NORES, fd, 0), fd
    return libc.mmap(None, SPACE, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | NORES, -1, 0), None
src = bytearray(os.urandom(1 << 20)) * 100  # 100 MB of "guest memory"
srcv = memoryview(src)
def view(addr, n): return memoryview((ctypes.c_char * n).from_address(addr)).cast("B")
for rnd in range(3):
    for shared in (False, True):
        addr, fd = reserve(shared)
        dst = view(addr, len(src))
        t = time.perf_counter(); dst[:] = srcv; first = time.perf_counter() - t       # first full copy: page faults
        t = time.perf_counter(); dst[:] = srcv; again = time.perf_counter() - t       # pages present
        pages = [(i * 7919 % 25000) * 4096 for i in range(150)]                       # 150 scattered pages
        ts = []
        for _ in range(200):
            t = time.perf_counter()
            for off in pages:
                dst[off:off + 4096] = srcv[off:off + 4096]
            ts.append(time.perf_counter() - t)
        print(f"{'memfd shared' if shared else 'anonymous   '}: first 100 MB {first*1000:.1f} ms, again {again*1000:.1f} ms, 150 pages {statistics.median(ts)*1e6:.0f} us")
        del dst
        libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(SPACE))
        if fd is not None: os.close(fd)
