"""The package version: one place, read by packaging (pyproject) and by ``clientInfo``."""

__version__ = "0.1.0"
