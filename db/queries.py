"""Reads: results in the SPEC's shape, coverage as the SPEC defines it."""

from __future__ import annotations

import datetime as _dt
import re as _re
import threading as _threading
import time as _time
from collections import OrderedDict as _OrderedDict
from dataclasses import asdict, dataclass, field
from functools import wraps as _wraps
from typing import Any

from sqlalchemy import and_, case, func, literal, select
from sqlalchemy.orm import Session

from zoo_runner.exceptions import BadInput
from zoo_runner.settings import settings as _settings
from zoo_runner.statuses import ALL_STATUSES, NO_VALID_REFERENCE, PASSING, Status, owner

from .models import Bisection, Model, Report, Result, Snapshot, SnapshotEntry
from .rows import judged_precision as judged_precision  # re-exported: a read
from .rows import precision_scope as precision_scope  # re-exported: a read
from .rows import result_dict as result_dict  # re-exported: a read
from .weeks import previous_week, week_minus

DECLARED = "declared"  # the precision scope of every backend's own declared precision


def precision_label(precision: str | None) -> str:
    return precision or DECLARED


def scope_key():
    """``declared``, or the precision a ``--precision`` flag asked for: the model page shows the
    latest result of each (backend, tier, scope key)."""
    return case((Result.precision_source == "flag", Result.precision), else_=literal(DECLARED))


def latest_snapshot(session: Session) -> Snapshot | None:
    """The newest catalog snapshot, or None before the first sync."""
    return session.scalars(select(Snapshot).order_by(Snapshot.taken_at.desc(), Snapshot.id.desc()).limit(1)).first()


def snapshot_models(session: Session, snapshot: Snapshot, top: int | None = None) -> list[tuple[Model, int]]:
    """(model, downloads) of a snapshot's models in rank order, the first ``top`` if given."""
    q = (
        select(Model, SnapshotEntry.downloads)
        .join(SnapshotEntry, SnapshotEntry.model_id == Model.id)
        .where(SnapshotEntry.snapshot_id == snapshot.id)
        .order_by(SnapshotEntry.rank)
    )
    if top:
        q = q.limit(top)
    return [(m, d) for m, d in session.execute(q)]


def latest_results(session: Session, model_id: str) -> list[Result]:
    """The latest result per (backend, tier) for one model at the backend's declared precision,
    and per precision a ``--precision`` flag asked for, newest first: one query that ranks the
    model's rows on their index and loads only the winners whole."""
    ranked = (
        select(
            Result.id.label("rid"),
            func.row_number()
            .over(
                partition_by=(Result.backend, Result.tier, scope_key(), Result.env),
                order_by=(Result.started_at.desc(), Result.id.desc()),
            )
            .label("rn"),
        )
        .where(Result.model_id == model_id)
        .subquery()
    )
    q = (
        select(Result)
        .join(ranked, Result.id == ranked.c.rid)
        .where(ranked.c.rn == 1)
        .order_by(Result.started_at.desc(), Result.id.desc())
    )
    return list(session.scalars(q))


def history(session: Session, model_id: str, limit: int = 500) -> list[Result]:
    return list(
        session.scalars(
            select(Result)
            .where(Result.model_id == model_id)
            .order_by(Result.started_at.desc(), Result.id.desc())
            .limit(limit)
        )
    )


@dataclass
class Coverage:
    backend: str | None
    tier: str
    week: str | None
    snapshot_id: int | None
    catalog_models: int = 0
    catalog_downloads: int = 0
    attempted: int = 0
    attempted_downloads: int = 0
    valid_reference: int = 0
    valid_reference_downloads: int = 0
    passing: int = 0
    passing_downloads: int = 0
    strict: int = 0
    strict_downloads: int = 0
    status_counts: dict[str, int] = field(default_factory=dict)
    # passing models whose backend executed under half of their graphs' ops (details.backend_share)
    below_half_on_backend: int = 0
    precision: str = DECLARED  # the precision scope: each backend's declared one, or fp32/tf32/bf16/fp16
    env: str = ""  # the env whose rows these are ("": Zoo's own interpreter)

    @staticmethod
    def _ratio(a: int, b: int) -> float | None:
        return round(a / b, 6) if b else None

    @property
    def rates(self) -> dict[str, float | None]:
        r = self._ratio
        return {
            "functional": r(self.passing, self.valid_reference),
            "functional_weighted": r(self.passing_downloads, self.valid_reference_downloads),
            "strict_rate": r(self.strict, self.valid_reference),
            "strict_weighted": r(self.strict_downloads, self.valid_reference_downloads),
            "harness": r(self.valid_reference, self.attempted),
            "harness_weighted": r(self.valid_reference_downloads, self.attempted_downloads),
        }

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(self.rates)
        return d


def default_scope(
    session: Session,
    backend: str | None,
    tier: str | None,
    week: str | None,
    precision: str | None = None,
    env: str = "",
) -> tuple[str | None, str, str | None]:
    """Fill an unspecified backend/tier/week from the newest result (of the precision scope) run in
    ``env`` (default: Zoo's own interpreter; an env's rows are never another env's default)."""
    q = (
        select(Result.backend, Result.tier, Result.week)
        .where(Result.env == env)
        .order_by(Result.started_at.desc())
        .limit(1)
    )
    if precision:
        q = q.where(Result.precision == precision)
    if backend:
        q = q.where(Result.backend == backend)
    if tier:
        q = q.where(Result.tier == tier)
    if week:
        q = q.where(Result.week == week)
    row = session.execute(q).first()
    if row is None:
        return backend, tier or "tiny", week
    return backend or row[0], tier or row[1], week or row[2]


def weighting_snapshot(session: Session, snapshot_id: int | None = None) -> Snapshot | None:
    """The catalog snapshot whose downloads weight coverage and the analytics: ``snapshot_id``
    (:class:`BadInput` if there is none), else the newest snapshot holding a model with results,
    else the newest snapshot. So syncing a small CSV of models not yet run does not turn
    coverage into 0 / 0; name its snapshot to see it."""
    if snapshot_id is not None:
        snap = session.get(Snapshot, snapshot_id)
        if snap is None:
            raise BadInput(f"no catalog snapshot {snapshot_id} (`zoo sync` prints the id of each)")
        return snap
    has_results = select(Result.id).where(Result.model_id == SnapshotEntry.model_id).exists()
    newest_first = session.scalars(select(Snapshot.id).order_by(Snapshot.taken_at.desc(), Snapshot.id.desc())).all()
    for sid in newest_first:  # one short index probe each, stopping at the first hit (usually the newest)
        if (
            session.scalar(select(SnapshotEntry.id).where(SnapshotEntry.snapshot_id == sid, has_results).limit(1))
            is not None
        ):
            return session.get(Snapshot, sid)
    return latest_snapshot(session)


