"""Telo compatibility: module aliases, and a precise refusal for what toolbridge does not run.

A Telo application imports modules under aliases (`imports: { Ai: oci://ghcr.io/telorun/ai@0.16.0,
McpClient: oci://ghcr.io/telorun/mcp-client@0.14.3 }`) and writes kinds as `Alias.Kind`. toolbridge
provides four of Telo's modules, by the module's name:

| module | canonical prefix |
|---|---|
| `ai` | `Ai` |
| `ai-openai` | `AiOpenai` |
| `ai-mcp` | `AiMcp` |
| `mcp-client` | `Mcp` |

(and every other prefix toolbridge's own kinds use, such as `Tasks` or `AiAnthropic`, by its
PascalCase module name). `KindResolver.resolve` turns a written kind into its canonical kind
(`McpClient.HttpClient` -> `Mcp.HttpClient`), or says precisely why it cannot: a kind of a module
toolbridge does not provide (`Http.Api`, `Run.Sequence`, a local Telo library), or a Telo kind of
a provided module that toolbridge does not implement (`Ai.Model`). Without a `Telo.Application`,
the canonical prefixes stand for themselves and `McpClient` for the MCP client module, as in
Telo's documentation.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["TELO_NAMESPACES", "KindResolution", "KindResolver", "module_of_source", "telo_namespace_message"]

_MODULE_PREFIX = {
    "ai": "Ai",
    "ai-openai": "AiOpenai",
    "ai-mcp": "AiMcp",
    "mcp-client": "Mcp",
    "mcp-server": "McpServer",
    "http-server": "HttpServer",
}

# The aliases Telo's documentation writes for its modules: alias -> module. A kind under one of
# them in a Telo.Application that does not import it is Telo's UNDEFINED_KIND; a finding about a
# module toolbridge does not provide names the module, not the alias.
_TELO_PREFIXES = {
    "Ai": "ai",
    "AiOpenai": "ai-openai",
    "AiMcp": "ai-mcp",
    "Mcp": "mcp-client",
    "McpClient": "mcp-client",
    "McpServer": "mcp-server",
    "JS": "javascript",
    "JavaScript": "javascript",
    "Javascript": "javascript",
    "Http": "http-server",
    "HttpServer": "http-server",
    "HttpClient": "http-client",
    "Run": "run",
    "Pdf": "pdf",
    "Sql": "sql",
    "Config": "config",
}
_TELO_REGISTRY = "oci://ghcr.io/telorun/"

# Telo kinds of the provided modules that toolbridge does not implement, with what they are.
_NOT_IMPLEMENTED = {
    "Ai.Model": "the abstract model contract (use a concrete model kind)",
    "Ai.ToolProvider": "the abstract tool provider contract (use Ai.Tools or AiMcp.ToolProvider)",
    "Mcp.Client": "the abstract client contract (use Mcp.StdioClient or Mcp.HttpClient)",
}


# Telo modules of which toolbridge implements one kind (by prefix): their other kinds are Telo
# kinds it does not implement.
_PARTLY_PROVIDED = {
    "HttpServer": "http-server (toolbridge implements its Http.Server, to serve an Mcp.HttpEndpoint)"
}


# Kinds of Telo's MCP server module (conventionally imported as `Mcp` too), by name: written
# `Mcp.Kind` where `Mcp` is the client module, they are the server module's.
_MCP_SERVER_KINDS = frozenset({"StdioServer", "HttpEndpoint", "Tools", "Resources", "Prompts"})


def _pascal(module: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_]", module) if part)


# Names Telo's CEL scopes have that toolbridge does not provide, with what they hold in Telo.
TELO_NAMESPACES = {
    "steps": "results of earlier targets or steps, `steps.NAME.result`: toolbridge provides them "
    "only in a `Telo.Application` target's `inputs` and `when`",
    "resources": "other resources' published fields, `resources.NAME.FIELD`",
    "request": "the request of an HTTP handler of Telo's http-server module",
    "inputs": "a callable's inputs inside a Telo definition's body",
    "ports": "the application's `ports`",
    "error": "the caught failure in `catch:` and `finally:` blocks",
    "self": "a templated Telo definition's own fields",
}


def telo_namespace_message(name: str, expression: str, seen: str) -> str:
    """The one line for an expression that reads Telo's namespace `name` (see `TELO_NAMESPACES`)."""
    return (
        f"`{expression[:80]}` reads Telo's `{name}` ({TELO_NAMESPACES[name]}), which toolbridge "
        f"does not provide; {seen}"
    )


