"""Response schemas, one per entity."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


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
    traceback: str | None = None


class ResultOut(BaseModel):
    model_id: str
    revision: str | None = None
    tier: str
    backend: str
    device: str | None = None
    dtype: str | None = None
    status: str
    reason: str | None = None
    fingerprint: str | None = None
    library: str | None = None
    architecture: str | None = None
    task: str | None = None
    metrics: Metrics = Field(default_factory=Metrics)
    fallback_ops: list[str] = Field(default_factory=list)
    op_census: dict[str, int] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    repro: str | None = None
    started_at: str | None = None
    duration_s: float | None = None
    week: str | None = None


class ModelSummary(BaseModel):
    model_id: str
    downloads: int
    library: str | None = None
    model_type: str | None = None
    task: str | None = None
    custom_code: bool = False
    latest_status: dict[str, str] = Field(default_factory=dict, description="backend/tier → latest status")


class ModelPage(BaseModel):
    items: list[ModelSummary]
    total: int
    next_cursor: str | None = None


class ModelDetail(ModelSummary):
    tags: list[str] = Field(default_factory=list)
    sha: str | None = None
    parameters: int | None = None
    latest: list[ResultOut] = Field(default_factory=list)


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
    functional: float | None
    functional_weighted: float | None
    strict_rate: float | None = Field(None, description="pass / valid reference")
    strict_weighted: float | None
    harness: float | None
    harness_weighted: float | None


class Health(BaseModel):
    status: str
    database: str
    version: str