def coverage(
    session: Session,
    backend: str | None = None,
    tier: str | None = None,
    week: str | None = None,
    snapshot: Snapshot | None = None,
    precision: str | None = None,
    snapshot_id: int | None = None,
    models: tuple[str, ...] | None = None,
    env: str = "",
) -> Coverage:
    """Coverage of a backend, tier and week at the backend's declared precision (``precision``
    None), or over the rows judged at ``precision``; weighted by ``snapshot`` (or the one
    :func:`weighting_snapshot` picks for ``snapshot_id``); over the results of ``models`` only when
    given (a benchmark's slice); of the rows of ``env`` (default: Zoo's own interpreter's)."""
    backend, tier, week = default_scope(session, backend, tier, week, precision, env)
    snapshot = snapshot or weighting_snapshot(session, snapshot_id)
    cov = Coverage(
        backend=backend,
        tier=tier,
        week=week,
        snapshot_id=snapshot.id if snapshot else None,
        precision=precision_label(precision),
        env=env or "",
    )
    if snapshot is None:
        return cov
    cov.catalog_models, cov.catalog_downloads = snapshot.n_models, snapshot.total_downloads
    if backend is None or week is None:
        return cov
    # latest result per model in scope (one row per revision/harness version can exist)
    ranked = (
        select(
            Result.model_id,
            Result.status,
            Result.details["backend_share"].as_float().label("share"),
            func.row_number()
            .over(partition_by=Result.model_id, order_by=(Result.started_at.desc(), Result.id.desc()))
            .label("rn"),
        )
        .where(Result.backend == backend, Result.tier == tier, Result.week == week, precision_scope(precision, env))
        .where(*_of_models(models))
        .subquery()
    )
    low = case((and_(ranked.c.status.in_(tuple(PASSING)), ranked.c.share < 0.5), 1), else_=0)
    q = (
        select(
            ranked.c.status,
            func.count(),
            func.coalesce(func.sum(SnapshotEntry.downloads), 0),
            func.coalesce(func.sum(low), 0),
        )
        .join(SnapshotEntry, (SnapshotEntry.model_id == ranked.c.model_id) & (SnapshotEntry.snapshot_id == snapshot.id))
        .where(ranked.c.rn == 1)
        .group_by(ranked.c.status)
    )
    cov.status_counts = {s: 0 for s in ALL_STATUSES}
    for status, n, dl, below in session.execute(q):
        _accumulate(cov, status, n, dl)
        cov.below_half_on_backend += int(below or 0)
    return cov


def model_with_latest(session: Session, limit: int = 200) -> list[tuple[Model, dict[str, Result]]]:
    """Catalog models (latest snapshot order) with their latest result per backend/tier."""
    snap = latest_snapshot(session)
    if snap is None:
        return []
    models = session.execute(
        select(Model, SnapshotEntry.downloads)
        .join(SnapshotEntry, SnapshotEntry.model_id == Model.id)
        .where(SnapshotEntry.snapshot_id == snap.id)
        .order_by(SnapshotEntry.rank)
        .limit(limit)
    ).all()
    ids = [m.id for m, _ in models]
    latest: dict[str, dict[str, Result]] = {i: {} for i in ids}
    if ids:
        for r in session.scalars(
            select(Result)
            .where(Result.model_id.in_(ids), Result.env == "")
            .order_by(Result.started_at.asc(), Result.id.asc())
        ):
            latest[r.model_id][f"{r.backend}/{r.tier}"] = r
    return [(m, latest[m.id]) for m, _ in models]


# ---------------------------------------------------------------------------------------------
# Analytics: grouped coverage, history, op gaps, failure clusters, regressions, backends.
# Every function here backs one API endpoint (see api/routes/*), so every number a page or the
# report shows can be fetched by a user through the API.
# ---------------------------------------------------------------------------------------------
GROUP_COLUMNS = {"task": Result.task, "library": Result.library, "architecture": Result.architecture}
ATEN_OP = _re.compile(r"\baten(?:::|\.)([A-Za-z0-9_]+)")
SINGLE_OP_ERROR_STATUSES = (Status.COMPILE_ERROR.value, Status.RUNTIME_ERROR.value)

_CACHE: _OrderedDict[tuple, tuple[float, tuple, Any]] = _OrderedDict()
_CACHE_LOCK = _threading.Lock()
_CACHE_MAX = 512


def data_version(session: Session) -> tuple:
    """Changes whenever a result or a catalog snapshot is written (cheap: index lookups only)."""
    row = session.execute(
        select(
            select(func.max(Result.id)).scalar_subquery(),
            select(func.max(Result.started_at)).scalar_subquery(),
            select(func.max(Snapshot.id)).scalar_subquery(),
            select(func.max(Snapshot.taken_at)).scalar_subquery(),
            select(func.max(Report.id)).scalar_subquery(),
            select(func.max(Report.created_at)).scalar_subquery(),
        )
    ).one()
    return (str(session.get_bind().url), *[str(x) for x in row])


def cached(fn):
    """Memoize an analytics query per process, keyed by its arguments and the data version, for
    at most ``ZOO_QUERY_CACHE_S`` seconds (default 300; 0 disables). Callers must not mutate the
    value they get back."""

    @_wraps(fn)
    def wrapper(session: Session, *args, **kwargs):
        ttl = _settings().query_cache_s
        if ttl <= 0:
            return fn(session, *args, **kwargs)
        version = data_version(session)
        key = (fn.__name__, version[0], args, tuple(sorted(kwargs.items())))
        now = _time.monotonic()
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
            if hit and hit[1] == version and now - hit[0] < ttl:
                _CACHE.move_to_end(key)
                return hit[2]
        value = fn(session, *args, **kwargs)
        with _CACHE_LOCK:
            _CACHE[key] = (now, version, value)
            while len(_CACHE) > _CACHE_MAX:
                _CACHE.popitem(last=False)
        return value

    wrapper.uncached = fn  # type: ignore[attr-defined]
    return wrapper


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


