"""A compile backend that reports what a model process gets of the Neuron set-up (``<device>+zoo_neuronprobe``).

Loaded with the fake device (``ZOO_PLUGINS=tests.plugins.fake_neuron,tests.plugins.neuron_probe``), it
raises with a JSON line ``ZOO-NEURONPROBE<<{...}>>``: its ``TORCH_NEURONX_*`` and ``NEURON_*`` variables,
whether each TorchNeuron directory can be written, its supplementary groups, what it finds at the
device nodes of ``ZOO_FAKE_NEURON_DEVICE_DIR``, and the wall-clock window it held its cores in (it holds
them ``ZOO_TEST_PROBE_HOLD_S`` seconds, so that concurrent model processes overlap). On ``neuron`` it
first starts the fake runtime, which claims the visible cores exclusively. The row is a ``compile_error``
carrying it.
"""

from __future__ import annotations

import glob
import json
import os
import stat
import time

from torch._dynamo import register_backend

DIR_VARS = ("TORCH_NEURONX_NEFF_CACHE_DIR", "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", "TORCH_NEURONX_DEBUG_DIR")


def _writable(path: str | None) -> bool:
    if not path:
        return False
    try:
        probe = os.path.join(path, f".w-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("x")
        os.unlink(probe)
        return True
    except OSError:
        return False


def _nodes() -> dict[str, str]:
    out = {}
    device_dir = os.environ.get("ZOO_FAKE_NEURON_DEVICE_DIR", "")
    for node in sorted(glob.glob(os.path.join(device_dir, "neuron[0-9]*"))) if device_dir else []:
        try:
            st = os.stat(node)
            kind = "char" if stat.S_ISCHR(st.st_mode) else "file"
            with open(node, "rb") as f:
                out[os.path.basename(node)] = f"{kind}, read: {f.read(16)!r}"
        except OSError as exc:
            out[os.path.basename(node)] = f"refused: {exc.strerror}"
    return out


@register_backend
def zoo_neuronprobe(gm, example_inputs):
    start = time.time()
    import sys

    if "tests.plugins.fake_neuron" in sys.modules and os.environ.get("NEURON_RT_VISIBLE_CORES"):
        sys.modules["tests.plugins.fake_neuron"].start_runtime()
    time.sleep(float(os.environ.get("ZOO_TEST_PROBE_HOLD_S", "0")))
    facts = {
        "env": {k: v for k, v in os.environ.items() if k.startswith(("TORCH_NEURONX_", "NEURON_"))},
        "writable": {var: _writable(os.environ.get(var)) for var in DIR_VARS},
        "groups": sorted(os.getgroups()),
        "nodes": _nodes(),
        "window": [start, time.time()],
        "pid": os.getpid(),
    }
    raise RuntimeError("ZOO-NEURONPROBE<<" + json.dumps(facts) + ">>")
