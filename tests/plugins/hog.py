"""A compile backend that spends what the caps count (``cpu+zoo_hog``), in the model process, when compiling.

``request.extras["hog"]`` says what: ``memfd`` (``extras["mb"]`` megabytes written into memfds: shared
memory, which no rlimit counts), ``stderr`` (that much written to stderr) or ``unlinked`` (that much
written to a file it then unlinks and keeps open). It then waits for the parent to end it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from torch._dynamo import register_backend

CHUNK = 16 << 20


@register_backend
def zoo_hog(gm, example_inputs):
    request = json.loads((Path.cwd().parent / "request.json").read_text())
    extras = request.get("extras") or {}
    kind, total = extras["hog"], int(extras["mb"]) << 20
    block = b"\x5a" * CHUNK
    held = []
    if kind == "memfd":
        for i in range(0, total, CHUNK):
            fd = os.memfd_create(f"hog{i}")
            os.write(fd, block)
            held.append(fd)
    elif kind == "stderr":
        text = "x" * (1 << 20) + "\n"
        for _ in range(total >> 20):
            sys.stderr.write(text)
        sys.stderr.flush()
    elif kind == "unlinked":
        path = Path.cwd() / "hidden.bin"
        f = open(path, "wb")  # noqa: SIM115 - kept open on purpose
        path.unlink()
        for _ in range(0, total, CHUNK):
            f.write(block)
        f.flush()
        held.append(f)
    time.sleep(60)  # the parent's watch ends it first
    return gm.forward
