"""The main job: sync if needed, pick the top models, validate (in-process or on Celery), summarize."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

from db import queries, repository
from db.session import session_scope
from services import catalog
from workers import publish, reconcile
from zoo_runner import envs, launcher, sandbox
from zoo_runner.backends import BackendSpec, check_backend, load_plugins, typo_problem
from zoo_runner.exceptions import DatabaseUnavailable, Interrupted, UnknownBackend
from zoo_runner.launcher import stage_listener
from zoo_runner.request import ValidationRequest, share_of_cores
from zoo_runner.settings import settings

from .progress import RunProgress, progress_bar

log = logging.getLogger(__name__)
HELD_POLL_S = 2.0  # how often a model another run holds is asked for again


def check_names(spec: str) -> None:
    """UnknownBackend, in one line with the closest known name, for a spec whose names no backend
    has; torch is not imported. Where plugins are configured they may register any name: then
    resolve_backend checks after loading them."""
    if (spec or "").strip() != "auto" and not settings().plugins:
        problem = typo_problem(spec)
        if problem:
            raise UnknownBackend(problem)


def resolve_backend(spec: str) -> str:
    """The canonical spec, or one line: names are checked first, before torch is imported (a typo
    answers at once, with the closest known name); then whether this machine can run it."""
    check_names(spec)
    load_plugins()
    parsed = BackendSpec.parse(spec)
    check_backend(parsed, parent=True)
    return str(parsed)


def default_jobs(backend: str) -> int:
    """Models validated at once by default: one per core set for a device whose model processes each
    claim cores (neuron: ``ZOO_NEURON_CORES`` cut into ``ZOO_NEURON_CORES_PER_PROCESS``), else up to 2."""
    from zoo_runner.backends import device_plugin

    try:
        plugin = device_plugin(BackendSpec.parse(backend).device)
    except Exception:
        plugin = None
    if plugin is not None and plugin.core_sets:
        return max(1, len(plugin.core_sets()))
    return max(1, min(2, os.cpu_count() or 1))


def pick_models(top: int) -> tuple[int | None, list[str]]:
    with session_scope() as s:
        snap = queries.latest_snapshot(s)
        if snap is None:
            return None, []
        return snap.id, [m.id for m, _ in queries.snapshot_models(s, snap, top)]


def _request(
    model_id: str,
    backend: str,
    tier: str,
    timeout: float,
    precision: str = "auto",
    jobs: int = 1,
    env: str | None = None,
) -> ValidationRequest:
    return ValidationRequest(
        model_id=model_id,
        backend=backend,
        tier=tier,
        timeout_s=timeout,
        precision=precision,
        threads=share_of_cores(jobs),
        env=env,
    )


def run_inprocess(
    model_ids: list[str],
    backend: str,
    tier: str,
    run_id: int,
    timeout: float,
    jobs: int = 1,
    precision: str = "auto",
    env: str | None = None,
    total: int | None = None,
) -> list[dict[str, Any]]:
    """Validate and store each model here, ``jobs`` at once, behind a bar that names every model
    in flight and its stage from the start (the first compile can take minutes). A model that
    fails is its row (``reference_error``) and the run goes on; an unreachable database stops it.
    ``total``: the run's size where ``model_ids`` is what a resumed run has left.

    The first Ctrl-C or SIGTERM (:func:`interruptible`) stops it: no model starts after it, the model
    processes in flight are ended and give no row, what finished is stored; the caller sees
    ``launcher.INTERRUPT`` set."""
    from services import validation  # imports torch: only when models run here

    results: list[dict[str, Any]] = []
    progress: RunProgress | None = None

    claim = (backend, tier, precision, env)
    # beyond any validation of this run (a first compile's reserve too): a run that died frees its claims then
    lease_s = 2 * timeout + 600 + launcher.cold_compile_reserve(backend)

    def one(mid: str) -> dict[str, Any] | str:
        launcher.check_interrupt()  # queued when the run was interrupted: never started
        with session_scope() as s:  # another run on this database validates it, or did
            held = repository.claim_model(s, mid, *claim, run_id, lease_s)
        if held != repository.MINE:
            return held  # HELD: asked again later; STORED: that run's row
        listen = progress.on_stage(mid) if progress else None
        token = stage_listener.set(listen)  # the model process's stages, heard from run_isolated
        try:
            if listen:
                listen("prepare")
            return validate(mid)
        finally:
            stage_listener.reset(token)
            try:
                with session_scope() as s:
                    repository.release_model(s, mid, *claim, run_id)
            except DatabaseUnavailable as exc:  # the claim expires by itself
                log.warning("%s: its claim could not be released: %s", mid, exc)

    def validate(mid: str) -> dict[str, Any]:
        req = _request(mid, backend, tier, timeout, precision, jobs, env)
        return validation.validate_or_fail(req, run_id=run_id).to_dict()  # the SPEC rows the run reports

    total = total or len(model_ids)
    with (
        progress_bar(total=total, desc=f"validate {backend}") as bar,
        ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
    ):
        bar.update(total - len(model_ids))  # a resumed run: what it stored before
        others = 0
        progress = RunProgress(bar, budget_s=timeout)
        futures = {pool.submit(one, mid): mid for mid in model_ids}
        pending = set(futures)
        later: dict[str, float] = {}  # models another run holds now: asked again at these times
        while pending or later:
            for mid, at in list(later.items()):
                if launcher.INTERRUPT.is_set():  # no row for them: the run is interrupted
                    del later[mid]
                    progress.dropped(mid)
                elif time.monotonic() >= at:
                    del later[mid]
                    fut = pool.submit(one, mid)
                    futures[fut] = mid
                    pending.add(fut)
            if not pending:
                time.sleep(0.5)
                progress.tick()
                continue
            done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            for fut in done:
                mid = futures[fut]
                try:
                    res = fut.result()
                except Interrupted:  # ended by the interrupt, or never started: no row
                    progress.dropped(mid)
                    continue
                if res == repository.HELD:
                    later[mid] = time.monotonic() + HELD_POLL_S
                    progress.stage(mid, "held by another run")
                    continue
                if res == repository.STORED:
                    progress.finished(mid, "validated by another run")
                    others += 1
                    continue
                results.append(res)
                progress.finished(mid, res["status"])
            progress.tick()
    if others:
        log.info("%d of %d models were validated by another run on this database", others, len(model_ids))
    return results


@contextlib.contextmanager
def interruptible(say: Callable[[str], None]) -> Iterator[None]:
    """While in it, the first SIGINT (Ctrl-C) or SIGTERM sets ``launcher.INTERRUPT`` and says so in one
    line: the run stops scheduling and ends its model processes. A second one exits at once (130), its
    model processes killed. Outside the main thread (a test's, a server's) signals are left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    launcher.INTERRUPT.clear()

    def handler(signum: int, _frame: Any) -> None:
        if launcher.INTERRUPT.is_set():
            launcher.kill_in_flight()
            os._exit(130)
        launcher.INTERRUPT.set()
        line = (
            f"\nzoo: {signal.Signals(signum).name}: stopping; the models in flight are ended and give no row, what "
            "finished is kept (the same command resumes this run; again to exit at once)\n"
        )
        try:  # one write to the descriptor, never through sys.stderr (the bar may be in the middle of a write)
            os.write(2, line.encode())
        except OSError:
            pass

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def enqueue_top(top: int, backend: str, tier: str = "tiny", timeout: float = 600.0, precision: str = "auto") -> int:
    catalog.ensure_catalog()
    snap_id, ids = pick_models(top)
    with session_scope() as s:
        run_id = repository.start_run(s, backend, tier, "celery", len(ids), snap_id, precision=precision).id
    return len(publish.enqueue_models(ids, backend, tier, run_id, timeout, precision))


