"""The catalog: its sources (the Hub through huggingface_hub, a snapshot CSV, the builtin arch:
list), each row checked against bounds, and their sync into dated snapshots (:func:`sync`,
:func:`ensure_catalog`, :func:`refresh`)."""

from __future__ import annotations

import ast
import csv
import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, BinaryIO

from tqdm import tqdm

from db import queries, repository
from db.repository import CatalogEntry
from db.session import session_scope
from zoo_runner.exceptions import CatalogError, HubUnreachable
from zoo_runner.hub import hub_endpoint, library_from_tags
from zoo_runner.settings import settings

log = logging.getLogger(__name__)
REQUIRED_COLUMNS = ("model_id", "downloads")
HUB_FIELDS = ["downloads", "pipeline_tag", "library_name", "tags", "gated", "sha", "config", "safetensors"]


def _model_type(tags: list[str]) -> str | None:
    from transformers.models.auto.configuration_auto import (
        CONFIG_MAPPING,
    )  # a real module: no lazy-import race with other threads

    for t in tags:
        if t in CONFIG_MAPPING:
            return t
    return None


# Bounds on what a catalog source may say about one model (a CSV row or a Hub listing item).
MAX_LINE_BYTES = 1024 * 1024  # a CSV line; the snapshot's longest is 3 KB (csv's own field limit, 128 KB, stays)
MAX_TAGS = 1000  # the snapshot's most-tagged model has 112
MAX_TAG_CHARS = 256  # "base_model:finetune:" + a 96-character repo id fits
MAX_TEXT_CHARS = 128  # task, model_type: the database's columns
MAX_COUNT = 2**63 - 1  # downloads, parameters: BigInteger
REPORT_LINES = 20  # bad rows listed one by one; the rest are counted
_ARCH_ID = re.compile(r"arch:[A-Za-z_][A-Za-z0-9_]{0,95}")
_COUNT = re.compile(r"\+?[0-9]+(?:\.0*)?")


class BadRow(ValueError):
    """One catalog row Zoo skips, and why."""


def _short(text: str, n: int = 60) -> str:
    return repr(text[:n] + ("..." if len(text) > n else ""))


def check_model_id(model_id: str) -> None:
    """A Hub repo id by the Hub's own rules (huggingface_hub's validate_repo_id: ``[org/]name``,
    at most 96 characters of ``[A-Za-z0-9._-]``), or a builtin ``arch:ClassName``."""
    if "\x00" in model_id:
        raise BadRow(f"model_id {_short(model_id)} has a NUL byte")
    if model_id.startswith("arch:"):
        if not _ARCH_ID.fullmatch(model_id):
            raise BadRow(
                f"model_id {_short(model_id)} is not arch:<ClassName> (a Python identifier of at most 96 characters)"
            )
        return
    if len(model_id) > 96:
        raise BadRow(f"model_id {_short(model_id)} is {len(model_id)} characters long, over the Hub's limit of 96")
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(model_id)
    except HFValidationError as exc:
        rule = str(exc).rsplit(": '", 1)[0].rstrip(":. ")  # the Hub's rule, without the id it repeats
        raise BadRow(f"model_id {_short(model_id)} is not a Hub repo id ({rule})") from None


def parse_count(raw: str | None, what: str) -> int:
    """A non-negative whole number (``12``, or ``12.0`` as spreadsheets write it)."""
    text = (raw or "").strip()
    if not _COUNT.fullmatch(text):
        kind = "negative" if text.startswith("-") and _COUNT.fullmatch(text[1:]) else "not a non-negative whole number"
        raise BadRow(f"{what} {_short(text) if text else '(empty)'} is {kind}")
    digits = text.lstrip("+").split(".")[0].lstrip("0")
    if len(digits) > 19 or int(digits or "0") > MAX_COUNT:  # no 5,000-digit int() either
        raise BadRow(f"{what} {_short(text)} is too large")
    return int(digits or "0")


def _text_field(raw: str | None, what: str) -> str | None:
    text = (raw or "").strip()
    if len(text) > MAX_TEXT_CHARS:
        raise BadRow(f"{what} {_short(text)} is longer than {MAX_TEXT_CHARS} characters")
    return text or None


