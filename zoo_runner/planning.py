"""What the parent can know about a model before any model process starts: its fingerprint."""

from __future__ import annotations

import logging

from .builders import get_builder
from .request import ValidationRequest

log = logging.getLogger(__name__)


def plan_fingerprint(req: ValidationRequest) -> str | None:
    """The fingerprint the model process will record, computed from the plan alone (no model built).

    None when the plan itself fails: then the model process runs and reports why.
    """
    if req.remote_code:  # from the config and the code's hashes: the parent never imports the code
        from .remote_code import fingerprint

        return fingerprint(req)
    try:
        builder = get_builder(req.library or "transformers")
        return builder.plan(req).fingerprint(builder.library, req.tier)
    except Exception as exc:  # the child will turn this into a proper status
        log.debug("no fingerprint for %s: %s", req.model_id, exc)
        return None
