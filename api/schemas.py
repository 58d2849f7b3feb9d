"""Response schemas, one per entity."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from zoo_runner.precision import CHOICES, PRECISIONS
from zoo_runner.statuses import Reason, Status

Precision = Literal[PRECISIONS]  # type: ignore[valid-type]
PrecisionChoice = Literal[CHOICES]  # type: ignore[valid-type]


class Metrics(BaseModel):
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    rmse_ratio: float | None = None
    cosine: float | None = None
    compile_s: float | None = None
    reference_ms: float | None = None
    target_ms: float | None = None
    peak_mem_bytes: int | None = None
    graph_breaks: int | None = None


class ErrorInfo(BaseModel):
    type: str | None = None
    message: str | None = None
    signature: str | None = None
    signature_hash: str | None = Field(None, description="a short key of `signature`: the same failure across models")
    traceback: str | None = None


class ResultOut(BaseModel):
    id: int | None = Field(None, description="the stored result: GET /api/v1/results/{id}")
    model_id: str
    revision: str | None = None
    tier: str
    backend: str
    device: str | None = None
    dtype: str | None = None
    status: Status
    reason: Reason | None = None
    fingerprint: str | None = None
    library: str | None = None
    architecture: str | None = None
    task: str | None = None
    precision: str | None = Field(
        None,
        description="what the verdict was judged at (fp32, tf32, bf16, fp16); null where the engine never got that far",
    )
    metrics: Metrics = Field(default_factory=Metrics)
    fallback_ops: list[str] = Field(default_factory=list)
    op_census: dict[str, int] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    repro: str | None = None
    started_at: str | None = None
    duration_s: float | None = None
    details: dict[str, Any] = Field(
        default_factory=dict,
        description="what the engine recorded besides the SPEC's fields: precision_source (plugin, flag or default), "
        "strict_fp32, sandbox, reference_cache, ...",
    )
    week: str | None = None


class ModelSummary(BaseModel):
    model_id: str
    downloads: int
    library: str | None = None
    model_type: str | None = None
    task: str | None = None
    custom_code: bool = False
    latest_status: dict[str, Status] = Field(default_factory=dict, description="backend/tier → latest status")


class ModelPage(BaseModel):
    items: list[ModelSummary]
    total: int
    next_cursor: str | None = None


class ModelDetail(ModelSummary):
    tags: list[str] = Field(default_factory=list)
    sha: str | None = None
    parameters: int | None = None
    latest: list[ResultOut] = Field(default_factory=list)
    bisections: list[dict[str, Any]] = Field(
        default_factory=list, description="`zoo bisect` outcomes: the first bad version of a package, newest first"
    )


class ResultPage(BaseModel):
    items: list[ResultOut]
    total: int


class CoverageOut(BaseModel):
    backend: str | None
    tier: str
    week: str | None
    snapshot_id: int | None
    catalog_models: int
    catalog_downloads: int
    attempted: int
    attempted_downloads: int
    valid_reference: int
    valid_reference_downloads: int
    passing: int
    passing_downloads: int
    strict: int
    strict_downloads: int
    status_counts: dict[str, int]
    below_half_on_backend: int = Field(
        0, description="passing models whose backend executed under half of their ops (details.backend_share < 0.5)"
    )
    env: str = Field("", description="the env whose rows these are (`zoo env`); empty: Zoo's own interpreter's")
    functional: float | None
    functional_weighted: float | None
    strict_rate: float | None = Field(None, description="pass / valid reference")
    strict_weighted: float | None
    harness: float | None
    harness_weighted: float | None
    precision: str = Field(
        "declared",
        description="the precision scope: `declared` (each backend's own compute precision) or the one asked for with "
        "`precision=`",
    )


class Health(BaseModel):
    status: str
    database: str
    version: str


class CoverageGroup(CoverageOut):
    group: str | None = Field(None, description="the task, library or architecture of this row (null: unknown)")


class CoverageGrouped(CoverageOut):
    """Coverage of the scope, with one row per group when ``group_by`` is given."""

    group_by: str | None = None
    groups: list[CoverageGroup] | None = None


class CoverageHistory(BaseModel):
    backend: str | None = None
    tier: str | None = None
    weeks: int
    items: list[CoverageOut] = Field(description="one point per ISO week and (backend, tier), oldest first")


class ExampleModel(BaseModel):
    model_id: str
    downloads: int
    status: Status | None = None


class OpGap(BaseModel):
    op: str
    unlocked_downloads: int = Field(description="downloads of models whose only blocker is this op")
    unlocked_models: int
    unlocked_share: float | None = Field(
        None, description="unlocked_downloads / valid-reference downloads of the scope"
    )
    strict_models: int = Field(description="pass_with_fallback with this op as the only fallback op")
    strict_downloads: int
    functional_models: int = Field(description="compile/runtime errors whose message names only this op")
    functional_downloads: int
    affected_models: int = Field(description="models whose fallback ops or error message name this op at all")
    affected_downloads: int
    example_models: list[ExampleModel]


class OpGapPage(BaseModel):
    backend: str | None
    tier: str | None
    week: str | None
    precision: str = Field(
        "declared", description="the precision scope: `declared` or the one asked for with `precision=`"
    )
    valid_reference: int
    valid_reference_downloads: int
    total: int
    items: list[OpGap]


class KnownFailureOut(BaseModel):
    reason: str
    link: str
    expires: str
    expired: bool


class ClusterTriage(BaseModel):
    attribution: str | None = Field(
        None, description="the first rung that reproduces the failure: dynamo, aot_autograd, backend, zoo, …"
    )
    model_id: str
    repro_url: str | None = Field(None, description="the minimal standalone `repro.py`, served by the API")
    issue_url: str | None = Field(None, description="the draft issue, `issue.md`, served by the API")
    graph_nodes: int | None = None
    repro_nodes: int | None = None


class FailureCluster(BaseModel):
    signature: str
    error_type: str | None = None
    models: int
    downloads: int
    statuses: dict[str, int]
    example_models: list[ExampleModel]
    known: int = Field(0, description="models whose failure a quirk row names a known failure, not expired")
    expired: int = Field(0, description="models under a known-failure row that has expired: re-check")
    known_failure: KnownFailureOut | None = None
    owner: Literal["backend", "zoo"] = Field(
        "backend",
        description="whose failure: `backend` (a valid CPU reference, then a failure on the backend) or "
        "`zoo` (`unsupported` / `reference_error`: Zoo's own gap, never counted as the backend's)",
    )
    triage: ClusterTriage | None = Field(None, description="what `zoo triage` found for this cluster, when it has run")


class FailurePage(BaseModel):
    backend: str | None
    tier: str | None
    week: str | None
    precision: str = Field(
        "declared", description="the precision scope: `declared` or the one asked for with `precision=`"
    )
    failing_models: int = Field(description="the backend's failing models (Zoo's gaps not counted)")
    failing_downloads: int
    zoo_models: int = Field(0, description="models with no verdict because of Zoo (`unsupported`, `reference_error`)")
    zoo_downloads: int = 0
    backend_clusters: int = Field(0, description="how many of the clusters are the backend's (they come first)")
    new_models: int = Field(0, description="the backend's failing models no known-failure row names")
    new_downloads: int = 0
    known_models: int = Field(0, description="failing models a known-failure row names (expired ones included)")
    known_downloads: int = 0
    expired_models: int = Field(0, description="failing models whose known-failure row has expired: re-check")
    total: int
    items: list[FailureCluster]


class Transition(BaseModel):
    model_id: str
    downloads: int
    status_before: Status
    status_now: Status
    error_signature: str | None = None
    first_versions: dict[str, Any] = Field(description="versions of the first result with the new status")
    previous_versions: dict[str, Any] = Field(description="versions of the last result before it")
    changed_versions: dict[str, list[Any]] = Field(description="package → [before, now], for those that changed")
    repro: str | None = None


class TransitionPage(BaseModel):
    backend: str | None
    tier: str | None
    week: str | None
    precision: str = Field(
        "declared", description="the precision scope: `declared` or the one asked for with `precision=`"
    )
    since: str | None
    direction: str
    total: int
    downloads: int
    items: list[Transition]


class PrecisionRow(BaseModel):
    backend: str
    tier: str
    week: str
    precision: str
    source: str = Field(description="plugin, default (declared) or flag (asked for with --precision)")
    declared: bool = Field(description="the backend's declared precision (source plugin or default)")
    rows: int = Field(description="results of the week judged at this precision")
    strict_fp32: int = Field(description="of those, results that would also meet the fp32 budget")


class CommonTier(BaseModel):
    tier: str
    backends: list[str]
    common_models: int = Field(description="models every backend of this tier has a result for (the intersection)")
    attempted: dict[str, int] = Field(description="each backend's own slice, for the record")
    items: list[CoverageOut] = Field(description="each backend's coverage over the common models only")


class BackendsOut(BaseModel):
    week: str | None
    items: list[CoverageOut]
    common: list[CommonTier] = Field(
        default_factory=list,
        description="the backends of each tier compared on the same models: the intersection, with its denominator",
    )
    precisions: list[PrecisionRow] = Field(
        default_factory=list, description="what each backend's rows of the week were judged at"
    )


ModelId = Annotated[
    str,
    Field(
        min_length=1, max_length=255, pattern=r"^(arch:[A-Za-z0-9_]+|[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9_.\-]+)?)$"
    ),
]


class ValidationIn(BaseModel):
    model_ids: list[ModelId] = Field(min_length=1, max_length=1000, description="Hub repo ids or arch: ids")
    backend: str = Field("auto", max_length=128, pattern=r"^(auto|[A-Za-z0-9_]+(\+[A-Za-z0-9_.\-]+)?(@[a-z0-9]+)?)$")
    tier: str = Field("tiny", pattern=r"^(census|tiny|full)$")
    timeout: float = Field(600.0, gt=0, le=86400)
    precision: PrecisionChoice = Field(
        "auto",
        description="what the backend is judged at: auto (its declared compute precision), fp32, tf32, bf16 or fp16",
    )
    env: str | None = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9._-]{0,62}$",
        description="run in this env (`zoo env`): sent to the queue KIND:ENV, which workers started with --env take",
    )


class ValidationAccepted(BaseModel):
    run_id: int
    status: str = Field(description="queued: sent to the Celery broker; recorded: stored, no broker configured")
    model_ids: list[str]
    backend: str
    tier: str
    precision: str = "auto"
    env: str | None = None
    task_ids: list[str] = Field(default_factory=list)


class CompareSide(BaseModel):
    id: int = Field(description="the stored result: GET /api/v1/results/{id}")
    status: Status
    signature: str | None = None
    rmse_ratio: float | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    week: str | None = None


class CompareItem(BaseModel):
    model_id: str
    backend: str
    kind: str = Field(
        description="fixed, broken, still_failing_same, still_failing_other, numerics_moved, zoo, unchanged"
    )
    downloads: int
    a: CompareSide
    b: CompareSide


class CompareCluster(BaseModel):
    kind: str
    signature: str
    models: int
    downloads: int


class ComparePage(BaseModel):
    env_a: str
    env_b: str
    backend: str | None
    tier: str
    top: int | None
    models: int = Field(description="models (and backends) with a row in both envs: the comparison's denominator")
    only_a: int
    only_b: int
    counts: dict[str, dict[str, int]]
    clusters: list[CompareCluster] = Field(description="the largest clusters first, at most `limit` of them")
    items: list[CompareItem] = Field(description="this page's items (`limit`, from `cursor`)")
    total_items: int = Field(0, description="items over every page")
    next_cursor: str | None = Field(None, description="the next page's cursor; null on the last")