def check_tags(tags: object) -> list[str]:
    if not isinstance(tags, (list, tuple)):
        raise BadRow(f"tags is not a list: {_short(repr(tags))}")
    if len(tags) > MAX_TAGS:
        raise BadRow(f"tags has {len(tags)} entries, over the limit of {MAX_TAGS}")
    for t in tags:
        if not isinstance(t, str):
            raise BadRow(f"tags holds {_short(repr(t))}, not a string")
        if len(t) > MAX_TAG_CHARS or "\x00" in t:
            raise BadRow(f"tag {_short(t)} is longer than {MAX_TAG_CHARS} characters or has a NUL byte")
    return list(tags)


def _parse_tags(raw: str) -> list[str]:
    raw = (raw or "").strip()
    if not raw:
        return []
    value: object = None
    if raw[0] == "[" and '"' not in raw and "\\" not in raw:
        # the common case, a list of plain strings in single quotes: JSON once the quotes are
        # swapped (no string holds a quote or an escape), 10x cheaper than literal_eval
        try:
            value = json.loads(raw.replace("'", '"'))
        except (ValueError, RecursionError):
            pass
    if value is None:
        try:
            value = ast.literal_eval(raw)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            raise BadRow(f"tags is not a list literal: {_short(raw)}") from None
    return check_tags(value)


def check_entry(e: CatalogEntry) -> CatalogEntry:
    """``e`` when every field is within bounds (a Hub listing item, say), else BadRow."""
    check_model_id(e.model_id)
    for what, value in (("downloads", e.downloads), ("parameters", e.parameters)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT):
            raise BadRow(f"{_short(e.model_id)}: {what} {_short(repr(value))} is not a non-negative whole number")
    check_tags(e.tags)
    for what, value in (("task", e.task), ("model_type", e.model_type), ("library", e.library), ("sha", e.sha)):
        if value is not None and (not isinstance(value, str) or len(value) > MAX_TEXT_CHARS or "\x00" in value):
            raise BadRow(
                f"{_short(e.model_id)}: {what} {_short(repr(value))} "
                f"is not a string of at most {MAX_TEXT_CHARS} characters"
            )
    return e


@dataclass
class IngestReport:
    """What a catalog source held besides good rows: the rows skipped and why (logged as they come)."""

    source: str
    accepted: int = 0
    invalid: int = 0
    duplicates: int = 0
    problems: list[str] = field(default_factory=list)

    def skip(self, where: str, problem: str, duplicate: bool = False) -> None:
        if duplicate:
            self.duplicates += 1
        else:
            self.invalid += 1
        if len(self.problems) < REPORT_LINES:
            line = f"{where}: {problem}" + ("" if duplicate else "; row skipped")
            self.problems.append(line)
            log.warning("%s", line)

    def finish(self) -> None:
        skipped = self.invalid + self.duplicates
        if skipped:
            more = f"; the first {REPORT_LINES} are listed above" if skipped > REPORT_LINES else ""
            log.warning(
                "%s: %d row(s) skipped (%d invalid, %d duplicate)%s",
                self.source,
                skipped,
                self.invalid,
                self.duplicates,
                more,
            )
        if not self.accepted:
            raise CatalogError(
                f"{self.source}: no valid catalog rows" + (f" ({skipped} skipped, see above)" if skipped else "")
            )


def _lines(f: BinaryIO, path: str, oversized: set[int]) -> Iterator[str]:
    """The file's lines as text, one item per physical line (so csv's line_num is the file's line
    number); a line over MAX_LINE_BYTES is not read into memory but stands as an empty line, its
    number in ``oversized``. Bytes that are not UTF-8 make the whole file unreadable."""
    lineno = 0
    while True:
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > MAX_LINE_BYTES:
            oversized.add(lineno)
            while raw and not raw.endswith(b"\n"):
                raw = f.readline(1 << 20)
            yield "\n"
            continue
        try:
            yield raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise CatalogError(
                f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                f"{exc.start + 1}): a binary file, or another encoding? Save it as UTF-8"
            ) from None


