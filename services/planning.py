"""What to validate next: download weight times staleness, boosted by triggers; fingerprint dedup
before enqueue; sweeps claimed once per period.

Priority of a catalog model for a backend and tier::

    score = weight * (1 + weeks_stale) * (TRIGGER_BOOST if triggers else 1)

``weight`` is the model's share of the snapshot's downloads; ``weeks_stale`` the age of its newest
result in weeks (capped at ``MAX_STALE_WEEKS``; never validated counts as the cap). Triggers:

- ``new_model``: never validated on this backend and tier;
- ``new_revision``: the catalog's commit of the model differs from the revision last validated;
- ``new_versions``: the newest result on this backend ran other package versions (torch, the
  backend's package, transformers) than the model's last result: the fleet was upgraded;
- ``new_harness``: the last result came from another harness version;
- ``reconfirm_failure``: the last result is a failure seen only once (one attempt): it is run
  again to tell a real regression from a flake.

The daily refresh takes the K best-scoring models that are due (a trigger, or a result at least
``MIN_AGE_DAYS`` old); the weekly sweep takes every model without a result this ISO week (or with
a trigger). Models that share a plan-time fingerprint are grouped before they are enqueued: one
task validates the group's best-scoring model and fans the result out to the others (each still
gets its own row; ``services.validation`` re-checks the fingerprint of each). Fingerprints are cached
per model, tier and commit (``model_plans``); planning the uncached ones is bounded by
``ZOO_PLAN_BUDGET_S`` (default 1800 s) per sweep, and models left unplanned are enqueued alone.

:func:`plan_sweep` runs one sweep end to end; publishing its groups is the caller's ``publish``
(the Celery workers pass ``workers.publish.enqueue_groups``), so nothing here knows the broker.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db import queries, repository
from db.models import Model, Result, SnapshotEntry
from db.session import session_scope
from db.weeks import iso_week
from zoo_runner.exceptions import NotSupported, ZooError
from zoo_runner.request import HARNESS_VERSION, ValidationRequest
from zoo_runner.settings import settings
from zoo_runner.statuses import NO_VALID_REFERENCE, PASSING

from . import catalog

log = logging.getLogger(__name__)

TRIGGER_BOOST = 10.0
MAX_STALE_WEEKS = 8.0
MIN_AGE_DAYS = 1.0
TRIGGERS = ("new_model", "new_revision", "new_versions", "new_harness", "reconfirm_failure")
IGNORED_VERSION_KEYS = ("zoo",)  # the harness version is its own trigger


@dataclass
class Candidate:
    """A catalog model scored for one backend and tier."""

    model_id: str
    downloads: int
    weight: float
    sha: str | None = None
    last_at: dt.datetime | None = None
    age_days: float | None = None
    triggers: list[str] = field(default_factory=list)
    score: float = 0.0
    fingerprint: str | None = None

    def due(self, min_age_days: float = MIN_AGE_DAYS) -> bool:
        """A trigger fired, or its newest result is at least ``min_age_days`` old (or missing)."""
        return bool(self.triggers) or self.age_days is None or self.age_days >= min_age_days


@dataclass
class Group:
    """One task: the leader is validated, the followers share its fingerprint."""

    leader: Candidate
    followers: list[Candidate] = field(default_factory=list)

    @property
    def model_ids(self) -> list[str]:
        """The leader's id, then the followers'."""
        return [self.leader.model_id] + [f.model_id for f in self.followers]


def _aware(t: dt.datetime | None) -> dt.datetime | None:
    if t is not None and t.tzinfo is None:
        return t.replace(tzinfo=dt.timezone.utc)
    return t


def latest_results(session: Session, backend: str, tier: str) -> dict[str, Any]:
    """Model id -> its newest result row (as a named tuple) on ``backend`` and ``tier`` at the
    backend's declared precision (what sweeps run; ``--precision`` runs are someone's experiment)."""
    rn = (
        func.row_number()
        .over(partition_by=Result.model_id, order_by=(Result.started_at.desc(), Result.id.desc()))
        .label("rn")
    )
    sub = (
        select(
            Result.model_id,
            Result.started_at,
            Result.revision,
            Result.status,
            Result.harness_version,
            Result.versions,
            Result.attempts,
            Result.week,
            rn,
        )
        .where(Result.backend == backend, Result.tier == tier, queries.precision_scope())
        .subquery()
    )
    return {r.model_id: r for r in session.execute(select(sub).where(sub.c.rn == 1))}


def fleet_versions(session: Session, backend: str, tier: str) -> dict[str, str]:
    """The package versions of the newest result on this backend and tier: what the fleet runs now."""
    row = session.execute(
        select(Result.versions)
        .where(Result.backend == backend, Result.tier == tier, Result.env == "")
        .order_by(Result.started_at.desc(), Result.id.desc())
        .limit(1)
    ).first()
    return {k: v for k, v in ((row[0] if row else None) or {}).items() if k not in IGNORED_VERSION_KEYS}


def triggers_for(model_sha: str | None, last: Any, current_versions: dict[str, str]) -> list[str]:
    """The triggers (module docstring) that fire for a model given its newest result ``last``."""
    if last is None:
        return ["new_model"]
    out = []
    if model_sha and last.revision and model_sha != last.revision:
        out.append("new_revision")
    versions = {k: v for k, v in (last.versions or {}).items() if k not in IGNORED_VERSION_KEYS}
    if current_versions and any(versions.get(k) != v for k, v in current_versions.items()):
        out.append("new_versions")
    if str(last.harness_version) != str(HARNESS_VERSION):
        out.append("new_harness")
    if last.status not in PASSING and last.status not in NO_VALID_REFERENCE and (last.attempts or 1) < 2:
        out.append("reconfirm_failure")
    return out


def score(weight: float, age_days: float | None, triggers: list[str]) -> float:
    """``weight * (1 + weeks_stale) * (TRIGGER_BOOST if triggers else 1)``."""
    weeks = MAX_STALE_WEEKS if age_days is None else min(MAX_STALE_WEEKS, max(0.0, age_days) / 7.0)
    return weight * (1.0 + weeks) * (TRIGGER_BOOST if triggers else 1.0)


def candidates(
    session: Session, backend: str, tier: str, now: dt.datetime | None = None, snapshot_id: int | None = None
) -> list[Candidate]:
    """Every model of the catalog snapshot (default: the newest), scored, best first."""
    now = _aware(now) or dt.datetime.now(dt.timezone.utc)
    if snapshot_id is None:
        snap = queries.latest_snapshot(session)
        if snap is None:
            return []
        snapshot_id = snap.id
    rows = session.execute(
        select(SnapshotEntry.model_id, SnapshotEntry.downloads, Model.sha)
        .join(Model, Model.id == SnapshotEntry.model_id)
        .where(SnapshotEntry.snapshot_id == snapshot_id)
        .order_by(SnapshotEntry.rank)
    ).all()
    total = sum(max(0, d or 0) for _, d, _ in rows) or 1
    latest = latest_results(session, backend, tier)
    current = fleet_versions(session, backend, tier)
    out = []
    for model_id, downloads, sha in rows:
        last = latest.get(model_id)
        last_at = _aware(last.started_at) if last is not None else None
        age = (now - last_at).total_seconds() / 86400.0 if last_at else None
        trig = triggers_for(sha, last, current)
        w = max(0, downloads or 0) / total
        out.append(
            Candidate(
                model_id=model_id,
                downloads=downloads or 0,
                weight=w,
                sha=sha,
                last_at=last_at,
                age_days=age,
                triggers=trig,
                score=score(w, age, trig),
            )
        )
    out.sort(key=lambda c: (-c.score, -c.downloads, c.model_id))
    return out


def daily_selection(cands: list[Candidate], top: int, min_age_days: float = MIN_AGE_DAYS) -> list[Candidate]:
    """The ``top`` best-scoring candidates that are due."""
    return [c for c in cands if c.due(min_age_days)][:top]


def weekly_selection(cands: list[Candidate], week: str) -> list[Candidate]:
    """Everything without a result this ISO week, and everything with a trigger."""
    return [c for c in cands if c.triggers or c.last_at is None or iso_week(c.last_at) != week]


# ---------------------------------------------------------------- fingerprint dedup before enqueue


def compute_plan(model_id: str, backend: str, tier: str) -> tuple[str | None, str | None, bool]:
    """(sha, fingerprint, cacheable) of one model, preparing it as a worker would."""
    from zoo_runner.hub import prepare
    from zoo_runner.planning import plan_fingerprint  # imports torch: only when a plan is computed

    req = ValidationRequest(model_id=model_id, backend=backend, tier=tier)
    try:
        req = prepare(req)
    except NotSupported:
        return None, None, True  # refused by policy: a row of its own, never shared
    except ZooError as exc:  # Hub unreachable, unknown model: try again next time
        log.debug("no plan for %s: %s", model_id, exc)
        return None, None, False
    except Exception as exc:  # a model the planner cannot read still gets validated alone
        log.debug("no plan for %s: %s", model_id, exc)
        return None, None, False
    return req.revision, plan_fingerprint(req), True


def attach_fingerprints(
    session: Session,
    cands: list[Candidate],
    backend: str,
    tier: str,
    compute: bool = True,
    budget_s: float | None = None,
    threads: int = 8,
) -> int:
    """Fill ``fingerprint`` of each candidate from the plan cache (valid while the model's commit is
    unchanged), computing and caching missing ones within ``budget_s``; returns how many it computed."""
    if tier == "full":
        return 0  # real weights differ per model: never shared
    cached = repository.cached_plans(session, [c.model_id for c in cands], tier)
    missing = []
    for c in cands:
        hit = cached.get(c.model_id)
        if hit is not None and (not c.sha or hit[0] == c.sha):
            c.fingerprint = hit[1]
        else:
            missing.append(c)
    if not compute or not missing:
        return 0
    deadline = time.monotonic() + budget_s if budget_s else None
    computed = 0

    def one(c: Candidate):
        if deadline and time.monotonic() > deadline:
            return c, None
        return c, compute_plan(c.model_id, backend, tier)

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        for c, plan in pool.map(one, missing):
            if plan is None:
                continue
            sha, fp, cacheable = plan
            c.fingerprint = fp
            if cacheable:
                repository.store_plan(session, c.model_id, tier, sha or c.sha, fp)
                computed += 1
    return computed


def group_by_fingerprint(cands: Iterable[Candidate]) -> list[Group]:
    """One group per fingerprint, led by its best candidate; order kept (best first)."""
    groups: list[Group] = []
    by_fp: dict[str, Group] = {}
    for c in cands:
        if c.fingerprint and c.fingerprint in by_fp:
            by_fp[c.fingerprint].followers.append(c)
            continue
        g = Group(leader=c)
        groups.append(g)
        if c.fingerprint:
            by_fp[c.fingerprint] = g
    return groups


# ---------------------------------------------------------------- sweeps

Publish = Callable[[list[Group], str, str, int | None, float], list[str]]
"""Publishes a sweep's groups: ``publish(groups, backend, tier, run_id, timeout)`` -> task ids."""


