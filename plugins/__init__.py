"""pluggy hookspecs, the plugin manager and the built-in plugins."""
