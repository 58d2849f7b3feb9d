"""Test-only plugins, loaded in model processes through ZOO_PLUGINS."""
