"""The main job: sync if needed, pick the top models, validate (in-process or on Celery), summarize."""
from __future__ import annotations

import logging
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any, Callable, Iterable

from tqdm import tqdm

from db import queries, repository
from db.session import session_scope
from zoo_runner.backends import BackendSpec, check_backend, load_plugins
from zoo_runner.exceptions import DatabaseUnavailable, ZooError
from zoo_runner.launcher import stage_listener
from zoo_runner.request import ValidationRequest, empty_result, error_info

from . import catalog
from .progress import RunProgress

log = logging.getLogger(__name__)


def sync(source: Iterable[repository.CatalogEntry], label: str, total: int | None = None) -> tuple[int, int]:
    """Store a snapshot from ``source``; returns (snapshot id, models stored)."""
    with session_scope() as s, tqdm(total=total, desc=f"sync {label}", unit="model", disable=not sys.stderr.isatty() and total is None, file=sys.stderr) as bar:
        snap = repository.store_snapshot(s, source, label, progress=bar.update)
        bar.total = bar.n
        bar.refresh()
        return snap.id, snap.n_models


def ensure_catalog() -> str:
    """Sync when the catalog is empty: from the Hub if reachable, else the builtin arch: list."""
    with session_scope() as s:
        if repository.latest_snapshot(s) is not None:
            return "existing"
    if catalog.hub_reachable():
        sync(catalog.from_hub(int(os.environ.get("ZOO_SYNC_TOP", "1000"))), f"hub:{catalog.hub_endpoint()}")
        return "hub"
    log.info("the Hub is not reachable: using the builtin arch: catalog")
    sync(catalog.builtin(), "builtin")
    return "builtin"


def resolve_backend(spec: str) -> str:
    load_plugins()
    parsed = BackendSpec.parse(spec)
    check_backend(parsed)
    return str(parsed)


def pick_models(top: int) -> tuple[int | None, list[str]]:
    with session_scope() as s:
        snap = repository.latest_snapshot(s)
        if snap is None:
            return None, []
        return snap.id, [m.id for m, _ in repository.snapshot_models(s, snap, top)]


def _request(model_id: str, backend: str, tier: str, timeout: float, precision: str = "auto") -> ValidationRequest:
    return ValidationRequest(model_id=model_id, backend=backend, tier=tier, timeout_s=timeout, precision=precision)


def run_inprocess(model_ids: list[str], backend: str, tier: str, run_id: int, timeout: float, jobs: int = 1, precision: str = "auto") -> list[dict[str, Any]]:
    """Validate and store each model here, ``jobs`` at once, behind a bar that names every model
    in flight and its stage from the start (the first compile can take minutes)."""
    from workers.execute import validate_and_store

    results: list[dict[str, Any]] = []
    progress: RunProgress | None = None

    def one(mid: str) -> dict[str, Any]:
        listen = progress.on_stage(mid) if progress else None
        token = stage_listener.set(listen)  # the model process's stages, heard from run_isolated
        try:
            if listen:
                listen("prepare")
            return validate(mid)
        finally:
            stage_listener.reset(token)

    def validate(mid: str) -> dict[str, Any]:
        req = _request(mid, backend, tier, timeout, precision)
        try:
            return validate_and_store(req, run_id=run_id)
        except DatabaseUnavailable:
            raise  # nothing can be stored: the run stops with one line
        except Exception as exc:  # unknown model, unreachable Hub, a bug of Zoo's: still a row, the run goes on
            res = empty_result(req)
            res.update(status="reference_error", error=error_info(exc), duration_s=0.0)
            if not isinstance(exc, ZooError):
                log.warning("%s: %s; stored as reference_error", mid, res["error"]["signature"])
            try:
                with session_scope() as s:
                    repository.store_result(s, res, run_id=run_id)
            except DatabaseUnavailable:
                raise
            except Exception as store_exc:  # the row itself cannot be stored: say so, go on
                log.error("%s: its row could not be stored: %s", mid, error_info(store_exc)["signature"])
            return res

    with tqdm(total=len(model_ids), desc=f"validate {backend}", unit="model", file=sys.stderr) as bar, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        progress = RunProgress(bar)
        futures = {pool.submit(one, mid): mid for mid in model_ids}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            for fut in done:
                res = fut.result()
                results.append(res)
                progress.finished(futures[fut], res["status"])
            progress.tick()
    return results


