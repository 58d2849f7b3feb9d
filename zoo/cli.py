"""The ``zoo`` command. Every subcommand has --help; bad input gets one line and exit code 2."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable

from zoo_runner.exceptions import ZooError
from zoo_runner.statuses import PASSING, TIERS

log = logging.getLogger("zoo")

EPILOG = """Configuration: ZOO_DATABASE_URL (default sqlite:///./zoo.db), ZOO_BROKER_URL (unset: run in-process),
ZOO_API_KEYS, ZOO_PLUGINS, HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, ZOO_SANDBOX (off, best_effort, strict).
Every ZOO_* variable, its default and meaning: README "Configuration", or python -m zoo_runner.settings."""


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return v


def _port(text: str) -> int:
    """A TCP port to listen on: a whole number from 1 to 65535."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return v


# ---------------------------------------------------------------- commands


def cmd_sync(args: argparse.Namespace) -> int:
    from services import catalog

    if args.from_file:
        snap, n = catalog.sync(catalog.from_file(args.from_file), f"file:{os.path.abspath(args.from_file)}")
    elif args.builtin:
        snap, n = catalog.sync(catalog.builtin(), "builtin")
    else:
        snap, n = catalog.sync(catalog.from_hub(args.top), f"hub:{catalog.hub_endpoint()}", total=args.top)
    print(f"stored {n} models in catalog snapshot {snap}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from zoo_runner.settings import settings

    from . import jobs, render

    if not settings().broker_url:  # in-process: the models run here
        _check_sandbox()
    out = jobs.main_job(
        top=args.top,
        backend=args.backend,
        tier=args.tier,
        timeout=args.timeout,
        detach=args.detach,
        jobs=args.jobs,
        precision=args.precision,
        status=_status("run"),
        env=args.env,
        fresh=args.fresh,
    )
    at = "" if args.precision == "auto" else f", judged at {args.precision}"
    if out.get("interrupted"):
        print(
            f"zoo run: run {out['run_id']} interrupted: {out['stored']} results stored, {out['missing']} of "
            f"{out['requested']} models missing; the same command validates only those (--fresh starts over)",
            file=sys.stderr,
        )
        return 130
    if out.get("detached"):
        see = f"zoo coverage --backend {out['backend']}" + (
            "" if args.precision == "auto" else f" --precision {args.precision}"
        )
        print(
            f"run {out['run_id']}: enqueued {out['enqueued']} validations on {out['backend']} "
            f"({out['tier']}{at}); see `{see}`"
        )
        return 0
    print(f"run {out['run_id']}: {out['stored']} results stored ({out['backend']}, {out['tier']} tier{at})\n")
    print(render.coverage_table(out["coverage"]))
    return 0


def _status(command: str) -> Callable[[str], None]:
    """One line on stderr per step of a long command, as it starts."""

    def say(text: str) -> None:
        print(f"zoo {command}: {text}", file=sys.stderr, flush=True)

    return say


def cmd_triage(args: argparse.Namespace) -> int:
    from services import triage
    from zoo_runner.settings import settings

    from . import jobs

    backend = jobs.resolve_backend(args.backend)
    if args.clusters and args.model:
        raise ZooError("give a model or --clusters N, not both")
    if args.here and not args.clusters:
        raise ZooError("--here goes with --clusters (a single model is always triaged here)")
    if args.clusters and settings().broker_url and not args.here:  # on a worker of the backend's queue
        if args.out:
            raise ZooError("through Celery a worker writes under its own ZOO_TRIAGE_DIR: drop --out, or add --here")
        from workers.publish import triage_clusters_remote

        done = triage_clusters_remote(backend, args.clusters, args.tier, args.timeout, say=_status("triage"))
        if not done:
            print(f"zoo: no failure cluster of {backend}'s at tier {args.tier} to triage", file=sys.stderr)
        print(json.dumps(done, indent=2, default=str))
        return 0
    _check_sandbox()
    if args.clusters:
        root = args.out or settings().triage_dir
        done = triage.triage_clusters(backend, args.clusters, root, tier=args.tier, timeout_s=args.timeout)
        if not done:
            print(f"zoo: no failure cluster of {backend}'s at tier {args.tier} to triage", file=sys.stderr)
        print(json.dumps(done, indent=2, default=str))
        return 0
    if not args.model:
        raise ZooError("name a model to triage (or --clusters N)")
    out = args.out or os.path.join("triage", args.model.replace("/", "__").replace(":", "_"))
    summary = triage.triage_model(
        args.model, backend, out, tier=args.tier, precision=args.precision, timeout_s=args.timeout, env=args.env
    )
    print(json.dumps(summary, indent=2, default=str))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from services.validation import run_validation, store_row
    from zoo_runner import envs
    from zoo_runner.request import ValidationRequest

    from . import jobs, render

    backend = jobs.resolve_backend(args.backend)
    _check_sandbox()
    if args.tier not in TIERS:
        raise ZooError(f"unknown tier {args.tier!r}")
    req = ValidationRequest(
        model_id=args.model,
        backend=backend,
        tier=args.tier,
        revision=args.revision,
        seed=args.seed,
        timeout_s=args.timeout,
        memory_gb=args.memory_gb,
        precision=args.precision,
        env=args.env,
    )
    if args.env:
        envs.python_for(args.env)  # an unknown env in one line, before the Hub is asked anything
    result = run_validation(req)
    if not args.no_store:
        store_row(result)
    row = result.to_dict()  # the SPEC result, exactly its keys
    if args.json:
        print(json.dumps(row, indent=2, default=str, allow_nan=False))
    else:
        print(render.result_line(row))
        print(f"repro: {result.repro}")
    return 0 if result.status in PASSING else 1


def cmd_env(args: argparse.Namespace) -> int:
    from services import environments

    if args.env_action == "create":
        loud = args.verbose or sys.stderr.isatty()  # pip's lines are progress; piped, an error is one line

        def echo(line: str) -> None:
            if loud:
                print(f"  {line}", file=sys.stderr, flush=True)

        info = environments.create(args.name, args.pins, echo=echo)
        if args.json:
            print(json.dumps(info, indent=2))
        else:
            versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
            print(f"env {info['name']}: {versions} ({info['size_mb']} MB, {info['path']})")
        return 0
    if args.env_action == "list":
        found = environments.list_envs()
        if args.json:
            print(json.dumps(found, indent=2))
        elif not found:
            print("no envs yet: `zoo env create NAME PKG==VERSION ...` makes one")
        for info in [] if args.json else found:
            print(f"{info['name']:<20} {' '.join(info['pins']):<40} {info['size_mb']:>6} MB  created {info['created']}")
        return 0
    environments.remove(args.name)
    print(f"removed env {args.name}")
    return 0


def cmd_bisect(args: argparse.Namespace) -> int:
    from . import bisect, jobs

    backend = jobs.resolve_backend(args.backend)
    _check_sandbox()

    def echo(line: str) -> None:
        print(f"zoo bisect: {line}", file=sys.stderr, flush=True)

    out = bisect.bisect(
        args.model,
        backend,
        args.package,
        args.good,
        args.bad,
        tier=args.tier,
        env_base=args.env_base,
        match=args.match,
        timeout_s=args.timeout,
        echo=echo,
    )
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    else:
        print(
            f"{args.package}: last good {out['last_good']}, first bad {out['first_bad']} "
            f"({out['bad_status']} on {backend}, {len(out['steps'])} versions tried of {len(out['versions'])})"
        )
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from db import queries
    from db.session import session_scope
    from services.inputs import check_backend

    from . import render

    if len(args.env) != 2:
        raise ZooError("give two envs: --env A --env B (`default` is Zoo's own interpreter)")
    with session_scope() as s:
        args.backend = check_backend(s, args.backend)
        known = queries.env_names(s)
        for env in args.env:
            if env not in known:
                raise ZooError(f"no stored rows of env {env!r} (with rows: {', '.join(known) or 'none'})")
        data = queries.compare_envs(s, args.env[0], args.env[1], backend=args.backend, tier=args.tier, top=args.top)
    print(json.dumps(data, indent=2, default=str) if args.json else render.compare_table(data))
    return 0


def cmd_coverage(args: argparse.Namespace) -> int:
    from db import queries
    from db.session import session_scope
    from services.inputs import check_backend

    from . import render

    with session_scope() as s:
        check_backend(s, args.backend)
        if args.env and args.env != "default" and args.env not in queries.env_names(s):
            raise ZooError(
                f"no results of env {args.env!r}: `zoo env list` names the envs, `zoo run --env NAME` fills one"
            )
        cov = queries.coverage(
            s,
            backend=args.backend,
            tier=args.tier,
            week=args.week,
            precision=args.precision,
            snapshot_id=args.snapshot,
            env="" if args.env in (None, "default") else args.env,
        )
    print(json.dumps(cov.to_dict(), indent=2) if args.json else render.coverage_table(cov))
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    from db.session import database_url, redact_url, upgrade

    head = upgrade()
    print(f"database {redact_url(database_url())} is at revision {head}")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    # SIGTERM (docker stop, a spot reclaim, systemd) stops a running task after the soft shutdown
    # timeout and puts its message back on the queue at once, instead of waiting out the task or
    # leaving it to the visibility timeout. Must be set before billiard is imported.
    if "billiard.common" not in sys.modules:
        os.environ.setdefault("REMAP_SIGTERM", "SIGQUIT")
    from workers.celery_app import app, visibility_problem

    problem = visibility_problem()
    if problem:
        raise ZooError(problem)
    _check_sandbox()
    app.conf.zoo_concurrency = args.concurrency  # each task's model process gets its share of the cores
    queues = args.queues
    if args.env:
        from zoo_runner import envs

        envs.python_for(args.env)  # a worker for an env this machine lacks: one line, no worker
        kinds = [q.strip() for q in args.queues.split(",") if q.strip() and q.strip() != "scheduler"]
        queues = ",".join(f"{k}:{args.env}" for k in kinds)
    argv = [
        "worker",
        "--loglevel",
        args.loglevel,
        "--queues",
        queues,
        "--concurrency",
        str(args.concurrency),
        "--pool",
        "prefork",
    ]
    if args.hostname:
        argv += ["--hostname", args.hostname]
    app.worker_main(argv)
    return 0


def cmd_beat(args: argparse.Namespace) -> int:
    from workers.celery_app import app

    argv = ["beat", "--loglevel", args.loglevel]
    if args.schedule_file:
        argv += ["--schedule", args.schedule_file]
    app.start(argv)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from db.session import ensure_schema
    from zoo_runner.settings import settings

    ensure_schema()
    log.info(
        "serving the API and dashboard on http://%s:%d/ (%d worker%s)",
        args.host,
        args.port,
        args.workers,
        "" if args.workers == 1 else "s",
    )
    trusted = settings().forwarded_allow_ips.strip()
    uvicorn.run(  # proxy headers only from the proxies named: uvicorn would trust 127.0.0.1's by default
        "api.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level="info",
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or None,
    )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from dashboards.report import render_report
    from services.reports import build_report

    report = build_report(week=args.week, backend=args.backend, tier=args.tier, snapshot_id=args.snapshot)
    if not report.get("backend"):
        raise ZooError(f"no results{' in ' + args.week if args.week else ''} to report on: `zoo run` stores some")
    text = render_report(report, args.format)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output}")
    else:
        print(text)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from . import doctor

    if args.backend:  # one backend's preconditions, one line each; non-zero when one fails
        checks = doctor.preconditions(args.backend)
        print(json.dumps(checks, indent=2) if args.json else doctor.render_preconditions(args.backend, checks))
        return 0 if all(c["ok"] for c in checks) else 1
    facts = doctor.collect()
    print(json.dumps(facts, indent=2, default=str) if args.json else doctor.render(facts))
    return 0


def _check_sandbox() -> None:
    """Under ZOO_SANDBOX=strict, refuse to validate anything here without the full sandbox."""
    from zoo_runner.sandbox import check_strict

    check_strict()


def cmd_seed(args: argparse.Namespace) -> int:
    from db.seed import seed

    n = seed(models=args.models, weeks=args.weeks, backends=args.backends.split(","))
    print(f"seeded {n} results")
    return 0


# ---------------------------------------------------------------- parser

PRECISION_HELP = (
    "what the backend is judged at: auto (default) = the backend's declared compute precision "
    "(bf16 for TorchNeuron and OpenVINO on bf16 CPUs, tf32 for CUDA with TF32 matmuls, else fp32); "
    "fp32, tf32, bf16 or fp16 = judge it against a CPU reference at that precision instead"
)


SNAPSHOT_HELP = (
    "the catalog snapshot whose downloads weight the numbers, by the id `zoo sync` prints "
    "(default: the newest snapshot holding models with results)"
)


def _precisions() -> tuple[str, ...]:
    from zoo_runner.precision import PRECISIONS

    return PRECISIONS


def _add_precision(sp: argparse.ArgumentParser) -> None:
    from zoo_runner.precision import CHOICES

    sp.add_argument("--precision", choices=CHOICES, default="auto", help=PRECISION_HELP)


REMOTE_CODE_HELP = (
    "custom-code repos: never (default; unsupported, reason remote_code) or sandboxed (their code files, "
    "fetched and hashed by Zoo, run only in the model process under the full sandbox; default ZOO_REMOTE_CODE, "
    "and with a broker the workers' own ZOO_REMOTE_CODE decides)"
)
ENV_HELP = (
    "run the model process in env NAME (`zoo env create`); the row records the env and its versions, "
    "and is kept apart from Zoo's own rows (compare them with `zoo compare --env A --env B`)"
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="zoo",
        description="Validate the Hub's most-downloaded models on an accelerator backend against a CPU reference.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log more")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, fn: Callable[[argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(
            name, help=help_, description=help_, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        sp.set_defaults(fn=fn)
        return sp

    s = add(
        "sync",
        cmd_sync,
        "Fill the catalog from the Hub (or a snapshot CSV, or the builtin arch: list); prints how many models it "
        "stored.",
    )
    s.add_argument(
        "--top", type=_positive_int, default=1000, help="how many of the most-downloaded Hub models (default 1000)"
    )
    s.add_argument(
        "--from-file",
        metavar="CSV",
        help="a snapshot file with the shared CSV's columns (model_id, downloads, tasks, tags, ...)",
    )
    s.add_argument("--builtin", action="store_true", help="the builtin arch: catalog (no Hub access)")

    r = add("run", cmd_run, "The main job: sync if needed, validate the top models, print the coverage summary.")
    r.add_argument("--top", type=_positive_int, default=20, help="how many of the catalog's top models (default 20)")
    r.add_argument(
        "--backend",
        default="auto",
        help="backend spec DEVICE[+COMPILER][@DTYPE] (default auto: neuron, cuda, xpu, mps, else cpu+inductor)",
    )
    r.add_argument("--tier", choices=TIERS, default="tiny", help="census, tiny (default) or full")
    r.add_argument(
        "--timeout", type=_positive_float, default=600.0, help="seconds per model before it is killed (default 600)"
    )
    r.add_argument(
        "--jobs",
        type=_positive_int,
        default=None,
        help="models validated at once in-process (default: up to 2; on neuron, one per NeuronCore set: "
        "ZOO_NEURON_CORES cut into ZOO_NEURON_CORES_PER_PROCESS)",
    )
    r.add_argument("--detach", action="store_true", help="with ZOO_BROKER_URL: enqueue and return without waiting")
    r.add_argument(
        "--fresh",
        action="store_true",
        help="start a new run even where the last run of these parameters was interrupted (by default "
        "it is resumed: only its missing models are validated)",
    )
    r.add_argument("--remote-code", choices=("never", "sandboxed"), help=REMOTE_CODE_HELP)
    r.add_argument("--env", metavar="NAME", help=ENV_HELP + "; with a broker, on the workers started with --env NAME")
    _add_precision(r)

    v = add("validate", cmd_validate, "Validate one model now; store the result and print it.")
    v.add_argument("model", help="a Hub repo id org/name, or arch:ClassName (e.g. arch:BertModel)")
    v.add_argument("--backend", default="auto", help="backend spec DEVICE[+COMPILER][@DTYPE] (default auto)")
    v.add_argument("--tier", choices=TIERS, default="tiny", help="census, tiny (default) or full")
    v.add_argument("--revision", help="a Hub revision (default: the latest commit)")
    v.add_argument("--seed", type=int, default=0, help="seed for weights and inputs (default 0)")
    v.add_argument(
        "--timeout",
        type=_positive_float,
        default=600.0,
        help="seconds before the model process is killed (default 600)",
    )
    v.add_argument(
        "--memory-gb",
        type=_positive_float,
        default=16.0,
        help="memory budget of the model process in GiB: its private writable memory (RLIMIT_DATA; default 16)",
    )
    v.add_argument("--json", action="store_true", help="print the SPEC result as JSON, alone on stdout")
    v.add_argument("--no-store", action="store_true", help="do not write the result to the database")
    v.add_argument("--remote-code", choices=("never", "sandboxed"), help=REMOTE_CODE_HELP)
    v.add_argument("--env", metavar="NAME", help=ENV_HELP)
    _add_precision(v)

    t = add(
        "triage",
        cmd_triage,
        "Whose bug a failure is, a minimal standalone repro.py and a draft issue.md: for one model "
        "(validated again with the triage on) or for the N largest failure clusters of a backend.",
    )
    t.add_argument("model", nargs="?", help="a Hub repo id or arch:ClassName (omit with --clusters)")
    t.add_argument("--backend", required=True, help="backend spec DEVICE[+COMPILER][@DTYPE]")
    t.add_argument("--tier", choices=TIERS, default="tiny", help="census, tiny (default) or full")
    t.add_argument(
        "--clusters",
        type=_positive_int,
        help="triage the N largest clusters of the backend's failures (with ZOO_BROKER_URL set: on a worker of the "
        "backend's queue, through Celery; its files under the worker's ZOO_TRIAGE_DIR)",
    )
    t.add_argument("--here", action="store_true", help="with --clusters and a broker: triage in this process instead")
    t.add_argument(
        "--out",
        help="directory for repro.py, repro.safetensors and issue.md (default ./triage/<model>; with --clusters "
        "the root of one directory per cluster, default ZOO_TRIAGE_DIR)",
    )
    t.add_argument(
        "--timeout", type=_positive_float, default=1200.0, help="seconds before the model process is killed (1200)"
    )
    t.add_argument("--remote-code", choices=("never", "sandboxed"), help=REMOTE_CODE_HELP)
    t.add_argument("--env", metavar="NAME", help=ENV_HELP)
    _add_precision(t)

    e = add(
        "env",
        cmd_env,
        "Environments: named version sets (e.g. another OpenVINO or torch release) that model processes run in "
        "with --env NAME. Only the pins are installed; everything else, Zoo included, is Zoo's own.",
    )
    esub = e.add_subparsers(dest="env_action", metavar="ACTION", required=True)
    ec = esub.add_parser("create", help="build env NAME (uv, else pip): `zoo env create ov2025 openvino==2025.4.1`")
    ec.add_argument("name", help="lowercase letters, digits, '.', '_', '-'")
    ec.add_argument("pins", nargs="+", metavar="PIN", help="requirements such as openvino==2025.4.1 torch==2.13.0")
    ec.add_argument("--json", action="store_true", help="print the env as JSON")
    el = esub.add_parser("list", help="the envs, their pins and resolved versions")
    el.add_argument("--json", action="store_true", help="machine-readable output")
    er = esub.add_parser("remove", help="delete env NAME")
    er.add_argument("name")

    bs = add(
        "bisect",
        cmd_bisect,
        "The first bad version of a package (openvino, torch, ...) for one model on a backend: its released "
        "versions between --good and --bad, bisected in envs pinned to each (every other pin from --env-base or "
        "Zoo's own). Prints every step, then the last good and the first bad version; stores the outcome.",
    )
    bs.add_argument("model", help="a Hub repo id or arch:ClassName")
    bs.add_argument("--backend", required=True, help="backend spec DEVICE[+COMPILER][@DTYPE]")
    bs.add_argument("--package", required=True, help="the package to bisect (e.g. openvino, torch)")
    bs.add_argument("--good", required=True, metavar="V1", help="a released version where the model does not fail so")
    bs.add_argument("--bad", required=True, metavar="V2", help="a released version where it does (the reference)")
    bs.add_argument("--tier", choices=TIERS, default="tiny", help="census, tiny (default) or full")
    bs.add_argument("--env-base", metavar="NAME", help="take every other pin from this env (default: Zoo's own)")
    bs.add_argument(
        "--match",
        choices=["status", "signature"],
        default="status",
        help="bad: the same status as at --bad (default), or also the same error signature",
    )
    bs.add_argument("--timeout", type=_positive_float, default=600.0, help="seconds per validation (default 600)")
    bs.add_argument("--json", action="store_true", help="print first_bad, last_good and steps as JSON")

    cp = add(
        "compare",
        cmd_compare,
        "Two envs (releases) on the same models: fixed, broken, still failing (same or another signature), "
        "numerics moved; by models and downloads, per cluster.",
    )
    cp.add_argument("--env", action="append", default=[], metavar="NAME", help="twice: A then B (`default`: Zoo's own)")
    cp.add_argument("--backend", help="one backend (default: every backend both envs ran)")
    cp.add_argument("--tier", choices=TIERS, default="tiny", help="census, tiny (default) or full")
    cp.add_argument("--top", type=_positive_int, help="only the snapshot's N most-downloaded models")
    cp.add_argument("--json", action="store_true", help="machine-readable output")

    c = add("coverage", cmd_coverage, "Print coverage (functional, strict, harness; by count and by downloads).")
    c.add_argument("--backend", help="backend spec (default: the newest results')")
    c.add_argument("--tier", choices=TIERS, help="tier (default: the newest results')")
    c.add_argument("--week", help="ISO week YYYY-Www (default: the newest results')")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.add_argument("--env", metavar="NAME", help="the rows of env NAME (default: Zoo's own interpreter's, 'default')")
    c.add_argument(
        "--precision",
        choices=_precisions(),
        help="only results judged at this precision (default: each backend's declared one)",
    )
    c.add_argument("--snapshot", type=_positive_int, metavar="ID", help=SNAPSHOT_HELP)

    d = add("db", cmd_db, "Database maintenance.")
    d.add_argument("action", choices=["upgrade"], help="upgrade: apply all migrations")

    w = add("worker", cmd_worker, "Run a Celery worker (needs ZOO_BROKER_URL).")
    w.add_argument(
        "--queues",
        default="cpu,scheduler",
        help="comma-separated queues: one per device kind (cpu, cuda, neuron, ...) and 'scheduler' for beat's sweeps "
        "(default cpu,scheduler)",
    )
    w.add_argument(
        "--concurrency", type=_positive_int, default=1, help="parallel tasks (default 1: one model per accelerator)"
    )
    w.add_argument("--hostname", help="worker node name")
    w.add_argument(
        "--env",
        metavar="NAME",
        help="take only env NAME's tasks (queues KIND:NAME for each device kind in --queues; no scheduler)",
    )
    w.add_argument("--loglevel", default="info")

    b = add(
        "beat",
        cmd_beat,
        "Run Celery beat (daily top-K refresh, weekly full sweep, weekly report); several beats elect one leader.",
    )
    b.add_argument("--loglevel", default="info")
    b.add_argument(
        "--schedule-file", metavar="PATH", help="where beat keeps its last-run times (default ./celerybeat-schedule)"
    )

    sv = add("serve", cmd_serve, "Serve the REST API and the dashboard.")
    sv.add_argument("--port", type=_port, default=8000, help="TCP port, 1-65535 (default 8000)")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="server processes (default 1; about one per core serves the most requests)",
    )

    rp = add("report", cmd_report, "Write the weekly coverage report.")
    rp.add_argument("--week", help="ISO week YYYY-Www (default: this week, else the newest with results)")
    rp.add_argument("--backend", help="backend spec (default: the newest results')")
    rp.add_argument("--tier", choices=TIERS, help="tier (default: the newest results')")
    rp.add_argument("--format", choices=["md", "html", "json"], default="md")
    rp.add_argument("--output", "-o", help="write to this file instead of stdout")
    rp.add_argument("--snapshot", type=_positive_int, metavar="ID", help=SNAPSHOT_HELP)

    dr = add(
        "doctor",
        cmd_doctor,
        "Print what this machine offers: sandbox features for model processes, backends and their declared "
        "precision, services reachable.",
    )
    dr.add_argument("--json", action="store_true", help="machine-readable output")
    dr.add_argument(
        "--backend",
        metavar="SPEC",
        help="check one backend's preconditions for a first run here instead (neuron: packages and versions, "
        "device nodes and their access for the sandbox uid, visible cores, cache directories, compiler flags); "
        "exits 1 when one fails",
    )

    sd = add("seed", cmd_seed, "Fill the database with realistic synthetic history (demos, tests, benchmarks).")
    sd.add_argument("--models", type=_positive_int, default=200)
    sd.add_argument("--weeks", type=_positive_int, default=8)
    sd.add_argument("--backends", default="neuron,neuron+neuron,cuda+inductor", help="comma-separated backend specs")
    return p


# commands whose --backend names a backend to run (a query's --backend may also name stored rows)
RUN_COMMANDS = frozenset({"validate", "run", "triage", "bisect"})


def _check_inputs(args: argparse.Namespace) -> None:
    """Weeks and backend names, checked before anything heavy is imported (torch takes seconds):
    a typo answers at once, in one line, with the closest known name."""
    from db.weeks import check_week
    from zoo_runner.settings import settings

    for key in ("week", "since", "until"):
        check_week(getattr(args, key, None))
    backend = getattr(args, "backend", None)
    if args.command in RUN_COMMANDS and backend and backend != "auto" and not settings().plugins:
        from zoo_runner.backends import typo_problem
        from zoo_runner.exceptions import UnknownBackend

        problem = typo_problem(backend)
        if problem:
            raise UnknownBackend(problem)


def _set_remote_code(args: argparse.Namespace) -> None:
    from zoo_runner import remote_code
    from zoo_runner.exceptions import BadInput
    from zoo_runner.settings import settings

    here = args.fn is cmd_validate or getattr(args, "here", False) or (args.fn is cmd_triage and not args.clusters)
    if settings().broker_url and not here:
        raise BadInput(
            "--remote-code: with ZOO_BROKER_URL set the workers validate, each under its own ZOO_REMOTE_CODE: "
            "set it where they run (the compose fleet runs sandboxed)"
        )
    remote_code.set_policy(args.remote_code)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not getattr(args, "fn", None):
        parser.print_help()
        return 2
    try:
        if getattr(args, "remote_code", None):  # this process's policy (a broker's workers keep their own)
            _set_remote_code(args)
        _check_inputs(args)
        return args.fn(args)
    except ZooError as exc:
        print(f"zoo: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("zoo: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
