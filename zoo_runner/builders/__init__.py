"""Model builders, one module per library, behind one registry."""

from __future__ import annotations

from .base import Builder, Built, get_builder, library_for_config, register_builder, registered_libraries

__all__ = ["Built", "Builder", "get_builder", "library_for_config", "register_builder", "registered_libraries"]
