"""`zoo seed`: realistic synthetic history for demos, dashboard tests and scale benchmarks.

Downloads follow a Zipf law like the Hub's (top 100 of 1,000 hold about two thirds); statuses,
fallback ops and error signatures are drawn per backend with week-to-week persistence, so some
models regress and some get fixed, as in real runs. Package versions move on a release calendar
(torch every ~8 weeks, the backend's package every ~3) and a release week shakes more statuses,
so regressions come with the versions that introduced them. Compile and runtime errors name the
ATen op that failed where a real backend would, so op gaps have something to rank.

On PostgreSQL rows go in with COPY (100k models × 52 weeks in minutes); elsewhere with
executemany in chunks.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import insert

from db.models import Model, Result, Snapshot, SnapshotEntry, utcnow
from db.session import get_engine, session_scope
from db.weeks import iso_week
from zoo_runner.request import HARNESS_VERSION
from zoo_runner.statuses import NO_VALID_REFERENCE, PASSING, Status

TASKS = [
    ("feature-extraction", "bert", "BertModel"),
    ("fill-mask", "xlm-roberta", "XLMRobertaForMaskedLM"),
    ("image-classification", "vit", "ViTForImageClassification"),
    ("text-generation", "llama", "LlamaForCausalLM"),
    ("automatic-speech-recognition", "whisper", "WhisperForConditionalGeneration"),
    ("text2text-generation", "t5", "T5ForConditionalGeneration"),
    ("sentence-similarity", "mpnet", "MPNetModel"),
    ("text-classification", "distilbert", "DistilBertForSequenceClassification"),
    ("zero-shot-image-classification", "clip", "CLIPModel"),
    ("text-generation", "qwen2", "Qwen2ForCausalLM"),
    ("image-segmentation", "segformer", "SegformerForSemanticSegmentation"),
    ("object-detection", "detr", "DetrForObjectDetection"),
    ("automatic-speech-recognition", "wav2vec2", "Wav2Vec2ForCTC"),
    ("text-generation", "gemma2", "Gemma2ForCausalLM"),
]
LIBS = [
    ("transformers", 0.70),
    ("sentence-transformers", 0.13),
    ("timm", 0.06),
    ("diffusers", 0.03),
    ("open_clip", 0.03),
    ("gguf", 0.05),
]
STATUS_MIX = {  # per backend kind: status → probability
    "neuron": {
        "pass": 0.55,
        "pass_with_fallback": 0.2,
        "mismatch": 0.04,
        "compile_error": 0.08,
        "runtime_error": 0.04,
        "crash": 0.01,
        "timeout": 0.02,
        "oom": 0.01,
        "reference_error": 0.03,
        "unsupported": 0.02,
    },
    "default": {
        "pass": 0.82,
        "pass_with_fallback": 0.0,
        "mismatch": 0.03,
        "compile_error": 0.05,
        "runtime_error": 0.02,
        "crash": 0.005,
        "timeout": 0.01,
        "oom": 0.005,
        "reference_error": 0.03,
        "unsupported": 0.03,
    },
}
# ops that fall back or fail, most common first (drawn Zipf-like)
FALLBACK_OPS = [
    "aten::_fft_r2c",
    "aten::native_group_norm",
    "aten::upsample_bicubic2d",
    "aten::grid_sampler_2d",
    "aten::cumsum",
    "aten::complex",
    "aten::_embedding_bag",
    "aten::sort",
    "aten::topk",
    "aten::nonzero",
    "aten::roll",
    "aten::_weight_norm_interface",
    "aten::im2col",
    "aten::scatter_reduce",
]
ERRORS = {  # "{op}": names one op; "{op} … {op2}": two; none: no op named
    "compile_error": [
        ("BackendCompilerFailed", "backend='neuron' raised: lowering {op} is not supported", 0.6),
        ("Unsupported", "dynamic shape operator: aten::nonzero", 0.15),
        ("BackendCompilerFailed", "backend='neuron' raised: no lowering for {op} after decomposing {op2}", 0.1),
        ("InternalTorchDynamoError", "graph break in a loop body exceeded the limit", 0.15),
    ],
    "runtime_error": [
        ("NotImplementedError", "{op} is not implemented for the neuron device", 0.5),
        ("RuntimeError", "Expected all tensors to be on the same device, but found at least two devices", 0.35),
        ("RuntimeError", "shape mismatch in {op}", 0.15),
    ],
    "mismatch": [
        ("Mismatch", "out.logits: RMSE ratio exceeds the budget", 0.7),
        ("Mismatch", "out.last_hidden_state: cosine below 0.999", 0.3),
    ],
    "crash": [
        ("Crash", "process died with signal SIGSEGV during target", 0.7),
        ("Crash", "process died with signal SIGABRT during compile", 0.3),
    ],
    "timeout": [
        ("Timeout", "exceeded the time budget of 600s during compile", 0.8),
        ("Timeout", "exceeded the time budget of 600s during target", 0.2),
    ],
    "oom": [
        ("OOM", "out of memory during target (device)", 0.6),
        ("OOM", "out of memory during reference (host)", 0.4),
    ],
    "reference_error": [
        ("ValueError", "no input generator for this processor", 0.6),
        ("RuntimeError", "reference run failed in float64", 0.4),
    ],
    "unsupported": [("NotSupported", "needs remote code", 1.0)],
}
REASONS = {"unsupported": ["remote_code", "pickle_only", "no_pytorch_weights", "gated", "too_large"]}
# What each kind of backend declares (zoo_runner.backends.declared_precision): TorchNeuron casts
# matmuls to bf16, CUDA runs TF32 matmuls, the rest computes in fp32.
DECLARED_PRECISION = {"neuron": ("bf16", "plugin"), "cuda": ("tf32", "plugin")}
NO_VERDICT_PRECISION = NO_VALID_REFERENCE  # refused or failed before a precision applied
TORCH_RELEASES = ["2.9.1", "2.10.0", "2.11.0", "2.12.0", "2.13.0", "2.14.0", "2.15.0"]


def _pick(rng: random.Random, dist: dict[str, float]) -> str:
    x, acc = rng.random() * sum(dist.values()), 0.0
    for k, p in dist.items():
        acc += p
        if x <= acc:
            return k
    return next(iter(dist))


def _zipf_op(rng: random.Random) -> str:
    # P(op k) ∝ 1/(k+1): a few ops dominate, as they do in real fallback lists
    weights = [1 / (k + 1) for k in range(len(FALLBACK_OPS))]
    return rng.choices(FALLBACK_OPS, weights)[0]


def _chunks(rows: list[dict], n: int = 5000) -> Iterable[list[dict]]:
    for i in range(0, len(rows), n):
        yield rows[i : i + n]


def versions_for(backend: str, week_index: int, weeks: int) -> dict[str, str]:
    """Versions in force ``week_index`` weeks after the start (releases on a fixed calendar)."""
    age = weeks - 1 - week_index  # weeks before now
    torch_v = TORCH_RELEASES[max(0, len(TORCH_RELEASES) - 1 - age // 8)]
    v = {"torch": torch_v, "transformers": f"5.{23 - age // 4}.0", "zoo": "0.1.0"}
    if backend.startswith("neuron"):
        v["torch-neuronx"] = f"{torch_v}.1.{max(0, 40 - (age + 2) // 3)}"
    return v


def precision_for(backend: str) -> tuple[str, str]:
    """(precision, source) a backend's seeded rows are judged at."""
    return DECLARED_PRECISION.get(backend.split("+")[0].split("@")[0], ("fp32", "default"))


