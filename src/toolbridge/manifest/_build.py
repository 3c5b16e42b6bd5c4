"""placeholder"""

from __future__ import annotations


class Manifest: ...


class LiveManifest: ...


def load_manifest(*a, **k): ...
