"""POST /validations: ask for models to be validated (needs an API key from ZOO_API_KEYS)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials

from api.deps import SessionDep
from api.schemas import ValidationAccepted, ValidationIn
from api.security import api_key_header, bearer, require_api_key
from db import repository
from services import inputs
from zoo_runner.settings import settings

router = APIRouter(tags=["validations"])


async def _auth(
    request: Request,
    key: str | None = Depends(api_key_header),
    cred: HTTPAuthorizationCredentials | None = Depends(bearer),
) -> None:
    require_api_key(request, key, cred)


@router.post(
    "/validations",
    response_model=ValidationAccepted,
    status_code=202,
    dependencies=[Depends(_auth)],
    responses={
        400: {"description": "malformed JSON body"},
        401: {"description": "no API key"},
        403: {"description": "wrong API key"},
        422: {"description": "an unknown backend or env, or a malformed field"},
        503: {"description": "broker unreachable"},
    },
    summary="Queue validations of models on a backend",
)
def create_validations(body: ValidationIn, session: SessionDep) -> ValidationAccepted:
    """With `ZOO_BROKER_URL` set, the models are sent to the Celery workers (`status: queued`,
    one task id per model); otherwise the request is recorded as a run (`status: recorded`) for
    `zoo run` to pick up. Either way the run id lets you follow the results
    (`GET /models/{model_id}/results`). `precision` (default `auto`: the backend's declared compute
    precision) chooses what the backend is judged at."""
    ids = list(dict.fromkeys(body.model_ids))
    broker = settings().broker_url
    workers_have = None
    if broker and body.env:
        from workers import publish  # the Celery side: imported only where a broker is configured

        workers_have = publish.env_consumed
    checks = (
        ("backend", lambda: inputs.check_requested_backend(body.backend)),
        ("env", lambda: inputs.check_env(session, body.env, workers_have)),
    )
    for field, check in checks:
        try:
            check()
        except inputs.BadInput as exc:
            raise RequestValidationError(
                [{"type": "value_error", "loc": ("body", field), "msg": str(exc), "input": getattr(body, field)}]
            ) from None
    run = repository.start_run(
        session,
        body.backend,
        body.tier,
        "celery" if broker else "api",
        len(ids),
        None,
        precision=body.precision,
        env=body.env,
    )
    session.commit()
    task_ids: list[str] = []
    if broker:
        from workers import publish  # the Celery side: imported only where a broker is configured

        try:
            task_ids = publish.enqueue_models(
                ids,
                body.backend,
                body.tier,
                run_id=run.id,
                timeout=body.timeout,
                precision=body.precision,
                env=body.env,
            )
        except Exception as exc:  # BrokerUnavailable and friends: one clear line
            raise HTTPException(503, detail=str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__) from exc
    return ValidationAccepted(
        run_id=run.id,
        status="queued" if broker else "recorded",
        model_ids=ids,
        backend=body.backend,
        tier=body.tier,
        precision=body.precision,
        env=body.env,
        task_ids=task_ids,
    )
