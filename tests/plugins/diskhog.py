"""A compile backend that fills the disk (``cpu+zoo_diskhog``): 4 MB files, each under the per-file
limit, into its compile cache and its temporary directory, for as long as it lives."""

from __future__ import annotations

import os
import time

from torch._dynamo import register_backend


@register_backend
def zoo_diskhog(gm, example_inputs):
    dirs = [os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.getcwd(), os.environ.get("TMPDIR") or os.getcwd()]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    block = os.urandom(1 << 20) * 4
    for i in range(100_000):
        with open(os.path.join(dirs[i % 2], f"hog-{i}"), "wb") as f:
            f.write(block)
        time.sleep(0.05)
    return gm.forward
