"""Entry point of the model process: ``python -m zoo_runner.child REQUEST RESULT STAGE [PLAN]``."""

from __future__ import annotations

import json
import logging
import sys


def main(argv: list[str]) -> int:
    """``argv``: REQUEST RESULT STAGE [PLAN]; with a sandbox plan (a spawned model process), the
    sandbox is entered before anything else is imported or read."""
    req_path, out_path, stage_path = argv[1:4]
    if len(argv) > 4:
        from .sandbox_linux import enter

        enter(argv[4])
    from .hang import listen

    listen()  # a hang's stacks, for the launcher to ask for before it kills this process
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    def stage(name: str) -> None:
        with open(stage_path, "w") as f:
            f.write(name)

    from . import remote_code
    from .engine import validate_here
    from .exceptions import ZooError
    from .request import ValidationRequest
    from .result import failure_result

    remote_code.IN_MODEL_PROCESS = True  # a repo's custom code may be imported here, and only here

    req = ValidationRequest.from_dict(json.loads(open(req_path).read()))

    def checkpoint(result: dict) -> None:  # what is known so far, should a later stage crash or time out
        import os

        with open(out_path + ".tmp", "w") as f:
            json.dump(result, f, default=str)
        os.replace(out_path + ".tmp", out_path)

    try:
        if req.triage:
            from .triage.ladder import triage_here

            result = triage_here(req, stage, req.triage_outbox, checkpoint)
        else:
            result = validate_here(req, stage)
    except MemoryError:
        raise
    except ZooError as exc:  # an unknown model, say: Zoo's failure, a reference_error row
        failed = failure_result(req, exc, duration_s=None)
        failed.details["zoo_error"] = type(exc).__name__
        result = failed.to_dict()
    with open(out_path + ".tmp", "w") as f:
        json.dump(result, f, default=str)
    import os

    os.replace(out_path + ".tmp", out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