def from_file(path: str, report: IngestReport | None = None) -> Iterator[CatalogEntry]:
    """Entries of a snapshot CSV with the shared file's columns.

    A bad row (a model id the Hub would refuse, downloads that are not a non-negative whole number,
    fields over their bounds, a NUL byte, a line over 1 MB) is logged with its line number and
    skipped; a duplicate id (compared case-insensitively, as the Hub does) is logged and skipped,
    the first row kept. A file that cannot be read as a UTF-8 CSV with the required columns, or
    that has no valid row at all, is a CatalogError (nothing is stored: the caller's transaction
    rolls back)."""
    if not os.path.isfile(path):
        raise CatalogError(
            f"catalog file {path} " + ("is not a regular file" if os.path.exists(path) else "does not exist")
        )
    report = report or IngestReport(path)
    oversized: set[int] = set()
    try:
        with open(path, "rb") as f:
            reader = csv.reader(_lines(f, path, oversized))
            try:
                cols = next(reader, None)
            except csv.Error as exc:
                raise CatalogError(f"{path}:1: not a catalog CSV ({exc})") from None
            if 1 in oversized or cols is None or "\x00" in "".join(cols):
                why = (
                    "is empty"
                    if cols is None
                    else "its header line is over 1 MB"
                    if 1 in oversized
                    else "has NUL bytes on line 1: a binary file, or UTF-16?"
                )
                raise CatalogError(f"{path}: not a catalog CSV: {why}")
            missing = [c for c in REQUIRED_COLUMNS if c not in cols]
            if missing:
                raise CatalogError(
                    f"{path}: not a catalog CSV: missing column(s) {', '.join(missing)} "
                    f"(have: {', '.join(c[:40] for c in cols[:8]) or 'none'})"
                )
            index = {c: i for i, c in reversed(list(enumerate(cols)))}
            seen: dict[str, tuple[int, str]] = {}  # lower-cased id -> (line, id) of its first row
            last = reader.line_num
            while True:
                try:
                    fields = next(reader)
                except StopIteration:
                    break
                except csv.Error as exc:
                    report.skip(f"{path}:{last + 1}", f"not a CSV row ({exc})")
                    last = reader.line_num
                    continue
                first, last = last + 1, reader.line_num
                where = f"{path}:{first}" if first == last else f"{path}:{first}-{last}"
                if any(n in oversized for n in range(first, last + 1)):
                    report.skip(where, f"the line is longer than {MAX_LINE_BYTES // 2**20} MB")
                    continue
                if not fields:
                    continue  # a blank line
                try:
                    entry = _entry(fields, cols, index)
                except BadRow as exc:
                    report.skip(where, str(exc))
                    continue
                key = entry.model_id.lower()
                if key in seen:
                    line, kept = seen[key]
                    report.skip(
                        where,
                        f"{_short(entry.model_id)} duplicates {_short(kept)} "
                        f"of line {line}: skipped, the first row kept",
                        duplicate=True,
                    )
                    continue
                seen[key] = (first, entry.model_id)
                report.accepted += 1
                yield entry
    except OSError as exc:
        raise CatalogError(f"cannot read catalog file {path}: {exc.strerror or exc}") from None
    report.finish()


def _entry(fields: list[str], cols: list[str], index: dict[str, int]) -> CatalogEntry:
    if len(fields) > len(cols):
        raise BadRow(f"{len(fields)} fields, but the header has {len(cols)}")
    nul = next((cols[i] for i, v in enumerate(fields) if "\x00" in v), None)
    if nul is not None:
        raise BadRow(f"a NUL byte in column {_short(nul)}")

    def get(name: str) -> str:
        i = index.get(name)
        return fields[i] if i is not None and i < len(fields) else ""

    model_id = get("model_id").strip()
    if not model_id:
        raise BadRow("model_id is empty")
    check_model_id(model_id)
    downloads = parse_count(get("downloads"), "downloads")
    tags = _parse_tags(get("tags"))
    try:
        parameters: int | None = parse_count(get("parameters"), "parameters") if get("parameters").strip() else None
    except BadRow:
        parameters = None  # unknown, as before: parameters only inform
    arch = model_id.startswith("arch:")
    return CatalogEntry(
        model_id=model_id,
        downloads=downloads,
        library=library_from_tags(tags) if not arch else "transformers",
        model_type=_text_field(get("model_type"), "model_type") or _model_type(tags),
        task=_text_field(get("tasks") or get("task"), "task"),
        tags=tags,
        custom_code="custom_code" in tags,
        gated=False,
        parameters=parameters,
    )


def builtin() -> Iterator[CatalogEntry]:
    """The builtin catalog: transformers architectures built from their default config, weighted
    by the March 2025 downloads of the Hub models of that model type (shared snapshot)."""
    from zoo_runner.builders.transformers_builder import task_for

    text = resources.files("zoo_runner").joinpath("data/builtin_catalog.csv").read_text()
    for row in csv.DictReader(text.splitlines()):
        arch = row["model_id"][5:]
        yield CatalogEntry(
            model_id=row["model_id"],
            downloads=int(row["downloads"]),
            library="transformers",
            model_type=row["model_type"],
            task=task_for(arch),
            tags=["transformers", row["model_type"]],
        )


