"""The package's version, at the floor: every layer may read it without importing the package face."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
