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

    def value(kind: int, depth: int = 0) -> None:
        if kind in _SCALAR:
            take(_SCALAR[kind])
        elif kind == _STRING:
            take(u64())
        elif kind == _ARRAY and depth == 0:
            inner, count = u32(), u64()
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
    for _ in range(n_kv):
        take(u64())  # the key
        value(u32())
    for _ in range(n_tensors):
        take(u64())  # the name
        take(8 * u32())  # the dims
        take(4 + 8)  # the type and the offset
    return pos


def _mapped_config(head: bytes, size: int) -> tuple[dict[str, Any], int]:
    """transformers' config for the header ``head`` of a GGUF file of ``size`` bytes, and how many
    elements its tensors hold (their infos are in the header; the gguf package reads them)."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    with tempfile.TemporaryDirectory(prefix="zoo-gguf-") as tmp:
        path = os.path.join(tmp, "header.gguf")
        with open(path, "wb") as f:
            f.write(head)
            f.truncate(max(size, len(head)))  # sparse: the weights' bytes are holes, never fetched
        try:
            parsed = load_gguf_checkpoint(path, return_tensors=False)
        except ValueError as exc:  # "GGUF model with architecture X is not supported yet."
            raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"transformers cannot map this GGUF file: {exc}") from exc
        try:
            from gguf import GGUFReader

            elements = sum(int(t.n_elements) for t in GGUFReader(path).tensors)
        except Exception:  # the infos unreadable: no estimate (the full tier then refuses, saying so)
            elements = 0
    config = parsed.get("config") if isinstance(parsed, dict) else None
    if not isinstance(config, dict) or not config.get("model_type"):
        raise NotSupported(Reason.LIBRARY_UNSUPPORTED, "transformers maps no config from this GGUF file")
    return dict(config), elements


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
        config, elements = _mapped_config(head[:end], size)
        return Header(file=filename, size=size, bytes_read=fetched, config=config, elements=elements)