def _of_models(models: tuple[str, ...] | None) -> tuple:
    """The filter keeping the results of ``models`` (none: every model's)."""
    return () if models is None else (Result.model_id.in_(models),)


def scope_models(session: Session, backend: str, tier: str, week: str, precision: str | None = None) -> set[str]:
    """The models with a result in (backend, tier, week) at the precision scope."""
    q = select(Result.model_id).where(
        Result.backend == backend, Result.tier == tier, Result.week == week, precision_scope(precision)
    )
    return {m for (m,) in session.execute(q.distinct())}


@cached
def common_coverage(session: Session, week: str | None, pairs: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """Side by side on the same models: for each tier, the models every backend of that tier has a
    result for this week (the intersection) and each backend's coverage over exactly those, so a
    slice of 100 is never set beside a slice of 999 as if they were alike."""
    by_tier: dict[str, list[str]] = {}
    for b, t in pairs:
        by_tier.setdefault(t, []).append(b)
    out: dict[str, Any] = {"week": week, "tiers": []}
    if week is None:
        return out
    for tier, backends in sorted(by_tier.items()):
        if len(backends) < 2:
            continue
        sets = {b: scope_models(session, b, tier, week) for b in backends}
        common = tuple(sorted(set.intersection(*sets.values())))
        out["tiers"].append(
            {
                "tier": tier,
                "backends": sorted(backends),
                "common_models": len(common),
                "attempted": {b: len(m) for b, m in sorted(sets.items())},
                "items": [
                    coverage(session, backend=b, tier=tier, week=week, models=common).to_dict()
                    for b in sorted(backends)
                ],
            }
        )
    return out


def _latest_in_scope(
    backend: str, tier: str, week: str, *cols, precision: str | None = None, models: tuple[str, ...] | None = None
):
    """Subquery: every result of (backend, tier, week) in the precision scope (default: the
    backend's declared precision), of ``models`` when given, ranked per model, newest first (rn)."""
    return (
        select(
            Result.model_id.label("mid"),
            *cols,
            func.row_number()
            .over(partition_by=Result.model_id, order_by=(Result.started_at.desc(), Result.id.desc()))
            .label("rn"),
        )
        .where(Result.backend == backend, Result.tier == tier, Result.week == week, precision_scope(precision))
        .where(*_of_models(models))
        .subquery()
    )


def _accumulate(cov: Coverage, status: str, n: int, dl: int) -> None:
    n, dl = int(n), int(dl or 0)
    cov.status_counts[status] = cov.status_counts.get(status, 0) + n
    cov.attempted += n
    cov.attempted_downloads += dl
    if status not in NO_VALID_REFERENCE:
        cov.valid_reference += n
        cov.valid_reference_downloads += dl
    if status in PASSING:
        cov.passing += n
        cov.passing_downloads += dl
    if status == Status.PASS:
        cov.strict += n
        cov.strict_downloads += dl


cached_coverage = cached(coverage)


@cached
def coverage_grouped(
    session: Session,
    group_by: str,
    backend: str | None = None,
    tier: str | None = None,
    week: str | None = None,
    precision: str | None = None,
    snapshot_id: int | None = None,
) -> list[tuple[str | None, Coverage]]:
    """Coverage of one scope split by task, library or architecture (the result's own fields),
    largest download denominators first."""
    col = GROUP_COLUMNS[group_by]
    backend, tier, week = default_scope(session, backend, tier, week, precision)
    snapshot = weighting_snapshot(session, snapshot_id)
    if snapshot is None or backend is None or week is None:
        return []
    ranked = _latest_in_scope(backend, tier, week, Result.status, col.label("grp"), precision=precision)
    q = (
        select(ranked.c.grp, ranked.c.status, func.count(), func.coalesce(func.sum(SnapshotEntry.downloads), 0))
        .join(SnapshotEntry, (SnapshotEntry.model_id == ranked.c.mid) & (SnapshotEntry.snapshot_id == snapshot.id))
        .where(ranked.c.rn == 1)
        .group_by(ranked.c.grp, ranked.c.status)
    )
    groups: dict[str | None, Coverage] = {}
    for grp, status, n, dl in session.execute(q):
        cov = groups.get(grp)
        if cov is None:
            cov = groups[grp] = Coverage(
                backend=backend,
                tier=tier,
                week=week,
                snapshot_id=snapshot.id,
                catalog_models=snapshot.n_models,
                catalog_downloads=snapshot.total_downloads,
                status_counts={s: 0 for s in ALL_STATUSES},
                precision=precision_label(precision),
            )
        _accumulate(cov, status, n, dl)
    return sorted(groups.items(), key=lambda kv: (-kv[1].attempted_downloads, str(kv[0])))


@cached
def coverage_history(
    session: Session,
    backend: str | None = None,
    tier: str | None = None,
    weeks: int = 12,
    until: str | None = None,
    precision: str | None = None,
    snapshot_id: int | None = None,
) -> list[Coverage]:
    """Coverage per ISO week and per (backend, tier), oldest week first, for the ``weeks`` weeks up
    to ``until`` (default: the newest week with results). Weighted by :func:`weighting_snapshot`. At
    each backend's declared precision, or over the rows judged at ``precision``."""
    snapshot = weighting_snapshot(session, snapshot_id)
    if until is None:
        q = select(func.max(Result.week))
        if backend:
            q = q.where(Result.backend == backend)
        if tier:
            q = q.where(Result.tier == tier)
        until = session.scalar(q)
    if snapshot is None or until is None:
        return []
    since = week_minus(until, max(weeks, 1) - 1)
    filters = [Result.week >= since, Result.week <= until, precision_scope(precision)]
    if backend:
        filters.append(Result.backend == backend)
    if tier:
        filters.append(Result.tier == tier)
    ranked = (
        select(
            Result.model_id.label("mid"),
            Result.backend,
            Result.tier,
            Result.week,
            Result.status,
            func.row_number()
            .over(
                partition_by=(Result.model_id, Result.backend, Result.tier, Result.week),
                order_by=(Result.started_at.desc(), Result.id.desc()),
            )
            .label("rn"),
        )
        .where(*filters)
        .subquery()
    )
    q = (
        select(
            ranked.c.backend,
            ranked.c.tier,
            ranked.c.week,
            ranked.c.status,
            func.count(),
            func.coalesce(func.sum(SnapshotEntry.downloads), 0),
        )
        .join(SnapshotEntry, (SnapshotEntry.model_id == ranked.c.mid) & (SnapshotEntry.snapshot_id == snapshot.id))
        .where(ranked.c.rn == 1)
        .group_by(ranked.c.backend, ranked.c.tier, ranked.c.week, ranked.c.status)
    )
    points: dict[tuple[str, str, str], Coverage] = {}
    for b, t, w, status, n, dl in session.execute(q):
        cov = points.get((b, t, w))
        if cov is None:
            cov = points[(b, t, w)] = Coverage(
                backend=b,
                tier=t,
                week=w,
                snapshot_id=snapshot.id,
                catalog_models=snapshot.n_models,
                catalog_downloads=snapshot.total_downloads,
                status_counts={s: 0 for s in ALL_STATUSES},
                precision=precision_label(precision),
            )
        _accumulate(cov, status, n, dl)
    return [points[k] for k in sorted(points, key=lambda k: (k[2], k[0], k[1]))]


@cached
def scopes(session: Session, week: str | None = None) -> list[tuple[str, str]]:
    """The (backend, tier) pairs with results in ``week`` (default: the newest week)."""
    week = week or session.scalar(select(func.max(Result.week)))
    if week is None:
        return []
    return [
        (b, t)
        for b, t in session.execute(
            select(Result.backend, Result.tier)
            .where(Result.week == week, Result.env == "")
            .distinct()
            .order_by(Result.backend, Result.tier)
        )
    ]


def normalize_op(name: str) -> str:
    """``aten::foo``, ``aten::foo.out`` and ``aten.foo.default`` are all ``aten::foo``."""
    m = ATEN_OP.match(name.strip())
    return f"aten::{m.group(1)}" if m else name.strip()


def blocking_op(status: str, fallback_ops: list[str] | None, error: dict | None) -> tuple[str, str] | None:
    """The one op that alone keeps a model from the next coverage level, and which level:

    - ``strict``: status ``pass_with_fallback`` and ``fallback_ops`` names exactly one op — lowering
      that op would make the model ``pass``;
    - ``functional``: status ``compile_error`` or ``runtime_error`` and the error message names
      exactly one distinct ATen op (``aten::name`` or ``aten.name``) — supporting it would let the
      model run.
    Ops are compared without their overload name. Anything else: None (no single blocker)."""
    if status == Status.PASS_WITH_FALLBACK:
        ops = {normalize_op(o) for o in (fallback_ops or [])}
        if len(ops) == 1:
            return ops.pop(), "strict"
        return None
    if status in SINGLE_OP_ERROR_STATUSES and error:
        ops = {f"aten::{m}" for m in ATEN_OP.findall(str(error.get("message") or ""))}
        if len(ops) == 1:
            return ops.pop(), "functional"
    return None


def _weights(session: Session, snapshot: Snapshot | None, ids: list[str]) -> dict[str, int]:
    if snapshot is None or not ids:
        return {}
    out: dict[str, int] = {}
    for i in range(0, len(ids), 5000):
        chunk = ids[i : i + 5000]
        out.update(
            session.execute(
                select(SnapshotEntry.model_id, SnapshotEntry.downloads).where(
                    SnapshotEntry.snapshot_id == snapshot.id, SnapshotEntry.model_id.in_(chunk)
                )
            ).all()
        )
    return out


@cached
def op_gaps(
    session: Session,
    backend: str | None = None,
    tier: str | None = None,
    week: str | None = None,
    limit: int = 50,
    precision: str | None = None,
    snapshot_id: int | None = None,
    models: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Ops ranked by the downloads they would unlock (see ``blocking_op`` for the rule); over the
    results of ``models`` only when given."""
    backend, tier, week = default_scope(session, backend, tier, week, precision)
    snapshot = weighting_snapshot(session, snapshot_id)
    cov = coverage(
        session, backend=backend, tier=tier, week=week, precision=precision, snapshot=snapshot, models=models
    )
    out: dict[str, Any] = {
        "backend": backend,
        "tier": tier,
        "week": week,
        "precision": precision_label(precision),
        "valid_reference": cov.valid_reference,
        "valid_reference_downloads": cov.valid_reference_downloads,
        "items": [],
        "total": 0,
    }
    if backend is None or week is None:
        return out
    ranked = _latest_in_scope(
        backend, tier, week, Result.status, Result.fallback_ops, Result.error, precision=precision, models=models
    )
    rows = session.execute(
        select(ranked.c.mid, ranked.c.status, ranked.c.fallback_ops, ranked.c.error)
        .join(
            SnapshotEntry,
            (SnapshotEntry.model_id == ranked.c.mid) & (SnapshotEntry.snapshot_id == (snapshot.id if snapshot else -1)),
        )
        .where(ranked.c.rn == 1, ranked.c.status.in_((Status.PASS_WITH_FALLBACK.value, *SINGLE_OP_ERROR_STATUSES)))
        .add_columns(SnapshotEntry.downloads)
    ).all()
    ops: dict[str, dict[str, Any]] = {}
    sets: dict[frozenset[str], dict[str, Any]] = {}
    for mid, status, fallback, error, dl in rows:
        dl = int(dl or 0)
        named = (
            {normalize_op(o) for o in (fallback or [])}
            if status == Status.PASS_WITH_FALLBACK
            else {f"aten::{m}" for m in ATEN_OP.findall(str((error or {}).get("message") or ""))}
        )
        if named:  # the whole set a model falls back on (or names in its error): lowering all of it unlocks it
            st = sets.setdefault(frozenset(named), {"ops": sorted(named), "models": 0, "downloads": 0, "examples": []})
            st["models"] += 1
            st["downloads"] += dl
            st["examples"].append((dl, mid))
        for op in named:
            e = ops.setdefault(
                op,
                {
                    "op": op,
                    "unlocked_downloads": 0,
                    "unlocked_models": 0,
                    "strict_models": 0,
                    "strict_downloads": 0,
                    "functional_models": 0,
                    "functional_downloads": 0,
                    "affected_models": 0,
                    "affected_downloads": 0,
                    "examples": [],
                },
            )
            e["affected_models"] += 1
            e["affected_downloads"] += dl
        blk = blocking_op(status, fallback, error)
        if blk:
            op, level = blk
            e = ops[op]
            e["unlocked_models"] += 1
            e["unlocked_downloads"] += dl
            e[f"{level}_models"] += 1
            e[f"{level}_downloads"] += dl
            e["examples"].append((dl, mid, status))
    items = sorted(ops.values(), key=lambda e: (-e["unlocked_downloads"], -e["affected_downloads"], e["op"]))
    vr = cov.valid_reference_downloads
    for e in items:
        ex = sorted(e.pop("examples"), key=lambda t: (-t[0], t[1]))[:5]
        e["example_models"] = [{"model_id": m, "downloads": d, "status": s} for d, m, s in ex]
        e["unlocked_share"] = round(e["unlocked_downloads"] / vr, 6) if vr else None
    out["total"] = len(items)
    out["items"] = items[:limit]
    # Where no op unlocks anything alone, the sets that would: smallest first among equal downloads.
    op_sets = sorted(sets.values(), key=lambda e: (-e["downloads"], len(e["ops"]), e["ops"]))
    for e in op_sets:
        e["example_models"] = [m for _, m in sorted(e.pop("examples"), key=lambda t: (-t[0], t[1]))[:3]]
    out["op_sets"] = op_sets[:limit]
    out["none_alone"] = bool(items) and not any(e["unlocked_models"] for e in items)
    return out


@cached
def failure_clusters(
    session: Session,
    backend: str | None = None,
    tier: str | None = None,
    week: str | None = None,
    status: str | None = None,
    limit: int = 50,
    precision: str | None = None,
    snapshot_id: int | None = None,
    models: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Failing latest results (any status but pass / pass_with_fallback) grouped by error
    signature (the status itself where a result has none); of ``models`` only when given.

    Each cluster has an ``owner``: ``backend`` (a failure on a valid CPU reference) or ``zoo``
    (``unsupported`` / ``reference_error``: Zoo's own gap). The backend's clusters come first, by
    downloads, then Zoo's. ``failing_*`` and ``new_*`` count the backend's failures only; Zoo's gaps
    are counted in ``zoo_models`` / ``zoo_downloads``; ``known_*`` / ``expired_models`` count every
    row a known-failure entry names, whoever's it is."""
    backend, tier, week = default_scope(session, backend, tier, week, precision)
    out: dict[str, Any] = {
        "backend": backend, "tier": tier, "week": week, "precision": precision_label(precision),
        "failing_models": 0, "failing_downloads": 0, "new_models": 0, "new_downloads": 0,
        "known_models": 0, "known_downloads": 0, "expired_models": 0, "zoo_models": 0, "zoo_downloads": 0,
        "backend_clusters": 0, "items": [], "total": 0,
    }  # fmt: skip
    if backend is None or week is None:
        return out
    snapshot = weighting_snapshot(session, snapshot_id)
    ranked = _latest_in_scope(
        backend,
        tier,
        week,
        Result.status,
        Result.reason,
        Result.error_signature,
        Result.details,
        precision=precision,
        models=models,
    )
    q = (
        select(
            ranked.c.mid,
            ranked.c.status,
            ranked.c.reason,
            ranked.c.error_signature,
            func.coalesce(SnapshotEntry.downloads, 0),
            ranked.c.details,
        )
        .outerjoin(
            SnapshotEntry,
            (SnapshotEntry.model_id == ranked.c.mid) & (SnapshotEntry.snapshot_id == (snapshot.id if snapshot else -1)),
        )
        .where(ranked.c.rn == 1, ranked.c.status.not_in(tuple(PASSING)))
    )
    if status:
        q = q.where(ranked.c.status == status)
    groups: dict[str, dict[str, Any]] = {}
    today = _dt.date.today()
    for mid, st, reason, sig, dl, details in session.execute(q):
        dl = int(dl or 0)
        key = sig or (f"{st}: {reason}" if reason else st)
        who = owner(st) or "backend"
        g = groups.setdefault(
            (who, key),
            {
                "signature": key,
                "owner": who,
                "error_type": key.split(":", 1)[0] if sig else None,
                "models": 0,
                "downloads": 0,
                "statuses": {},
                "examples": [],
                "known": 0,
                "expired": 0,
                "known_failure": None,
            },
        )
        g["models"] += 1
        g["downloads"] += dl
        g["statuses"][st] = g["statuses"].get(st, 0) + 1
        g["examples"].append((dl, mid))
        if who == "zoo":  # Zoo's gap: never a failure of the backend's, never new
            out["zoo_models"] += 1
            out["zoo_downloads"] += dl
        else:
            out["failing_models"] += 1
            out["failing_downloads"] += dl
        known = known_failure_now((details or {}).get("known_failure"), today)
        if known is None:
            if who == "zoo":
                continue
            out["new_models"] += 1
            out["new_downloads"] += dl
            continue
        g["known_failure"] = g["known_failure"] or known
        out["known_models"] += 1
        out["known_downloads"] += dl
        if known["expired"]:
            g["expired"] += 1
            out["expired_models"] += 1
        else:
            g["known"] += 1
    items = sorted(
        groups.values(), key=lambda g: (g["owner"] != "backend", -g["downloads"], -g["models"], g["signature"])
    )
    out["backend_clusters"] = sum(g["owner"] == "backend" for g in items)
    for g in items:
        g["example_models"] = [
            {"model_id": m, "downloads": d} for d, m in sorted(g.pop("examples"), key=lambda t: (-t[0], t[1]))[:5]
        ]
    out["total"] = len(items)
    out["items"] = items[:limit]
    return out


def cluster_history(session: Session, backend: str, tier: str, signature: str, models: list[str]) -> dict[str, Any]:
    """Since when: the first week any result of (backend, tier) had ``signature``, and the last week
    any of ``models`` passed there (None when never, in the stored history)."""
    first = session.scalar(
        select(func.min(Result.week)).where(
            Result.backend == backend, Result.tier == tier, Result.error_signature == signature[:300], Result.env == ""
        )
    )
    last_pass = (
        session.scalar(
            select(func.max(Result.week)).where(
                Result.backend == backend,
                Result.tier == tier,
                Result.model_id.in_(models),
                Result.status.in_(tuple(PASSING)),
                Result.env == "",
            )
        )
        if models
        else None
    )
    return {"first_seen": first, "last_pass": last_pass}


def known_failure_now(known: Any, today: _dt.date | None = None) -> dict[str, Any] | None:
    """A stored ``details.known_failure`` with ``expired`` as of ``today`` (an entry that was
    current when the row was stored may have expired since)."""
    if not isinstance(known, dict) or not known.get("expires"):
        return None
    try:
        expires = _dt.date.fromisoformat(str(known["expires"]))
    except ValueError:
        return None
    return {**known, "expired": (today or _dt.date.today()) > expires}


@cached
def transitions(
    session: Session,
    backend: str | None = None,
    tier: str | None = None,
    week: str | None = None,
    since: str | None = None,
    direction: str = "regressed",
    limit: int = 200,
    precision: str | None = None,
    snapshot_id: int | None = None,
) -> dict[str, Any]:
    """Models whose latest result changed between ``since`` (default: the week before) and ``week``:
    ``regressed`` = passing (pass / pass_with_fallback) then, failing now; ``fixed`` = the reverse.
    With each: both statuses, the error now, and the versions of the first failing (or first
    passing) result next to those of the last result before it, with what changed."""
    backend, tier, week = default_scope(session, backend, tier, week, precision)
    out: dict[str, Any] = {
        "backend": backend,
        "tier": tier,
        "week": week,
        "precision": precision_label(precision),
        "since": None,
        "direction": direction,
        "items": [],
        "total": 0,
        "downloads": 0,
    }
    if backend is None or week is None:
        return out
    since = since or previous_week(week)
    out["since"] = since
    snapshot = weighting_snapshot(session, snapshot_id)
    now = _latest_in_scope(
        backend, tier, week, Result.status, Result.error_signature, Result.versions, Result.repro, precision=precision
    )
    then = (
        select(
            Result.model_id.label("mid"),
            Result.status,
            Result.versions,
            func.row_number()
            .over(partition_by=Result.model_id, order_by=(Result.started_at.desc(), Result.id.desc()))
            .label("rn"),
        )
        .where(Result.backend == backend, Result.tier == tier, Result.week == since, precision_scope(precision))
        .subquery("then")
    )
    passing = tuple(PASSING)
    cond_now = now.c.status.not_in(passing) if direction == "regressed" else now.c.status.in_(passing)
    cond_then = then.c.status.in_(passing) if direction == "regressed" else then.c.status.not_in(passing)
    q = (
        select(
            now.c.mid,
            then.c.status,
            now.c.status,
            now.c.error_signature,
            then.c.versions,
            now.c.versions,
            now.c.repro,
            func.coalesce(SnapshotEntry.downloads, 0),
        )
        .join(then, and_(then.c.mid == now.c.mid, then.c.rn == 1))
        .outerjoin(
            SnapshotEntry,
            (SnapshotEntry.model_id == now.c.mid) & (SnapshotEntry.snapshot_id == (snapshot.id if snapshot else -1)),
        )
        .where(now.c.rn == 1, cond_now, cond_then)
    )
    items = []
    for mid, st_then, st_now, sig, v_then, v_now, repro, dl in session.execute(q):
        v_then, v_now = v_then or {}, v_now or {}
        changed = {
            k: [v_then.get(k), v_now.get(k)] for k in sorted(set(v_then) | set(v_now)) if v_then.get(k) != v_now.get(k)
        }
        items.append(
            {
                "model_id": mid,
                "downloads": int(dl or 0),
                "status_before": st_then,
                "status_now": st_now,
                "error_signature": sig,
                "first_versions": v_now,
                "previous_versions": v_then,
                "changed_versions": changed,
                "repro": repro,
            }
        )
    items.sort(key=lambda i: (-i["downloads"], i["model_id"]))
    out["total"] = len(items)
    out["downloads"] = sum(i["downloads"] for i in items)
    out["items"] = items[:limit]
    return out


@cached
def slowest_compiles(
    session: Session,
    backend: str | None = None,
    tier: str | None = None,
    week: str | None = None,
    limit: int = 10,
    precision: str | None = None,
) -> list[dict[str, Any]]:
    backend, tier, week = default_scope(session, backend, tier, week, precision)
    if backend is None or week is None:
        return []
    ranked = _latest_in_scope(backend, tier, week, Result.status, Result.metrics, precision=precision)
    rows = session.execute(select(ranked.c.mid, ranked.c.status, ranked.c.metrics).where(ranked.c.rn == 1)).all()
    out = [
        {
            "model_id": m,
            "status": s,
            "compile_s": (mt or {}).get("compile_s"),
            "target_ms": (mt or {}).get("target_ms"),
            "reference_ms": (mt or {}).get("reference_ms"),
        }
        for m, s, mt in rows
        if isinstance((mt or {}).get("compile_s"), (int, float))
    ]
    out.sort(key=lambda r: (-r["compile_s"], r["model_id"]))
    return out[:limit]


def latest_status_map(session: Session, ids: list[str], weeks: int | None = None) -> dict[str, dict[str, str]]:
    """model → {"backend/tier": latest status at the backend's declared precision} with scalar
    columns only."""
    out: dict[str, dict[str, str]] = {i: {} for i in ids}
    if not ids:
        return out
    q = select(Result.model_id, Result.backend, Result.tier, Result.status).where(
        Result.model_id.in_(ids), precision_scope()
    )
    if weeks:
        newest = session.scalar(select(func.max(Result.week)))
        if newest:
            q = q.where(Result.week >= week_minus(newest, weeks - 1))
    for mid, backend, tier, status in session.execute(q.order_by(Result.started_at.asc(), Result.id.asc())):
        out[mid][f"{backend}/{tier}"] = status
    return out


def has_backend(session: Session, backend: str) -> bool:
    """Whether any result is stored under this backend spec (an index lookup)."""
    return session.scalar(select(Result.id).where(Result.backend == backend, Result.env == "").limit(1)) is not None


def newest_week(session: Session) -> str | None:
    return session.scalar(select(func.max(Result.week)).where(Result.env == ""))


@cached
def failing_models(
    session: Session,
    backend: str | None = None,
    tier: str | None = None,
    week: str | None = None,
    limit: int = 100,
    precision: str | None = None,
    snapshot_id: int | None = None,
) -> dict[str, Any]:
    """Failing latest results of a scope (for the report): the backend's failures first, then Zoo's
    gaps (``unsupported`` / ``reference_error``), each most downloaded first, each with its ``owner``."""
    backend, tier, week = default_scope(session, backend, tier, week, precision)
    if backend is None or week is None:
        return {"items": [], "total": 0}
    snapshot = weighting_snapshot(session, snapshot_id)
    ranked = _latest_in_scope(
        backend, tier, week, Result.status, Result.reason, Result.error, Result.repro, precision=precision
    )
    base = (
        select(
            ranked.c.mid,
            ranked.c.status,
            ranked.c.reason,
            ranked.c.error,
            ranked.c.repro,
            func.coalesce(SnapshotEntry.downloads, 0).label("dl"),
        )
        .outerjoin(
            SnapshotEntry,
            (SnapshotEntry.model_id == ranked.c.mid) & (SnapshotEntry.snapshot_id == (snapshot.id if snapshot else -1)),
        )
        .where(ranked.c.rn == 1, ranked.c.status.not_in(tuple(PASSING)))
    )
    total = session.scalar(select(func.count()).select_from(base.subquery())) or 0
    zoo_first = case((ranked.c.status.in_(tuple(NO_VALID_REFERENCE)), 1), else_=0)
    rows = session.execute(
        base.order_by(zoo_first, func.coalesce(SnapshotEntry.downloads, 0).desc(), ranked.c.mid).limit(limit)
    ).all()
    zoo_total = (
        session.scalar(
            select(func.count()).select_from(base.where(ranked.c.status.in_(tuple(NO_VALID_REFERENCE))).subquery())
        )
        or 0
    )
    items = [
        {
            "model_id": m,
            "status": st,
            "owner": owner(st) or "backend",
            "reason": rs,
            "downloads": int(dl or 0),
            "error": ((err or {}).get("message") or "")[:200],
            "repro": repro,
        }
        for m, st, rs, err, repro, dl in rows
    ]
    return {"items": items, "total": total, "backend_total": total - zoo_total, "zoo_total": zoo_total}


SOURCE_WORDS = {"plugin": "declared by the plugin", "default": "the default", "flag": "asked for with --precision"}


@cached
def precision_summary(
    session: Session, week: str | None = None, backend: str | None = None, tier: str | None = None
) -> list[dict[str, Any]]:
    """What the rows of a week (default: the newest) were judged at, per backend and tier: one item
    per (precision, source) with its rows and how many of them would also meet the fp32 budget
    (``details.strict_fp32``). Rows without a verdict precision are left out. Declared precisions
    (source ``plugin`` or ``default``) come before those a ``--precision`` flag asked for."""
    week = week or newest_week(session)
    if week is None:
        return []
    strict = case((Result.details["strict_fp32"].as_boolean().is_(True), 1), else_=0)
    q = (
        select(
            Result.backend,
            Result.tier,
            Result.precision,
            Result.precision_source,
            func.count(),
            func.coalesce(func.sum(strict), 0),
        )
        .where(Result.week == week, Result.precision_source.is_not(None), Result.env == "")
        .group_by(Result.backend, Result.tier, Result.precision, Result.precision_source)
    )
    if backend:
        q = q.where(Result.backend == backend)
    if tier:
        q = q.where(Result.tier == tier)
    items = [
        {
            "backend": b,
            "tier": t,
            "week": week,
            "precision": p,
            "source": src,
            "declared": src != "flag",
            "rows": int(n),
            "strict_fp32": int(k or 0),
        }
        for b, t, p, src, n, k in session.execute(q)
    ]
    items.sort(key=lambda i: (i["backend"], i["tier"], not i["declared"], -i["rows"], i["precision"]))
    return items


def precision_line(item: dict[str, Any]) -> str:
    """One line a lead reads: ``cpu+openvino · tiny: judged at bf16 (declared by the plugin); 40
    rows, 3 strict fp32`` (strict fp32: would also meet the fp32 budget)."""
    words = SOURCE_WORDS.get(item["source"], item["source"])
    verb = "judged at" if item["declared"] else "also judged at"
    rows = f"{item['rows']} row{'s' if item['rows'] != 1 else ''}"
    line = f"{item['backend']} · {item['tier']}: {verb} {item['precision']} ({words}); {rows}"
    if item["precision"] != "fp32":
        line += f", {item['strict_fp32']} strict fp32"
    return line


# ---------------------------------------------------------------------------------------------
# Release comparison: the same models, the same tier, in two envs (``zoo env``).
# ---------------------------------------------------------------------------------------------
DEFAULT_ENV = "default"  # what the comparison calls Zoo's own interpreter (rows with env "")
NUMERICS_FACTOR = 2.0  # rmse_ratio up or down by more than this is "numerics moved"
COMPARE_LABELS = {
    "fixed": "fixed: failed in A, passes in B",
    "broken": "broken: passed in A, fails in B",
    "still_failing_same": "still failing, same signature",
    "still_failing_other": "still failing, another signature",
    "numerics_moved": "numerics moved (rmse_ratio > 2x either way)",
    "zoo": "Zoo could not judge one side",
    "unchanged": "unchanged",
}
COMPARE_KINDS = tuple(COMPARE_LABELS)


def _env_key(env: str) -> str:
    return "" if env == DEFAULT_ENV else env


def _latest_env_rows(
    session: Session, env: str, backend: str | None, tier: str, models: tuple[str, ...] | None
) -> dict[tuple[str, str], Result]:
    """The newest row per (model, backend) of ``env`` at the tier, at the declared precision."""
    newest = (
        func.row_number()
        .over(partition_by=(Result.model_id, Result.backend), order_by=(Result.started_at.desc(), Result.id.desc()))
        .label("rn")
    )
    inner = select(Result.id, newest).where(Result.tier == tier, precision_scope(None, _env_key(env)))
    if backend:
        inner = inner.where(Result.backend == backend)
    inner = inner.where(*_of_models(models)).subquery()
    q = select(Result).join(inner, Result.id == inner.c.id).where(inner.c.rn == 1)  # one row each, not the history
    return {(r.model_id, r.backend): r for r in session.scalars(q)}


def _rmse_ratio(r: Result) -> float | None:
    v = (r.metrics or {}).get("rmse_ratio")
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def compare_kind(a: Result, b: Result) -> str:
    """What happened to one model between env A's row ``a`` and env B's row ``b``."""
    if owner(a.status) == "zoo" or owner(b.status) == "zoo":
        return "zoo"  # Zoo could not judge it on one side: not the release's doing
    pa, pb = a.status in PASSING, b.status in PASSING
    if not pa and pb:
        return "fixed"
    if pa and not pb:
        return "broken"
    if not pa and not pb:
        same = (a.status, a.error_signature or "") == (b.status, b.error_signature or "")
        return "still_failing_same" if same else "still_failing_other"
    ra, rb = _rmse_ratio(a), _rmse_ratio(b)
    if ra and rb and max(ra / rb, rb / ra) > NUMERICS_FACTOR:
        return "numerics_moved"
    return "unchanged"


@cached
def compare_envs(
    session: Session,
    env_a: str,
    env_b: str,
    backend: str | None = None,
    tier: str = "tiny",
    top: int | None = None,
) -> dict[str, Any]:
    """Env A against env B: for each model and backend with a row in both (the same tier, each
    side's newest row), whether it was fixed, broke, still fails (with the same signature or
    another), its numerics moved (rmse_ratio by more than 2x), Zoo could not judge it, or nothing
    changed. Counts by models and downloads per kind and per cluster (the failing side's
    signature); ``top`` keeps the snapshot's N most-downloaded models."""
    snap = latest_snapshot(session)
    models: tuple[str, ...] | None = None
    if top:
        models = tuple(m.id for m, _ in snapshot_models(session, snap, top)) if snap else ()
    rows_a = _latest_env_rows(session, env_a, backend, tier, models)
    rows_b = _latest_env_rows(session, env_b, backend, tier, models)
    both = sorted(set(rows_a) & set(rows_b))
    weights = _weights(session, snap, sorted({m for m, _ in both}))
    counts = {k: {"models": 0, "downloads": 0} for k in COMPARE_KINDS}
    clusters: dict[tuple[str, str], dict[str, Any]] = {}
    items = []
    for mid, be in both:
        a, b = rows_a[(mid, be)], rows_b[(mid, be)]
        kind = compare_kind(a, b)
        dl = weights.get(mid, 0)
        counts[kind]["models"] += 1
        counts[kind]["downloads"] += dl
        failing = b if b.status not in PASSING else a
        signature = (failing.error_signature or failing.status) if kind != "unchanged" else ""
        if kind not in ("unchanged", "numerics_moved"):
            blank = {"kind": kind, "signature": signature, "models": 0, "downloads": 0}
            c = clusters.setdefault((kind, signature), blank)
            c["models"] += 1
            c["downloads"] += dl
        items.append(
            {
                "model_id": mid,
                "backend": be,
                "kind": kind,
                "downloads": dl,
                "a": {"id": a.id, "status": a.status, "signature": a.error_signature, "rmse_ratio": _rmse_ratio(a),
                      "versions": a.versions or {}, "week": a.week},
                "b": {"id": b.id, "status": b.status, "signature": b.error_signature, "rmse_ratio": _rmse_ratio(b),
                      "versions": b.versions or {}, "week": b.week},
            }
        )  # fmt: skip
    order = {k: i for i, k in enumerate(COMPARE_KINDS)}
    items.sort(key=lambda i: (order[i["kind"]], -i["downloads"], i["model_id"]))
    return {
        "env_a": env_a,
        "env_b": env_b,
        "backend": backend,
        "tier": tier,
        "top": top,
        "models": len(both),
        "only_a": len(set(rows_a) - set(rows_b)),
        "only_b": len(set(rows_b) - set(rows_a)),
        "counts": counts,
        "clusters": sorted(clusters.values(), key=lambda c: (order[c["kind"]], -c["downloads"], -c["models"])),
        "items": items,
    }


def env_names(session: Session) -> list[str]:
    """The envs with stored rows (``default``, Zoo's own, first when it has any)."""
    found = [e for (e,) in session.execute(select(Result.env).distinct().order_by(Result.env))]
    return [DEFAULT_ENV if e == "" else e for e in found]


def _skipped_between(b: Bisection) -> list[str]:
    """The skipped versions that leave the first bad one uncertain: those between last good and first bad."""
    from packaging.version import InvalidVersion, Version

    try:
        lo, hi = Version(b.last_good or ""), Version(b.first_bad or "")
        return [
            st["version"]
            for st in b.steps or []
            if st.get("verdict") == "skip" and lo < Version(str(st.get("version"))) < hi
        ]
    except InvalidVersion:
        return []


def bisections(session: Session, model_ids: list[str], backend: str | None = None) -> list[dict[str, Any]]:
    """Stored ``zoo bisect`` outcomes of these models (on ``backend``), newest first."""
    if not model_ids:
        return []
    q = select(Bisection).where(Bisection.model_id.in_(model_ids))
    if backend:
        q = q.where(Bisection.backend == backend)
    out = []
    for b in session.scalars(q.order_by(Bisection.created_at.desc(), Bisection.id.desc())):
        out.append(
            {
                "model_id": b.model_id,
                "backend": b.backend,
                "tier": b.tier,
                "package": b.package,
                "good": b.good,
                "bad": b.bad,
                "first_bad": b.first_bad,
                "last_good": b.last_good,
                "match": b.match,
                "bad_status": b.bad_status,
                "bad_signature": b.bad_signature,
                "env_base": b.env_base or None,
                "steps": b.steps or [],
                "skipped": _skipped_between(b),
                "created_at": b.created_at.isoformat() if b.created_at else None,
            }
        )
    return out
