"""Zoo's version: a leaf, so the engine's modules read it without importing the package."""

__version__ = "0.1.0"
