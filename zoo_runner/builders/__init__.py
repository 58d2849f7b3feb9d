"""Model builders, one module per library, behind one registry."""

from __future__ import annotations

from .base import (
    LIBRARIES_WITHOUT_BUILDER,
    Builder,
    Built,
    get_builder,
    library_for_config,
    register_builder,
    registered_libraries,
)

__all__ = [
    "LIBRARIES_WITHOUT_BUILDER",
    "Built",
    "Builder",
    "get_builder",
    "library_for_config",
    "register_builder",
    "registered_libraries",
]