def wait_for(
    run_id: int,
    expected: int,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
    reconciler: reconcile.Reconciler | None = None,
) -> int:
    """Wait until ``expected`` results of run ``run_id`` are stored (workers may die and redeliver);
    ``reconciler`` publishes again the tasks a broker restarted empty lost."""
    start = time.monotonic()
    with progress_bar(total=expected, desc="waiting for workers") as bar:
        done = 0
        while done < expected:
            try:
                with session_scope() as s:
                    done = repository.count_results(s, run_id)
            except DatabaseUnavailable as exc:  # the workers store nothing meanwhile either: wait
                log.warning("run %s: %s; waiting for the database", run_id, exc)
            bar.update(done - bar.n)
            if reconciler is not None and done < expected:
                reconciler.tick()
            if timeout_s and time.monotonic() - start > timeout_s:
                break
            if done < expected:
                time.sleep(poll_s)
    return done


def main_job(
    top: int,
    backend: str,
    tier: str,
    timeout: float,
    detach: bool = False,
    jobs: int | None = None,
    precision: str = "auto",
    status: Callable[[str], None] | None = None,
    env: str | None = None,
    fresh: bool = False,
) -> dict[str, Any]:
    """``precision``: ``auto`` judges the backend at its declared compute precision; ``fp32``,
    ``tf32``, ``bf16`` or ``fp16`` at that one (the coverage summary is then of that precision).
    ``status`` hears what the job is doing before its progress bar starts (default: the log)."""
    say = status or log.info
    check_names(backend)  # a typo answers at once, before anything starts
    # inductor's shared headers, first thing: their build overlaps this process's start (importing torch)
    # instead of the first models' compiles. auto is cpu+inductor unless an accelerator is here, where the
    # build, at the lowest priority, is done once for nothing
    python = envs.python_for(env) if env else None  # an unknown env in one line, before anything starts
    if not settings().broker_url:
        if sandbox.start_shared_headers("cpu+inductor" if (backend or "").strip() == "auto" else backend, python):
            for_env = f" for env {env}" if env else ""
            say(f"building inductor's shared headers{for_env} in the background (once per machine and interpreter)")
        if not env:
            launcher.start_forkserver(backend)  # its imports too (none where model processes are spawned)
    say(f"resolving backend {backend} (loads torch and the backend's plugins)")
    backend = resolve_backend(backend)
    jobs = jobs or default_jobs(backend)  # a bad ZOO_NEURON_CORES answers here, before a run is started
    say(f"backend {backend}; reading the catalog")
    source = catalog.ensure_catalog()
    snap_id, ids = pick_models(top)
    broker = settings().broker_url
    where = (
        "enqueued to the workers"
        if broker
        else "validated here: the first also starts the model processes' forkserver (imports torch and transformers), "
        "then compiles"
    )
    say(f"{len(ids)} model{'' if len(ids) == 1 else 's'} from the catalog ({source}), {where}")
    todo = ids
    with session_scope() as s:
        resumed = None
        if not broker and not fresh:
            resumed = repository.resumable_run(s, backend, tier, len(ids), snap_id, precision, env)
        if resumed is not None:
            run_id = resumed.id
            stored = repository.stored_models(s, run_id)
            todo = [m for m in ids if m not in stored]
            if not repository.resume_run(s, run_id):  # another command resumed it a moment ago: a run of our own
                resumed, todo = None, ids
        if resumed is not None:
            say(
                f"resuming run {run_id}, interrupted with {len(ids) - len(stored & set(ids))} of {len(ids)} "
                f"models missing: validating only those (--fresh starts over)"
            )
        else:
            run_id = repository.start_run(
                s, backend, tier, "celery" if broker else "inprocess", len(ids), snap_id, precision=precision, env=env
            ).id
    log.info(
        "run %s: %d models on %s (%s tier, precision %s), catalog %s",
        run_id,
        len(ids),
        backend,
        tier,
        precision,
        source,
    )
    if broker:
        epoch = reconcile.broker_epoch()  # read first: a broker that restarts empty after this is noticed
        publish.enqueue_models(ids, backend, tier, run_id, timeout, precision, env=env)
        if detach:
            return {
                "run_id": run_id,
                "enqueued": len(ids),
                "backend": backend,
                "tier": tier,
                "precision": precision,
                "detached": True,
            }
        wait_for(run_id, len(ids), reconciler=reconcile.Reconciler.for_run(run_id, epoch, say=say))
    else:
        with interruptible(say):
            run_inprocess(todo, backend, tier, run_id, timeout, jobs=jobs, precision=precision, env=env, total=len(ids))
        with session_scope() as s:
            missing = len(set(ids) - repository.stored_models(s, run_id)) if launcher.INTERRUPT.is_set() else 0
        if missing:
            with session_scope() as s:
                repository.interrupt_run(s, run_id, missing)
                stored = repository.count_results(s, run_id)
            return {
                "run_id": run_id,
                "backend": backend,
                "tier": tier,
                "precision": precision,
                "stored": stored,
                "interrupted": True,
                "missing": missing,
                "requested": len(ids),
            }
    with session_scope() as s:
        repository.finish_run(s, run_id)
        cov = queries.coverage(
            s, backend=backend, tier=tier, precision=None if precision == "auto" else precision, env=env or ""
        )
        stored = repository.count_results(s, run_id)
    return {
        "run_id": run_id,
        "backend": backend,
        "tier": tier,
        "precision": precision,
        "stored": stored,
        "coverage": cov,
    }
