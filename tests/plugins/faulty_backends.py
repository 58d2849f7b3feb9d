"""Compile backends that die the ways real backends die: a segfault, a hang, a runaway allocation.

Registered with torch.compile's registry, as a real backend plugin would be (ZOO_PLUGINS).
"""

from __future__ import annotations

import os
import signal
import time

from torch._dynamo import register_backend


@register_backend
def zoo_test_segfault(gm, example_inputs):
    os.kill(os.getpid(), signal.SIGSEGV)
    return gm.forward


@register_backend
def zoo_test_hang(gm, example_inputs):
    pidfile = os.environ.get("ZOO_TEST_PIDFILE")
    if pidfile:  # lets a test find this model process
        with open(pidfile, "w") as f:
            f.write(str(os.getpid()))
    while True:
        time.sleep(1)


@register_backend
def zoo_test_oom(gm, example_inputs):
    hog = []
    while True:  # grows until the memory budget (RLIMIT_DATA) stops it
        hog.append(bytearray(256 << 20))
    return gm.forward


_RESERVED = []


@register_backend
def zoo_test_shm_hog(gm, example_inputs):
    """Maps shared anonymous memory (which RLIMIT_DATA does not count) until something stops it."""
    import mmap

    while True:
        m = mmap.mmap(-1, 256 << 20, flags=mmap.MAP_SHARED)
        m.write(b"x" * (256 << 20))
        _RESERVED.append(m)
    return gm.forward


@register_backend
def zoo_test_reserve(gm, example_inputs):
    """Reserves 24 GiB of address space it never writes, as CUDA's runtime and the malloc arenas of many
    threads do: within a 4 GiB memory budget this must still run (the budget counts memory, not addresses;
    the address-space limit is the budget plus ZOO_SANDBOX_AS_HEADROOM_GB, 48 by default)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    # PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE (Linux's values)
    addr = libc.mmap(None, 24 << 30, 0, 0x02 | 0x20 | 0x4000, -1, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise MemoryError(f"reserving 24 GiB of address space failed: errno {ctypes.get_errno()}")
    _RESERVED.append(addr)
    return gm.forward