# Telo's own kernel kinds other than `Telo.Application`, with what they are.
_TELO_KERNEL = {
    "Telo.Library": "a Telo library's own manifest (its exports, kind definitions and resources); "
    "toolbridge runs applications (Telo.Application), not libraries",
    "Telo.Definition": "a Telo kind definition (toolbridge implements the kinds it runs itself, "
    "and does not load new ones)",
    "Telo.Abstract": "an abstract Telo kind (a contract other kinds implement); toolbridge does not "
    "load kind definitions",
}


def module_of_source(source: str, base_dir: str | None = None) -> str | None:
    """The Telo module an import source names: `oci://ghcr.io/telorun/ai@0.16.0#sha…` -> `ai`.

    `pkg:npm/@telorun/NAME` and local paths (`../../mcp-client`) name the module by their last
    component. A path whose last component is `..` or `.` (`../`, as Telo's module tests import
    the module they test) names the directory it leads to: with `base_dir` (the manifest's
    directory) `../` from `modules/mcp-server/tests` is `mcp-server`; without it, `None`. A local
    YAML file (a library of its own) names none (`None`).
    """
    text = source.strip().split("#", 1)[0]
    if text.startswith("oci://") or text.startswith("pkg:"):
        last = text.rstrip("/").rsplit("/", 1)[-1]
        return last.split("@", 1)[0] or None
    last = text.rstrip("/").rsplit("/", 1)[-1]
    if last.endswith((".yaml", ".yml")):
        return None
    if not last or last in (".", ".."):
        if base_dir is None or not text or "\x00" in text:
            return None
        # Lexically, as Telo resolves a path import against the importing manifest's directory.
        resolved = posixpath.normpath(posixpath.join(base_dir, text))
        last = posixpath.basename(resolved)
        return last or None
    return last.split("@", 1)[0] or None


@dataclass(frozen=True, slots=True)
class KindResolution:
    """What a written `kind` means here.

    Attributes:
        kind: the canonical kind, when toolbridge runs it.
        code: otherwise the diagnostic code (`ERR_MANIFEST_UNSUPPORTED` or `ERR_MANIFEST_UNKNOWN_KIND`).
        message: otherwise the one-line reason.
    """

    kind: str | None
    code: str = ""
    message: str = ""


