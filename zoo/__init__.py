"""The top layer: the ``zoo`` command and the main job (sync if needed, validate, summarize)."""
