"""Manifests: agents, models, MCP servers and policy in one YAML file, checked before they run.

- `check_manifest(paths)` runs the static analyzer (`toolbridge check`) and returns a
  `CheckReport` of `Diagnostic`s, each with file, line, column, a stable code and a message.
- `load_manifest(path)` analyzes a file and returns a `Manifest` (raising `ConfigError` when the
  analysis finds errors); `manifest.open()` builds the live objects (clients, providers, models,
  agents, the runtime) and closes them all when the `async with` block ends.
- `manifest_json_schema()` is the JSON Schema of the format (`toolbridge schema`).
"""

from __future__ import annotations

from ._analyzer import AnalyzedManifest, CheckReport, Diagnostic, analyze_file, check_manifest
from ._build import LiveManifest, Manifest, load_manifest
from ._build_telo import Target
from ._mcp_server import serve_http_target, serve_stdio_target
from ._reach import unneeded_secrets
from ._schema import manifest_json_schema
from ._secrets import Secret, SecretSources, parse_secret_arg, read_secrets_file, upper_snake
from ._sequence import SequenceResult
from ._targets import AgentRunnable, Runnable, camel_json, model_inputs

__all__ = [
    "AgentRunnable",
    "AnalyzedManifest",
    "CheckReport",
    "Diagnostic",
    "LiveManifest",
    "Manifest",
    "Runnable",
    "Secret",
    "SecretSources",
    "SequenceResult",
    "Target",
    "analyze_file",
    "camel_json",
    "check_manifest",
    "load_manifest",
    "manifest_json_schema",
    "model_inputs",
    "parse_secret_arg",
    "read_secrets_file",
    "serve_http_target",
    "serve_stdio_target",
    "unneeded_secrets",
    "upper_snake",
]
