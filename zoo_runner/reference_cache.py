"""CPU reference outputs kept on disk and reused while model, revision and versions are unchanged.

The CPU reference (fp32 with the op census, then fp64) is the same for every backend and every
week until the model's revision, torch, transformers or Zoo's harness changes. A weekly sweep over
three backends would otherwise compute it three times a week. The model process stores it here
after computing it, and the next validation of the same model on any backend loads it instead.

* Format: one safetensors file per key (tensors plus JSON metadata): nothing is ever unpickled,
  so a file written by one model process is safe for another to read.
* Key: a hash of the model id, revision, tier (census and tiny build the same model and share
  one: a census entry holds no fp64 reference, which the tiny run adds), seed, plan fingerprint, the versions of torch,
  transformers and Zoo, the harness version, the generated inputs' bytes and, for tiers with
  seeded weights, the parameters' bytes. Anything that could change the reference changes the key.
  Full-tier models are cached only with a pinned revision (a commit sha).
* Writes are atomic (temporary file, then rename); an unreadable file is a miss and is replaced.
* Location: ``ZOO_REFERENCE_CACHE`` (``off`` disables it), default ``~/.cache/zoo/references``;
  at most ``ZOO_REFERENCE_CACHE_MB`` megabytes (default 2048), least recently used files go first.
  Share the directory between the workers of one machine (a volume in docker-compose).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .settings import DEFAULT_REFERENCE_CACHE_MB, settings

if TYPE_CHECKING:  # torch is imported by the model process only; the parent needs just the directory
    import torch

log = logging.getLogger(__name__)

DISABLED = {"", "off", "0", "false", "no", "none"}
DEFAULT_MAX_MB = DEFAULT_REFERENCE_CACHE_MB


def default_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "zoo", "references")


def configured_dir() -> str | None:
    """The cache directory the environment asks for, or None where caching is off."""
    value = settings().reference_cache
    if value is None:
        return default_dir()
    return None if value.strip().lower() in DISABLED else value


def max_bytes() -> int:
    """``ZOO_REFERENCE_CACHE_MB`` in bytes."""
    return int(settings().reference_cache_mb * (1 << 20))  # not a number: DEFAULT_MAX_MB


_max_bytes = max_bytes


def _tensor_bytes(t: torch.Tensor) -> memoryview:
    import torch

    t = t.detach().to("cpu").contiguous()
    if t.numel() == 0:
        return memoryview(b"")
    return memoryview(t.view(-1).view(torch.uint8).numpy())


def _digest_tensors(items: Iterable[tuple[str, torch.Tensor]]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for name, t in items:
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(_tensor_bytes(t))
    return h.hexdigest()


@dataclass
class CachedReference:
    ref32: list[dict[str, torch.Tensor]]
    ref64: list[dict[str, torch.Tensor]]
    op_census: dict[str, int]
    reference_ms: float | None
    reference64_note: str | None
    fp64: bool = True  # False: the census tier stored it, and ref64 is the fp32 reference (no fp64 run)


def reference_key(
    *,
    model_id: str,
    revision: str | None,
    tier: str,
    seed: int,
    fingerprint: str | None,
    versions: dict[str, str],
    harness: str,
    model: torch.nn.Module,
    inputs: list[dict[str, Any]],
    precision: str = "fp32",
) -> str | None:
    """The cache key of a model's CPU reference, or None where it cannot be cached safely."""
    if tier == "full" and not revision:
        return None  # "main" moves: without a commit sha the weights are not pinned
    from .compare import flatten

    parts: dict[str, Any] = {
        "model_id": model_id,
        "revision": revision,
        "tier": tier,
        "seed": seed,
        "fingerprint": fingerprint,
        "torch": versions.get("torch"),
        "transformers": versions.get("transformers"),
        "zoo": versions.get("zoo"),
        "harness": harness,
        "inputs": [_digest_tensors(flatten(x)) for x in inputs],
    }
    if precision != "fp32":  # a reference at bf16/fp16/tf32 is its own entry; fp32 keys are unchanged
        parts["precision"] = precision
    if tier != "full":  # seeded weights: their bytes are cheap to hash and pin the reference exactly
        parts["weights"] = _digest_tensors(model.state_dict().items())
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class ReferenceCache:
    """Entries under ``root``; a model process reads its namespace of the cache (read-only) and
    stores into ``outbox``, a directory of its own the parent publishes from
    (:mod:`zoo_runner.cache_trust`). Without an outbox (Zoo's own process) it stores into ``root``."""

    def __init__(self, root: str | os.PathLike[str], outbox: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root)
        self.outbox = Path(outbox) if outbox else None

    def path(self, key: str) -> Path:
        return self.root / f"{key}.safetensors"

    def load(self, key: str) -> CachedReference | None:
        from safetensors import safe_open

        path = self.path(key)
        if not path.exists():
            return None
        try:
            with safe_open(str(path), framework="pt") as f:
                meta = json.loads(f.metadata()["zoo"])
                ref32 = [{k: f.get_tensor(f"32/{i}/{k}") for k in keys} for i, keys in enumerate(meta["keys32"])]
                if meta["same64"]:
                    ref64 = ref32
                else:
                    ref64 = [{k: f.get_tensor(f"64/{i}/{k}") for k in keys} for i, keys in enumerate(meta["keys64"])]
        except Exception as exc:  # truncated, foreign or corrupt: recompute and overwrite
            log.warning("reference cache file %s unreadable (%s): recomputing", path, exc)
            return None
        if self.outbox is None:
            try:
                os.utime(path)  # recently used: pruned last (the parent marks a model process's namespace)
            except OSError:
                pass
        return CachedReference(
            ref32,
            ref64,
            {k: int(v) for k, v in meta["op_census"].items()},
            meta.get("reference_ms"),
            meta.get("reference64_note"),
            bool(meta.get("fp64", True)),
        )

    def store(self, key: str, ref: CachedReference) -> bool:
        from safetensors.torch import save_file

        same64 = ref.ref64 is ref.ref32
        tensors: dict[str, torch.Tensor] = {}
        for prec, refs in (("32", ref.ref32), ("64", [] if same64 else ref.ref64)):
            for i, outs in enumerate(refs):
                for k, t in outs.items():
                    tensors[f"{prec}/{i}/{k}"] = t.detach().to("cpu").contiguous().clone()
        meta = {
            "keys32": [list(o) for o in ref.ref32],
            "keys64": [] if same64 else [list(o) for o in ref.ref64],
            "same64": same64,
            "op_census": ref.op_census,
            "reference_ms": ref.reference_ms,
            "reference64_note": ref.reference64_note,
            "fp64": ref.fp64,
        }
        path = self.outbox / f"{key}.safetensors" if self.outbox is not None else self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".safetensors")
            os.close(fd)
            try:
                save_file(tensors, tmp, metadata={"zoo": json.dumps(meta)})
                os.chmod(tmp, 0o644)  # other workers of the machine read it
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        except Exception as exc:  # a full disk or an odd dtype must not fail the validation
            log.warning("reference not cached at %s: %s", path, exc)
            return False
        if self.outbox is None:
            self.prune(_max_bytes())
        return True

    def prune(self, max_bytes: int) -> int:
        """Delete least recently used files until the cache fits in ``max_bytes``; returns how many."""
        files = []
        total = 0
        for p in self.root.rglob("*.safetensors"):
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            files.append((st.st_mtime, st.st_size, p))
            total += st.st_size
        removed = 0
        for _, size, p in sorted(files):
            if total <= max_bytes:
                break
            try:
                p.unlink()
                p.with_name(p.name + ".mac").unlink(missing_ok=True)
                total -= size
                removed += 1
            except FileNotFoundError:
                pass
        return removed