def enqueue(model_ids: list[str], backend: str, tier: str, run_id: int | None, timeout: float, precision: str = "auto") -> list[str]:
    """One validation task per model on the backend's queue, published in pipelined batches."""
    from .scheduler import Candidate, Group, enqueue_groups

    return enqueue_groups([Group(Candidate(model_id=mid, downloads=0, weight=0.0)) for mid in model_ids], backend, tier, run_id, timeout, precision=precision)


def enqueue_top(top: int, backend: str, tier: str = "tiny", timeout: float = 600.0, precision: str = "auto") -> int:
    ensure_catalog()
    snap_id, ids = pick_models(top)
    with session_scope() as s:
        run_id = repository.start_run(s, backend, tier, "celery", len(ids), snap_id, precision=precision).id
    return len(enqueue(ids, backend, tier, run_id, timeout, precision))


def wait_for(run_id: int, expected: int, poll_s: float = 1.0, timeout_s: float | None = None) -> int:
    """Wait until ``expected`` results of run ``run_id`` are stored (workers may die and redeliver)."""
    start = time.monotonic()
    with tqdm(total=expected, desc="waiting for workers", unit="model", file=sys.stderr) as bar:
        done = 0
        while done < expected:
            with session_scope() as s:
                done = repository.count_results(s, run_id)
            bar.update(done - bar.n)
            if timeout_s and time.monotonic() - start > timeout_s:
                break
            if done < expected:
                time.sleep(poll_s)
    return done


def main_job(top: int, backend: str, tier: str, timeout: float, detach: bool = False, jobs: int = 1, precision: str = "auto", status: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``precision``: ``auto`` judges the backend at its declared compute precision; ``fp32``,
    ``tf32``, ``bf16`` or ``fp16`` at that one (the coverage summary is then of that precision).
    ``status`` hears what the job is doing before its progress bar starts (default: the log)."""
    say = status or log.info
    say(f"resolving backend {backend} (loads torch and the backend's plugins)")
    backend = resolve_backend(backend)
    say(f"backend {backend}; reading the catalog")
    source = ensure_catalog()
    snap_id, ids = pick_models(top)
    broker = os.environ.get("ZOO_BROKER_URL")
    where = "enqueued to the workers" if broker else "validated here: the first also starts the model processes' forkserver (imports torch and transformers), then compiles"
    say(f"{len(ids)} model{'' if len(ids) == 1 else 's'} from the catalog ({source}), {where}")
    with session_scope() as s:
        run_id = repository.start_run(s, backend, tier, "celery" if broker else "inprocess", len(ids), snap_id, precision=precision).id
    log.info("run %s: %d models on %s (%s tier, precision %s), catalog %s", run_id, len(ids), backend, tier, precision, source)
    if broker:
        enqueue(ids, backend, tier, run_id, timeout, precision)
        if detach:
            return {"run_id": run_id, "enqueued": len(ids), "backend": backend, "tier": tier, "precision": precision, "detached": True}
        wait_for(run_id, len(ids))
    else:
        run_inprocess(ids, backend, tier, run_id, timeout, jobs=jobs, precision=precision)
    with session_scope() as s:
        repository.finish_run(s, run_id)
        cov = queries.coverage(s, backend=backend, tier=tier, precision=None if precision == "auto" else precision)
        stored = repository.count_results(s, run_id)
    return {"run_id": run_id, "backend": backend, "tier": tier, "precision": precision, "stored": stored, "coverage": cov}
