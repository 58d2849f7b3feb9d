"""`zoo seed`: realistic synthetic history for demos, dashboard tests and scale benchmarks.

Downloads follow a Zipf law like the Hub's (top 100 of 1,000 hold about two thirds); statuses,
fallback ops and error signatures are drawn per backend with week-to-week persistence, so some
models regress and some get fixed, as in real runs.
"""
from __future__ import annotations

import datetime as dt
import random
from typing import Iterable

from sqlalchemy import insert

from db.models import Model, Result, Snapshot, SnapshotEntry, utcnow
from db.repository import iso_week
from db.session import get_engine, session_scope
from zoo_runner.request import HARNESS_VERSION

TASKS = [("feature-extraction", "bert", "BertModel"), ("fill-mask", "xlm-roberta", "XLMRobertaForMaskedLM"), ("image-classification", "vit", "ViTForImageClassification"),
         ("text-generation", "llama", "LlamaForCausalLM"), ("automatic-speech-recognition", "whisper", "WhisperForConditionalGeneration"), ("text2text-generation", "t5", "T5ForConditionalGeneration"),
         ("sentence-similarity", "mpnet", "MPNetModel"), ("text-classification", "distilbert", "DistilBertForSequenceClassification"), ("zero-shot-image-classification", "clip", "CLIPModel")]
LIBS = [("transformers", 0.70), ("sentence-transformers", 0.13), ("timm", 0.06), ("diffusers", 0.03), ("open_clip", 0.03), ("gguf", 0.05)]
STATUS_MIX = {  # per backend kind: status → probability
    "neuron": {"pass": 0.55, "pass_with_fallback": 0.2, "mismatch": 0.04, "compile_error": 0.08, "runtime_error": 0.04, "crash": 0.01, "timeout": 0.02, "oom": 0.01, "reference_error": 0.03, "unsupported": 0.02},
    "default": {"pass": 0.82, "pass_with_fallback": 0.0, "mismatch": 0.03, "compile_error": 0.05, "runtime_error": 0.02, "crash": 0.005, "timeout": 0.01, "oom": 0.005, "reference_error": 0.03, "unsupported": 0.03},
}
FALLBACK_OPS = ["aten::_fft_r2c", "aten::complex", "aten::native_group_norm", "aten::upsample_bicubic2d", "aten::grid_sampler_2d", "aten::_embedding_bag", "aten::cumsum", "aten::sort", "aten::topk", "aten::nonzero"]
ERRORS = {
    "compile_error": [("BackendCompilerFailed", "backend='neuron' raised: lowering aten::{op} is not supported"), ("Unsupported", "dynamic shape operator: aten::nonzero")],
    "runtime_error": [("RuntimeError", "Expected all tensors to be on the same device"), ("NotImplementedError", "aten::{op} is not implemented for the neuron device")],
    "mismatch": [("Mismatch", "out.logits: RMSE exceeds budget")],
    "crash": [("Crash", "process died with signal SIGSEGV during target")],
    "timeout": [("Timeout", "exceeded the time budget of 600s during target")],
    "oom": [("OOM", "out of memory during target")],
    "reference_error": [("ValueError", "no input generator for {op}")],
    "unsupported": [("NotSupported", "needs remote code")],
}


def _pick(rng: random.Random, dist: dict[str, float]) -> str:
    x, acc = rng.random() * sum(dist.values()), 0.0
    for k, p in dist.items():
        acc += p
        if x <= acc:
            return k
    return next(iter(dist))


def _chunks(rows: list[dict], n: int = 5000) -> Iterable[list[dict]]:
    for i in range(0, len(rows), n):
        yield rows[i : i + n]


def seed(models: int = 200, weeks: int = 8, backends: list[str] | None = None, seed_value: int = 0) -> int:
    rng = random.Random(seed_value)
    backends = backends or ["neuron", "neuron+neuron", "cuda+inductor"]
    now = utcnow()
    ids = [f"seed-org-{i % 97}/model-{i:06d}" for i in range(models)]
    downloads = [int(50_000_000 / (rank + 1) ** 1.1) + rng.randint(0, 1000) for rank in range(models)]
    engine = get_engine()
    with session_scope() as s:  # migrate
        pass
    model_rows, entry_rows = [], []
    for i, mid in enumerate(ids):
        task, mtype, arch = TASKS[i % len(TASKS)]
        lib = _pick(rng, dict(LIBS))
        model_rows.append(dict(id=mid, library=lib, model_type=mtype, task=task, tags=[lib, mtype], custom_code=rng.random() < 0.05, gated=False, sha=None, parameters=rng.randint(10**6, 10**10), downloads=downloads[i], first_seen=now, last_seen=now))
    with engine.begin() as conn:
        for chunk in _chunks(model_rows):
            conn.execute(insert(Model), chunk)
        snap_id = conn.execute(insert(Snapshot).values(source="seed", taken_at=now, n_models=models, total_downloads=sum(downloads)).returning(Snapshot.id)).scalar_one()
        for chunk in _chunks([dict(snapshot_id=snap_id, model_id=mid, downloads=downloads[i], rank=i + 1) for i, mid in enumerate(ids)]):
            conn.execute(insert(SnapshotEntry), chunk)
    total = 0
    for backend in backends:
        dist = STATUS_MIX["neuron" if backend.startswith("neuron") else "default"]
        state = {mid: _pick(rng, dist) for mid in ids}
        for w in range(weeks - 1, -1, -1):
            when = now - dt.timedelta(weeks=w)
            week = iso_week(when)
            rows = []
            for i, mid in enumerate(ids):
                if rng.random() < 0.08:  # some models change status week to week
                    state[mid] = _pick(rng, dist)
                status = state[mid]
                task, mtype, arch = TASKS[i % len(TASKS)]
                op = FALLBACK_OPS[(i * 7 + len(backend)) % len(FALLBACK_OPS)]
                err = None
                if status in ERRORS:
                    etype, msg = ERRORS[status][i % len(ERRORS[status])]
                    msg = msg.format(op=op)
                    err = {"type": etype, "message": msg, "signature": f"{etype}: {msg}"[:300], "traceback": ""}
                rows.append(dict(
                    model_id=mid, revision="", tier="tiny", backend=backend, device=backend.split("+")[0].split("@")[0], dtype="float32",
                    status=status, reason="remote_code" if status == "unsupported" else None, fingerprint=f"{mtype}-{i % 50:04d}", library=model_rows[i]["library"],
                    architecture=arch, task=task,
                    metrics={"max_abs_diff": rng.random() * 1e-5, "cosine": 1.0, "compile_s": round(rng.uniform(2, 90), 2) if "+" in backend else None, "reference_ms": round(rng.uniform(1, 50), 2), "target_ms": round(rng.uniform(0.2, 20), 2), "graph_breaks": rng.randint(0, 3)},
                    fallback_ops=[op] if status == "pass_with_fallback" else [], op_census={}, error=err, error_signature=err["signature"] if err else None,
                    versions={"torch": "2.13.0", "zoo": "0.1.0"}, details={"seeded": True}, repro=f"zoo validate {mid} --backend {backend} --tier tiny --json",
                    started_at=when, duration_s=round(rng.uniform(5, 120), 1), week=week, harness_version=HARNESS_VERSION, attempts=1,
                ))
            with engine.begin() as conn:
                for chunk in _chunks(rows):
                    conn.execute(insert(Result), chunk)
            total += len(rows)
    return total
