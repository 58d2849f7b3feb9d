"""Zoo's application layer: the ``zoo`` command, catalog sync and the main job."""
