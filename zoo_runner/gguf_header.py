"""A GGUF repo's config from its file's header, read over HTTP ranges: never the whole file.

A GGUF file starts with its metadata (architecture, sizes, tokenizer) and its tensors' names and
shapes; the quantised weights follow. Tiers ``tiny`` and ``census`` build a model from a config, so
the parent fetches the first bytes of one ``.gguf`` file (1 MiB, then 4x more until the header is
whole, at most :data:`MAX_HEADER`), lays them in a sparse file of the real size, and lets
transformers' own GGUF support (the ``gguf`` package) map the metadata to a transformers config. The
weights are never read: the sparse rest of the file is holes. An architecture transformers cannot
map is ``unsupported`` with that reason.
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass
from typing import Any

from .exceptions import NotSupported
from .statuses import Reason

FIRST_READ = 1 << 20
MAX_HEADER = 64 << 20  # a header larger than this (a vocabulary of millions of tokens) is not read
MAX_FILE = 4 << 40  # a file said to be larger is refused (the largest GGUF files are well under 1 TiB)
# Counts a header may declare, checked as each is read and before anything is allocated for it: real
# headers hold a vocabulary of up to ~262k tokens and as many merges, a few dozen keys, a few thousand
# tensors. A stranger's header of millions of empty strings is refused at its array's count.
MAX_KV = 4096
MAX_TENSORS = 1 << 17
MAX_ARRAY = 1 << 20  # entries of one array (a token list, its scores, the merges)
MAX_STRINGS = 3 << 20  # strings in the whole header
# transformers' parser (the gguf package) keeps Python objects per string: a real 262k-token header
# with 280k merges took 61 s and 1.1 GB (2-core VM, under load). It runs in a child of its own under
# these limits, so no header can make the parent (root, and 8 planning threads) spend more.
MAP_MEMORY = 4 << 30  # the child's address space
MAP_CPU_S = 240  # its CPU seconds
MAP_TIMEOUT_S = 300  # its wall seconds
MAP_OUTPUT = 4 << 20  # what the parent reads of its answer
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type -> bytes
_STRING, _ARRAY = 8, 9


class Incomplete(Exception):
    """The bytes end inside the header: read more."""


@dataclass
class Header:
    file: str
    size: int  # the whole file's, from the Hub
    bytes_read: int  # what was fetched
    config: dict[str, Any]
    elements: int = 0  # the tensors' elements, from their infos in the header: 4 bytes each in float32
    data_end: int = 0  # where the tensors' data ends, by the header: the file needs no byte past it


def header_length(buf: bytes) -> int:
    """Where ``buf``'s GGUF header (metadata and tensor infos) ends; :class:`Incomplete` if ``buf``
    stops before that, ValueError if it is not a GGUF header."""
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(buf):
            if pos + n > MAX_HEADER:
                raise ValueError(f"GGUF header larger than {MAX_HEADER >> 20} MiB")
            raise Incomplete
        out = buf[pos : pos + n]
        pos += n
        return out

    def u32() -> int:
        return struct.unpack("<I", take(4))[0]

    def u64() -> int:
        return struct.unpack("<Q", take(8))[0]

    strings = 0

    def value(kind: int, depth: int = 0) -> None:
        nonlocal strings
        if kind in _SCALAR:
            take(_SCALAR[kind])
        elif kind == _STRING:
            take(u64())
        elif kind == _ARRAY and depth == 0:
            inner, count = u32(), u64()
            if count > MAX_ARRAY:
                raise ValueError(f"a GGUF array of {count:,} entries, over the {MAX_ARRAY:,} Zoo reads")
            if inner == _STRING:
                strings += count
                if strings > MAX_STRINGS:
                    raise ValueError(f"over {MAX_STRINGS:,} strings in a GGUF header")
            if inner in _SCALAR:
                take(_SCALAR[inner] * count)
            else:
                for _ in range(count):
                    value(inner, depth + 1)
        else:
            raise ValueError(f"GGUF value type {kind} is not one the format defines here")

    if take(4) != b"GGUF":
        raise ValueError("not a GGUF file (no GGUF magic)")
    version = u32()
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version} is not read (2 and 3 are)")
    n_tensors, n_kv = u64(), u64()
    if n_kv > MAX_KV or n_tensors > MAX_TENSORS:
        raise ValueError(f"a GGUF header of {n_kv:,} keys and {n_tensors:,} tensors, over what Zoo reads")
    for _ in range(n_kv):
        take(u64())  # the key
        value(u32())
    for _ in range(n_tensors):
        take(u64())  # the name
        take(8 * u32())  # the dims
        take(4 + 8)  # the type and the offset
    return pos


def _mapped_config(head: bytes, size: int) -> tuple[dict[str, Any], int, int]:
    """transformers' config for the header ``head`` of a GGUF file of ``size`` bytes, and how many
    elements its tensors hold, from a child process under :data:`MAP_MEMORY`, :data:`MAP_CPU_S` and
    :data:`MAP_TIMEOUT_S` (:func:`_map_here` is what it runs)."""
    import json
    import subprocess
    import sys

    with tempfile.TemporaryDirectory(prefix="zoo-gguf-") as tmp:
        path = os.path.join(tmp, "header.gguf")
        with open(path, "wb") as f:
            f.write(head)
            f.truncate(max(size, len(head)))  # sparse: the weights' bytes are holes, never fetched
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "zoo_runner.gguf_header", path],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=MAP_TIMEOUT_S,
                env={  # nothing of the parent's but the import path: it reads one local file
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                    "HOME": tmp,
                    "HF_HUB_OFFLINE": "1",
                    "LC_ALL": "C.UTF-8",
                },
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED, f"mapping the GGUF header took over {MAP_TIMEOUT_S} s: not read"
            ) from None
    out = proc.stdout[-MAP_OUTPUT:].decode("utf-8", "replace").strip().splitlines()
    try:
        answer = json.loads(out[-1]) if out else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        tail = proc.stderr[-300:].decode("utf-8", "replace").strip().splitlines()
        why = tail[-1] if tail else f"exit code {proc.returncode}"
        raise NotSupported(
            Reason.LIBRARY_UNSUPPORTED,
            f"the GGUF header could not be mapped within {MAP_MEMORY >> 30} GiB and {MAP_CPU_S} s: {why[:200]}",
        )
    if answer.get("unsupported"):
        raise NotSupported(Reason.LIBRARY_UNSUPPORTED, str(answer["unsupported"])[:500])
    config, elements, data_end = answer.get("config"), answer.get("elements"), answer.get("data_end", 0)
    if not isinstance(config, dict) or not config.get("model_type") or not isinstance(elements, int):
        raise NotSupported(Reason.LIBRARY_UNSUPPORTED, "transformers maps no config from this GGUF file")
    return config, elements, data_end if isinstance(data_end, int) else 0


def _map_here(path: str) -> dict[str, Any]:
    """What the child answers for the sparse file ``path``: ``{"config", "elements"}``, or
    ``{"unsupported": why}`` for an architecture transformers cannot map."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    try:
        parsed = load_gguf_checkpoint(path, return_tensors=False)
    except ValueError as exc:  # "GGUF model with architecture X is not supported yet."
        return {"unsupported": f"transformers cannot map this GGUF file: {exc}"}
    try:
        from gguf import GGUFReader

        tensors = GGUFReader(path).tensors
        elements = sum(int(t.n_elements) for t in tensors)
        data_end = max((int(t.data_offset) + int(t.n_bytes) for t in tensors), default=0)
    except Exception:  # the infos unreadable: no estimate (the full tier then refuses, saying so)
        elements = data_end = 0
    config = parsed.get("config") if isinstance(parsed, dict) else None
    if not isinstance(config, dict) or not config.get("model_type"):
        return {"unsupported": "transformers maps no config from this GGUF file"}
    return {"config": config, "elements": elements, "data_end": data_end}


