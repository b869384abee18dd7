"""The root of every error strom raises; each subpackage's ``exceptions.py`` derives from it."""


class StromError(Exception):
    """Base class of all strom errors."""