def period_of(kind: str, now: dt.datetime | None = None) -> str:
    """The period a sweep of ``kind`` is claimed for: an ISO week (weekly), a date (daily)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return iso_week(now) if kind == "weekly" else now.date().isoformat()


def plan_sweep(
    kind: str,
    backend: str,
    tier: str = "tiny",
    *,
    publish: Publish,
    top: int | None = None,
    now: dt.datetime | None = None,
    timeout: float = 600.0,
    dedup: bool = True,
    plan_budget_s: float | None = None,
    sync: bool = False,
) -> dict[str, Any]:
    """The daily top-K refresh (``kind="daily"``) or the weekly full sweep (``"weekly"``) of one
    backend and tier: claimed once per period (a second beat, or a redelivered sweep task, finds
    the claim and does nothing), scored, deduplicated by fingerprint, and its groups handed to
    ``publish``. A sweep that fails (``publish`` raising, say) releases its claim."""
    if kind not in ("daily", "weekly"):
        raise ValueError(f"unknown sweep kind {kind!r}")
    now = now or dt.datetime.now(dt.timezone.utc)
    period = period_of(kind, now)
    if plan_budget_s is None:  # first sweeps of a big catalog: plan what fits, the rest runs alone
        plan_budget_s = settings().plan_budget_s
    with session_scope() as s:
        sweep_id = repository.claim_sweep(s, kind, period, backend, tier, host=f"{socket.gethostname()}:{os.getpid()}")
    if sweep_id is None:
        log.info("%s sweep %s of %s/%s was already claimed: nothing to do", kind, period, backend, tier)
        return {"kind": kind, "period": period, "backend": backend, "tier": tier, "skipped": True}
    try:
        return _sweep(sweep_id, kind, period, backend, tier, top, now, timeout, dedup, plan_budget_s, sync, publish)
    except BaseException:
        with session_scope() as s:
            repository.release_sweep(s, sweep_id)
        raise


def _sweep(
    sweep_id: int,
    kind: str,
    period: str,
    backend: str,
    tier: str,
    top: int | None,
    now: dt.datetime,
    timeout: float,
    dedup: bool,
    plan_budget_s: float | None,
    sync: bool,
    publish: Publish,
) -> dict[str, Any]:
    if sync:
        catalog.refresh()
    else:
        catalog.ensure_catalog()
    with session_scope() as s:
        cands = candidates(s, backend, tier, now=now)
        chosen = daily_selection(cands, top or 100) if kind == "daily" else weekly_selection(cands, period)
        if dedup:
            attach_fingerprints(s, chosen, backend, tier, budget_s=plan_budget_s)
    groups = group_by_fingerprint(chosen) if dedup else [Group(c) for c in chosen]
    n_models = sum(len(g.model_ids) for g in groups)
    with session_scope() as s:
        snap = queries.latest_snapshot(s)
        run_id = repository.start_run(s, backend, tier, "celery", n_models, snap.id if snap else None).id
    publish(groups, backend, tier, run_id, timeout)
    with session_scope() as s:
        repository.finish_sweep(
            s, sweep_id, candidates=len(cands), enqueued=len(groups), deduplicated=n_models - len(groups), run_id=run_id
        )
    log.info(
        "%s sweep %s of %s/%s: %d of %d models, %d tasks (%d deduplicated), run %d",
        kind,
        period,
        backend,
        tier,
        n_models,
        len(cands),
        len(groups),
        n_models - len(groups),
        run_id,
    )
    return {
        "kind": kind,
        "period": period,
        "backend": backend,
        "tier": tier,
        "skipped": False,
        "sweep_id": sweep_id,
        "run_id": run_id,
        "candidates": len(cands),
        "models": n_models,
        "tasks": len(groups),
        "deduplicated": n_models - len(groups),
    }