def pick_file(files: list[str]) -> str | None:
    """The ``.gguf`` file whose header is read: every quantisation of a repo carries the same
    architecture; the shallowest, then first by name (split files: their first part)."""
    ggufs = [f for f in files if f.endswith(".gguf")]
    return min(ggufs, key=lambda f: (f.count("/"), f)) if ggufs else None


def read_header(model_id: str, revision: str | None, filename: str) -> Header:
    """The mapped config of ``filename`` in ``model_id``, from as few leading bytes as its header needs."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session

    url = hf_hub_url(model_id, filename, revision=revision)
    size = get_hf_file_metadata(url).size or 0
    if size > MAX_FILE:  # the sparse copy is laid out at this size
        raise NotSupported(Reason.TOO_LARGE, f"{filename}: {size:,} bytes, over the {MAX_FILE:,} a GGUF file may be")
    want = FIRST_READ
    fetched = 0
    while True:
        headers = {**build_hf_headers(), "Range": f"bytes=0-{min(want, size or want) - 1}"}
        chunks: list[bytes] = []
        got = 0
        with get_session().stream("GET", url, headers=headers, follow_redirects=True) as response:
            response.raise_for_status()
            for chunk in response.iter_bytes():  # a server that ignores Range would send it all: stop at want
                chunks.append(chunk)
                got += len(chunk)
                if got >= want:
                    break
        fetched += got
        head = b"".join(chunks)[:want]
        try:
            end = header_length(head)
        except Incomplete:
            if len(head) < want or want >= MAX_HEADER:  # the file (or the cap) ends inside the header
                raise NotSupported(
                    Reason.LIBRARY_UNSUPPORTED, f"{filename}: its GGUF header is cut short or over the cap"
                ) from None
            want = min(want * 4, MAX_HEADER)
            continue
        except ValueError as exc:
            raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{filename}: {exc}") from exc
        config, elements, data_end = _mapped_config(head[:end], size)
        return Header(file=filename, size=size, bytes_read=fetched, config=config, elements=elements, data_end=data_end)


def _child_main(argv: list[str]) -> int:
    import json
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MAP_MEMORY, MAP_MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (MAP_CPU_S, MAP_CPU_S))
    print(json.dumps(_map_here(argv[0]), default=str))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(_child_main(sys.argv[1:]))
