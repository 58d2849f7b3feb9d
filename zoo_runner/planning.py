"""What the parent knows about a model before (and after) any model process runs, from its own plan.

A row's fingerprint, library, architecture, task and known failure are the parent's: computed here
from the builder's plan (no model built, no code of the repo imported), never taken from what the
model process wrote (:mod:`zoo_runner.verdict` puts them on the row).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .builders import get_builder
from .request import ValidationRequest

log = logging.getLogger(__name__)


@dataclass
class PlanFacts:
    """What the parent's plan says of a request (None where the plan could not say it)."""

    fingerprint: str | None = None
    library: str | None = None
    architecture: str | None = None
    task: str | None = None
    known_failure: dict[str, Any] | None = None  # the quirk table's row, as KnownFailure.details() writes it


def parent_plan(req: ValidationRequest) -> PlanFacts:
    """The :class:`PlanFacts` of ``req``. A plan that fails leaves its facts None (the model process
    then runs and reports why); an ``arch:`` id whose class has a known failure keeps it even then."""
    from .quirks import quirk_for

    facts = PlanFacts(library=req.library or "transformers", task=req.task)
    if req.remote_code:  # from the config and the code's hashes: the parent never imports the code
        from .builders.transformers_builder import remote_reference, task_for
        from .remote_code import fingerprint

        config = req.config or {}
        ref = remote_reference(config, req.task, base_model=req.library == "sentence-transformers")
        arch = ref.rpartition(".")[2] or None if ref else None  # the class its auto_map names for the task
        facts.fingerprint = fingerprint(req)
        facts.architecture = arch
        facts.task = req.task or (task_for(arch) if arch else None)
        model_type = config.get("model_type")
        quirk = quirk_for(arch, model_type if isinstance(model_type, str) else None)
    else:
        quirk = None
        try:
            builder = get_builder(req.library or "transformers")
            plan = builder.plan(req)
            facts.library = builder.library
            facts.fingerprint = plan.fingerprint(builder.library, req.tier)
            arch = getattr(plan, "architecture", None)
            facts.architecture = arch if isinstance(arch, str) else None
            facts.task = builder.task(req, plan)
            quirk = getattr(plan, "quirk", None)
        except Exception as exc:  # the child will turn this into a proper status
            log.debug("no plan for %s: %s", req.model_id, exc)
            if req.model_id.startswith("arch:"):  # a class whose default config fails: its row, by class name
                quirk = quirk_for(req.model_id[len("arch:") :])
    known = getattr(quirk, "known_failure", None)
    facts.known_failure = known.details() if known is not None else None
    return facts


def plan_fingerprint(req: ValidationRequest) -> str | None:
    """The fingerprint the model process will record, computed from the plan alone (no model built).

    None when the plan itself fails: then the model process runs and reports why.
    """
    return parent_plan(req).fingerprint