class KindResolver:
    """Resolves written kinds against the known kinds and the application's imports.

    Args:
        known: every canonical kind toolbridge implements.
        imports: the `Telo.Application`'s (or `Telo.Library`'s) alias -> source mapping (`None`
            without one).
        base_dir: the manifest's directory, against which a `../` import is resolved.
    """

    def __init__(
        self, known: Iterable[str], imports: Mapping[str, str] | None = None, base_dir: str | None = None
    ) -> None:
        self.known = list(known)
        provided = {k.split(".", 1)[0] for k in self.known if "." in k} - {"Telo"}
        # alias -> canonical prefix, or None when the alias names a module toolbridge lacks.
        self.aliases: dict[str, str | None] = {p: p for p in provided}
        self.aliases["McpClient"] = "Mcp"
        self.sources: dict[str, str] = {}
        self.modules: dict[str, str | None] = {}
        # In a Telo.Application, a Telo module's kind needs its alias imported (Telo refuses the
        # kind as UNDEFINED_KIND otherwise); toolbridge's own modules need no import.
        self.undefined: frozenset[str] = (
            frozenset(_TELO_PREFIXES) - set(imports) if imports is not None else frozenset()
        )
        for alias, source in (imports or {}).items():
            module = module_of_source(source, base_dir)
            self.sources[alias] = source
            self.modules[alias] = module
            if module is None:
                # A path that names no module: an alias that is a provided prefix keeps its meaning.
                if alias not in provided:
                    self.aliases[alias] = None
                continue
            prefix = _MODULE_PREFIX.get(module, _pascal(module))
            self.aliases[alias] = prefix if prefix in provided else None

    def resolve(self, written: str) -> KindResolution:
        """The canonical kind of `written`, or why it cannot be run."""
        if written in self.known and ("." not in written or written.startswith("Telo.")):
            return KindResolution(written)  # no import alias renames the kernel's own kinds
        if written in _TELO_KERNEL:
            return KindResolution(
                None, "ERR_MANIFEST_UNSUPPORTED", f"kind {written} is {_TELO_KERNEL[written]}"
            )
        alias, dot, name = written.partition(".")
        if not dot or not name:
            return self._unknown(written)
        if alias in self.undefined:
            module = _TELO_PREFIXES[alias]
            return KindResolution(
                None,
                "ERR_MANIFEST_UNDEFINED_KIND",
                f"kind {written[:80]}: the application imports no module as {alias} (Telo refuses the "
                f"kind as UNDEFINED_KIND); add `{alias}: {_TELO_REGISTRY}{module}@VERSION` to the "
                "Telo.Application's imports",
            )
        if alias in self.aliases:
            prefix = self.aliases[alias]
            if prefix is None:
                return self._unsupported_module(written, alias)
            canonical = f"{prefix}.{name}"
            if canonical in self.known:
                return KindResolution(canonical)
            if prefix == "Mcp" and name in _MCP_SERVER_KINDS and f"McpServer.{name}" in self.known:
                return KindResolution(f"McpServer.{name}")
            if prefix in ("Mcp", "McpServer") and name in _MCP_SERVER_KINDS:
                return KindResolution(
                    None,
                    "ERR_MANIFEST_UNSUPPORTED",
                    f"kind {written} of Telo's module mcp-server is a Telo kind toolbridge does not "
                    "implement (it serves McpServer.StdioServer and McpServer.HttpEndpoint with "
                    "McpServer.Tools)",
                )
            if prefix in _PARTLY_PROVIDED:
                return KindResolution(
                    None,
                    "ERR_MANIFEST_UNSUPPORTED",
                    f"kind {written[:80]} of Telo's module {_PARTLY_PROVIDED[prefix]} is a Telo kind "
                    "toolbridge does not implement",
                )
            if canonical in _NOT_IMPLEMENTED:
                return KindResolution(
                    None,
                    "ERR_MANIFEST_UNSUPPORTED",
                    f"kind {written} ({_NOT_IMPLEMENTED[canonical]}) is a Telo kind "
                    "toolbridge does not implement",
                )
            return self._unknown(written)
        close = difflib.get_close_matches(written, self.known, n=1, cutoff=0.85)
        if close:
            return self._unknown(written)
        return self._unsupported_module(written, alias)

    def module_label(self, alias: str) -> str:
        """`Telo's module NAME` (with where a path import came from) or `the library SOURCE`."""
        source = self.sources.get(alias)
        module = self.modules.get(alias) if source else None
        if module:
            text = source.strip() if source else ""
            named_by_path = bool(text) and text.rstrip("/").rsplit("/", 1)[-1] in ("", ".", "..")
            return f"Telo's module {module}" + (f" (imported from {text[:80]})" if named_by_path else "")
        if source:
            return f"the library {source[:80]} (imported as {alias})"
        return f"Telo's module {_TELO_PREFIXES.get(alias, alias)}"

    def provides(self, alias: str) -> bool:
        """Whether `alias` names a module toolbridge provides."""
        return self.aliases.get(alias) is not None

    def _unsupported_module(self, written: str, alias: str) -> KindResolution:
        return KindResolution(
            None,
            "ERR_MANIFEST_UNSUPPORTED",
            f"kind {written[:80]} belongs to {self.module_label(alias)}, which toolbridge does not "
            "provide (it runs Telo's ai, ai-openai, ai-mcp and mcp-client modules)",
        )

    def _unknown(self, written: str) -> KindResolution:
        close = difflib.get_close_matches(written, self.known, n=1)
        hint = f"; did you mean {close[0]}?" if close else f" (known: {', '.join(self.known)})"
        return KindResolution(None, "ERR_MANIFEST_UNKNOWN_KIND", f"unknown kind {written!r}{hint}")