def _hub_entry(info: Any) -> CatalogEntry:
    tags = info.tags or []
    check_tags(tags)
    cfg = info.config if isinstance(info.config, dict) else {}
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or not model_type or len(model_type) > MAX_TEXT_CHARS:
        model_type = _model_type(tags) if "transformers" in tags else None
    total = getattr(info.safetensors, "total", None) if info.safetensors else None
    return check_entry(
        CatalogEntry(
            model_id=info.id if isinstance(info.id, str) else repr(info.id),
            downloads=info.downloads or 0,
            library=library_from_tags(list(tags), info.library_name if isinstance(info.library_name, str) else None),
            model_type=model_type,
            task=info.pipeline_tag,
            tags=list(tags),
            custom_code="custom_code" in tags,
            gated=bool(info.gated),
            sha=info.sha,
            parameters=total if isinstance(total, int) and not isinstance(total, bool) and total >= 0 else None,
        )
    )


def from_hub(top: int | None, report: IngestReport | None = None) -> Iterator[CatalogEntry]:
    """The Hub's most-downloaded models, streamed page by page through ``HfApi.list_models``;
    items the Hub (or a mirror at HF_ENDPOINT) answers with bad ids or fields are logged and skipped."""
    from huggingface_hub import HfApi

    report = report or IngestReport(f"{hub_endpoint()} listing")
    seen: set[str] = set()
    try:
        models = HfApi().list_models(sort="downloads", limit=top, expand=HUB_FIELDS)
        for n, info in enumerate(models, start=1):
            where = f"{report.source}, item {n}"
            try:
                entry = _hub_entry(info)
            except (BadRow, TypeError, AttributeError) as exc:  # fields of the wrong type, too
                report.skip(where, str(exc) if isinstance(exc, BadRow) else f"malformed item ({exc})")
                continue
            if entry.model_id.lower() in seen:
                report.skip(where, f"{_short(entry.model_id)} is listed twice: skipped, the first kept", duplicate=True)
                continue
            seen.add(entry.model_id.lower())
            report.accepted += 1
            yield entry
    except CatalogError:
        raise
    except Exception as exc:
        if "offline" in str(exc).lower():
            raise HubUnreachable(
                "the Hub is offline here (HF_HUB_OFFLINE); use --from-file or the builtin arch: catalog"
            ) from exc
        raise HubUnreachable(
            f"the Hub at {hub_endpoint()} is unreachable: {exc.__class__.__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        ) from exc
    report.finish()


def hub_reachable(timeout: float = 5.0) -> bool:
    """A cheap probe: offline mode, or an endpoint that does not answer, means no."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    import httpx

    try:
        r = httpx.get(f"{hub_endpoint().rstrip('/')}/api/models", params={"limit": 1}, timeout=timeout)
        return r.status_code < 500
    except httpx.HTTPError:
        return False


# ---------------------------------------------------------------- sync


def sync_top() -> int:
    """How many of the Hub's most-downloaded models an automatic sync takes (``ZOO_SYNC_TOP``, default 1000)."""
    return settings().sync_top


def sync(source: Iterable[CatalogEntry], label: str, total: int | None = None) -> tuple[int, int]:
    """Store a snapshot from ``source``; returns (snapshot id, models stored)."""
    with (
        session_scope() as s,
        tqdm(
            total=total,
            desc=f"sync {label}",
            unit="model",
            disable=not sys.stderr.isatty() and total is None,
            file=sys.stderr,
        ) as bar,
    ):
        snap = repository.store_snapshot(s, source, label, progress=bar.update)
        bar.total = bar.n
        bar.refresh()
        return snap.id, snap.n_models


def ensure_catalog() -> str:
    """Sync when the catalog is empty: from the Hub if reachable, else the builtin arch: list.
    Returns where the catalog came from: ``existing``, ``hub`` or ``builtin``."""
    with session_scope() as s:
        if queries.latest_snapshot(s) is not None:
            return "existing"
    if hub_reachable():
        sync(from_hub(sync_top()), f"hub:{hub_endpoint()}")
        return "hub"
    log.info("the Hub is not reachable: using the builtin arch: catalog")
    sync(builtin(), "builtin")
    return "builtin"


def refresh() -> None:
    """A fresh dated snapshot from the Hub when it is reachable; else the catalog as it is."""
    if hub_reachable():
        sync(from_hub(sync_top()), f"hub:{hub_endpoint()}")
    else:
        ensure_catalog()
