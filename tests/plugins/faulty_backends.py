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
    while True:  # grows until the address-space budget stops it
        hog.append(bytearray(256 << 20))
    return gm.forward