def _json(v: Any) -> str | None:
    return None if v is None else json.dumps(v, separators=(",", ":"))


def _copy_writer(conn, table: str, columns: list[str]) -> Callable[[list[dict]], None]:
    """COPY rows into ``table`` through psycopg 3 (PostgreSQL), else executemany."""
    raw = conn.connection.driver_connection
    json_cols = {"tags", "metrics", "fallback_ops", "op_census", "error", "versions", "details"}

    def write(rows: list[dict]) -> None:
        with raw.cursor() as cur:
            with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
                for r in rows:
                    cp.write_row([_json(r[c]) if c in json_cols else r[c] for c in columns])

    return write


def seed(
    models: int = 200,
    weeks: int = 8,
    backends: list[str] | None = None,
    seed_value: int = 0,
    tier: str = "tiny",
    progress: Callable[[int], None] | None = None,
) -> int:
    """Insert ``models`` catalog models (one snapshot) and ``weeks`` weekly results per model and
    backend, ending this week. Returns the number of results inserted."""
    rng = random.Random(seed_value)
    backends = backends or ["neuron", "neuron+neuron", "cuda+inductor"]
    now = utcnow()
    ids = [f"seed-org-{i % 97}/model-{i:06d}" for i in range(models)]
    downloads = [int(50_000_000 / (rank + 1) ** 1.1) + rng.randint(0, 1000) for rank in range(models)]
    engine = get_engine()
    with session_scope():  # migrate
        pass
    pg = engine.dialect.name == "postgresql"
    model_rows = []
    libs = dict(LIBS)
    for i, mid in enumerate(ids):
        task, mtype, arch = TASKS[i % len(TASKS)]
        lib = _pick(rng, libs)
        model_rows.append(
            dict(
                id=mid,
                library=lib,
                model_type=mtype,
                task=task,
                tags=[lib, mtype],
                custom_code=rng.random() < 0.05,
                gated=False,
                sha=None,
                parameters=rng.randint(10**6, 10**10),
                downloads=downloads[i],
                first_seen=now,
                last_seen=now,
            )
        )
    with engine.begin() as conn:
        for chunk in _chunks(model_rows):
            conn.execute(insert(Model), chunk)
        snap_id = conn.execute(
            insert(Snapshot)
            .values(source="seed", taken_at=now, n_models=models, total_downloads=sum(downloads))
            .returning(Snapshot.id)
        ).scalar_one()
        for chunk in _chunks(
            [dict(snapshot_id=snap_id, model_id=mid, downloads=downloads[i], rank=i + 1) for i, mid in enumerate(ids)]
        ):
            conn.execute(insert(SnapshotEntry), chunk)
    result_cols = [
        "model_id",
        "revision",
        "tier",
        "backend",
        "device",
        "dtype",
        "status",
        "reason",
        "fingerprint",
        "library",
        "architecture",
        "task",
        "metrics",
        "fallback_ops",
        "op_census",
        "error",
        "error_signature",
        "versions",
        "details",
        "repro",
        "started_at",
        "duration_s",
        "week",
        "harness_version",
        "attempts",
        "precision",
        "precision_source",
    ]
    total = 0
    for backend in backends:
        kind = "neuron" if backend.startswith("neuron") else "default"
        dist = STATUS_MIX[kind]
        device = backend.split("+")[0].split("@")[0]
        compiled = "+" in backend
        declared, source = precision_for(backend)
        strict_rng = random.Random(f"{seed_value}:{backend}:strict_fp32")  # apart from rng: the history stays as it was
        state: dict[str, str] = {}
        ops: dict[str, list[str]] = {}
        msgs: dict[str, tuple[str, str]] = {}

        # this backend's dist, device and tables bound as defaults: draw is called within this iteration only
        def draw(mid: str, *, dist=dist, device=device, state=state, ops=ops, msgs=msgs) -> None:
            st = _pick(rng, dist)
            state[mid] = st
            op = _zipf_op(rng)
            ops[mid] = [op] if rng.random() < 0.7 else sorted({op, _zipf_op(rng)})
            if st in ERRORS:
                choices = ERRORS[st]
                etype, msg, _ = rng.choices(choices, [c[2] for c in choices])[0]
                op2 = next((o for o in FALLBACK_OPS if o != op), op)
                msgs[mid] = (etype, msg.format(op=op, op2=op2).replace("neuron", device))

        for mid in ids:
            draw(mid)
        prev_versions = None
        for w in range(weeks - 1, -1, -1):
            when = now - dt.timedelta(weeks=w)
            week = iso_week(when)
            since_monday = int(
                (
                    when
                    - dt.datetime.combine(
                        when.date() - dt.timedelta(days=when.weekday()), dt.time(), tzinfo=when.tzinfo
                    )
                ).total_seconds()
            )
            vers = versions_for(backend, weeks - 1 - w, weeks)
            release = prev_versions is not None and vers != prev_versions
            churn = 0.15 if release else 0.05  # a release week shakes more statuses
            prev_versions = vers
            rows = []
            for i, mid in enumerate(ids):
                if rng.random() < churn:
                    draw(mid)
                status = state[mid]
                task, mtype, arch = TASKS[i % len(TASKS)]
                err = None
                if status in ERRORS:
                    etype, msg = msgs[mid]
                    err = {
                        "type": etype,
                        "message": msg,
                        "signature": f"{etype}: {msg}"[:300],
                        "traceback": f"Traceback (most recent call last):\n  ...\n{etype}: {msg}",
                    }
                reason = rng.choice(REASONS["unsupported"]) if status == Status.UNSUPPORTED else None
                ran = status not in NO_VALID_REFERENCE
                metrics = {
                    "max_abs_diff": round(rng.random() * (1e-2 if status == "mismatch" else 1e-5), 8) if ran else None,
                    "max_rel_diff": round(rng.random() * (1e-1 if status == "mismatch" else 1e-4), 8) if ran else None,
                    "rmse_ratio": round(rng.uniform(0.1, 0.9) if status != "mismatch" else rng.uniform(1.5, 9), 4)
                    if ran
                    else None,
                    "cosine": round(1 - rng.random() * (1e-2 if status == "mismatch" else 1e-7), 9) if ran else None,
                    "compile_s": round(rng.lognormvariate(2.5, 0.8), 2) if compiled and ran else None,
                    "reference_ms": round(rng.uniform(1, 50), 2),
                    "target_ms": round(rng.uniform(0.2, 20), 2) if ran else None,
                    "peak_mem_bytes": rng.randint(10**7, 10**9),
                    "graph_breaks": rng.randint(0, 3) if compiled else None,
                }
                judged = status not in NO_VERDICT_PRECISION
                details: dict[str, Any] = {"seeded": True}
                if judged:
                    details["precision_source"] = source
                    details["strict_fp32"] = status in PASSING and (declared == "fp32" or strict_rng.random() < 0.6)
                rows.append(
                    dict(
                        model_id=mid,
                        revision="",
                        tier=tier,
                        backend=backend,
                        device=device,
                        dtype="float32",
                        status=status,
                        reason=reason,
                        fingerprint=f"{mtype}-{i % 50:04d}",
                        library=model_rows[i]["library"],
                        architecture=arch,
                        task=task,
                        metrics=metrics,
                        fallback_ops=ops[mid] if status == "pass_with_fallback" else [],
                        op_census={},
                        error=err,
                        error_signature=err["signature"] if err else None,
                        versions=vers,
                        details=details,
                        repro=f"zoo validate {mid} --backend {backend} --tier {tier} --json",
                        started_at=when - dt.timedelta(seconds=min(i % 3600, since_monday)),
                        duration_s=round(rng.uniform(5, 120), 1),
                        week=week,
                        harness_version=HARNESS_VERSION,
                        attempts=1,
                        precision=declared if judged else "fp32",
                        precision_source=source if judged else None,
                    )
                )
            with engine.begin() as conn:
                if pg:
                    write = _copy_writer(conn, "results", result_cols)
                    for chunk in _chunks(rows, 20000):
                        write(chunk)
                else:
                    for chunk in _chunks(rows):
                        conn.execute(insert(Result), chunk)
            total += len(rows)
            if progress:
                progress(len(rows))
    if pg:  # statistics for the planner, and the visibility map for index-only scans
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE results")
            conn.exec_driver_sql("VACUUM ANALYZE snapshot_entries")
    return total
