"""The analyzer's tool passes: JSON Schemas of declared tools, lock files, tool sets, includes.

`ToolPasses` is mixed into the analyzer of one file (`_analyzer._FileAnalysis`): it checks the
`input` / `output` schemas of `AiMcp.Tool`s (and, through `check_tool_entries`, the parameters of
`Ai.Tools` entries), the lock file of each `AiMcp.ToolProvider`, loads the statically known tool
sets (`Tasks.ToolSet`, `Ai.Tools`) to learn their tool names, and checks each agent's `include`
and `exclude` against them.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._naming import model_legal
from .._schema_loops import schema_hazard
from ._kinds import AgentDoc, McpToolDoc, RuntimeDoc, TaskToolSetDoc, ToolProviderDoc, ToolsDoc
from ._kinds_gateway import GatewayDoc
from ._yaml import Pos

if TYPE_CHECKING:
    from ._analyzer import AnalyzedManifest, ManifestDoc

__all__ = ["ToolPasses"]


def _dotted(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(document)"


class ToolPasses:
    """Tool passes of the analyzer (see the module docstring); needs `add` and `result`."""

    result: AnalyzedManifest

    def add(self, pos: Pos, code: str, message: str, severity: Any = "error") -> None:
        raise NotImplementedError  # pragma: no cover - provided by the analyzer

    def check_tool_entries(self, jsonschema: Any) -> None:
        raise NotImplementedError  # pragma: no cover - provided by TeloPasses

    def _check_json_schemas(self) -> None:
        import jsonschema  # type: ignore[import-untyped]

        self.check_tool_entries(jsonschema)
        for mdoc in self.result.of_kind("AiMcp.Tool"):
            assert isinstance(mdoc.model, McpToolDoc)
            for field_name in ("input", "output"):
                schema = getattr(mdoc.model, field_name)
                hazard = schema_hazard(schema)
                if hazard is not None:
                    self.add(
                        mdoc.source.value_pos((field_name,)),
                        "ERR_MANIFEST_INVALID_VALUE",
                        f"AiMcp.Tool {mdoc.name}: `{field_name}` is not a usable JSON Schema: it {hazard}",
                    )
                    continue
                validator = jsonschema.validators.validator_for(
                    schema, default=jsonschema.Draft202012Validator
                )
                try:
                    validator.check_schema(schema)
                except jsonschema.SchemaError as exc:
                    where = (field_name, *exc.path)
                    self.add(
                        mdoc.source.value_pos(tuple(where)),
                        "ERR_MANIFEST_INVALID_VALUE",
                        f"AiMcp.Tool {mdoc.name}: `{_dotted(where)}` is not a valid JSON Schema: "
                        f"{exc.message}",
                    )
                    continue
                if schema.get("type", "object") != "object":
                    self.add(
                        mdoc.source.value_pos((field_name,)),
                        "ERR_MANIFEST_INVALID_VALUE",
                        f"AiMcp.Tool {mdoc.name}: `{field_name}` must describe an object (`type: object`)",
                    )

    def _check_locks(self) -> None:
        from ..errors import ConfigError

        for mdoc in self.result.of_kind("AiMcp.ToolProvider"):
            assert isinstance(mdoc.model, ToolProviderDoc)
            if mdoc.model.lock is None:
                continue
            try:
                from ..pinning import read_lock

                lock = read_lock(self.result.base_dir / mdoc.model.lock)
                lock.server(mdoc.model.client.name)
            except ImportError:  # a build without pinning: nothing to check against
                continue
            except ConfigError as exc:
                self.add(
                    mdoc.source.value_pos(("lock",)),
                    "ERR_MANIFEST_LOCK",
                    f"AiMcp.ToolProvider {mdoc.name}: {exc.message}",
                )

    def _check_tool_sets(self) -> None:
        for mdoc in self.result.of_kind("Tasks.ToolSet", "Ai.Tools"):
            if isinstance(mdoc.model, TaskToolSetDoc):
                names = self._task_tool_names(mdoc, mdoc.model)
            else:
                assert isinstance(mdoc.model, ToolsDoc)
                names = self._function_tool_names(mdoc, mdoc.model)
                if names is not None:
                    names += [entry.name or entry.tool.name for entry in mdoc.model.tools or []]
            if names is not None:
                self.result.tool_names[mdoc.name] = names

    def _task_tool_names(self, mdoc: ManifestDoc, model: TaskToolSetDoc) -> list[str] | None:
        from ._tasks import TaskLoadError, load_task_tool_names

        try:
            return load_task_tool_names(model, self.result.base_dir)
        except TaskLoadError as exc:
            for path, message in exc.problems:
                if model.file is None and path[:1] == ("tools",):
                    pos = mdoc.source.value_pos(path)
                else:
                    pos = mdoc.source.value_pos(("file",) if model.file is not None else ("tools",))
                prefix = (
                    f"{model.file}: " if model.file is not None and not message.startswith(model.file) else ""
                )
                self.add(pos, "ERR_MANIFEST_TOOLSET_LOAD", f"Tasks.ToolSet {mdoc.name}: {prefix}{message}")
            return None

    def _function_tool_names(self, mdoc: ManifestDoc, model: ToolsDoc) -> list[str] | None:
        names: list[str] = []
        ok = True
        for i, spec in enumerate(model.functions or []):
            module_name, _, attr = spec.partition(":")
            try:
                module = importlib.import_module(module_name)
                fn = getattr(module, attr)
            except Exception as exc:  # import of user code: any failure is a finding
                ok = False
                self.add(
                    mdoc.source.value_pos(("functions", i)),
                    "ERR_MANIFEST_IMPORT",
                    f"Ai.Tools {mdoc.name}: cannot import {spec}: {type(exc).__name__}",
                )
                continue
            if not callable(fn):
                ok = False
                self.add(
                    mdoc.source.value_pos(("functions", i)),
                    "ERR_MANIFEST_IMPORT",
                    f"Ai.Tools {mdoc.name}: {spec} is not a function",
                )
                continue
            names.append(getattr(fn, "__name__", attr))
        return names if ok else None

    def _check_includes(self) -> None:
        for mdoc in self.result.of_kind("Ai.Agent", "Ai.AgentStream"):
            assert isinstance(mdoc.model, AgentDoc)
            for b, binding in enumerate(mdoc.model.tool_providers):
                names = self.result.tool_names.get(binding.provider.name)
                if names is None:
                    continue
                for field_name, severity in (("include", "error"), ("exclude", "warning")):
                    listed = getattr(binding, field_name) or []
                    for i, tool in enumerate(listed):
                        if tool in names:
                            continue
                        close = difflib.get_close_matches(tool, names, n=1)
                        hint = f"; did you mean {close[0]}?" if close else f" (it has: {', '.join(names)})"
                        self.add(
                            mdoc.source.value_pos(("toolProviders", b, field_name, i)),
                            "ERR_MANIFEST_UNKNOWN_TOOL",
                            f"{mdoc.kind} {mdoc.name}: {field_name} names {tool!r}, which "
                            f"{binding.provider.name} does not have{hint}",
                            severity,
                        )

    def _check_grant_patterns(self, known: dict[str, list[str]]) -> None:
        """Say what each prefix grant (`tool:<prefix>*`) of a Runtime or a Gateway client grants:
        the tools of the gateway's lock it matches (`known`, by Gateway document name), or that
        it matches whatever tool is named so (a warning: a pattern grants tools added later)."""
        from ..runtime import tool_prefix

        places: list[tuple[ManifestDoc, tuple[str | int, ...], list[str], list[str] | None]] = []
        for mdoc in self.result.of_kind("Runtime"):
            allow = mdoc.model.permissions.allow if isinstance(mdoc.model, RuntimeDoc) else []
            places.append((mdoc, ("permissions", "allow"), list(allow), None))
        for mdoc in self.result.of_kind("Gateway"):
            assert isinstance(mdoc.model, GatewayDoc)
            for c, client in enumerate(mdoc.model.clients):
                if client.permissions is not None:
                    where: tuple[str | int, ...] = ("clients", c, "permissions", "allow")
                    places.append((mdoc, where, list(client.permissions.allow), known.get(mdoc.name)))
        for mdoc, path, allow, names in places:
            for i, grant in enumerate(allow):
                prefix = tool_prefix(grant)
                if prefix is None:
                    continue
                if names is None:
                    what = f"every tool whose id starts with {prefix!r}, now and added later"
                else:
                    matched = [n for n in names if n.startswith(prefix)]
                    shown = ", ".join(matched[:10]) + (
                        f", ... ({len(matched)} in all)" if len(matched) > 10 else ""
                    )
                    what = f"{len(matched)} tool(s) of the lock ({shown or 'none'}), and any added later"
                self.add(
                    mdoc.source.value_pos((*path, i)),
                    "ERR_MANIFEST_GRANT_PATTERN",
                    f"{mdoc.name}: {grant} grants {what}",
                    "warning",
                )

    def _check_gateways(self) -> None:
        """A `Gateway`'s lock file pins every server it serves; its includes name known tools;
        what each prefix grant grants."""
        known: dict[str, list[str]] = {}
        self._gateway_checks(known)
        self._check_grant_patterns(known)

    def _gateway_checks(self, known: dict[str, list[str]]) -> None:
        from ..errors import ConfigError

        for mdoc in self.result.of_kind("Gateway"):
            assert isinstance(mdoc.model, GatewayDoc)
            gateway = mdoc.model
            for b, binding in enumerate(gateway.tool_providers):
                names = self.result.tool_names.get(binding.provider.name)
                for i, tool in enumerate(binding.include or []):
                    if names is not None and tool not in names:
                        close = difflib.get_close_matches(tool, names, n=1)
                        hint = f"; did you mean {close[0]}?" if close else f" (it has: {', '.join(names)})"
                        self.add(
                            mdoc.source.value_pos(("toolProviders", b, "include", i)),
                            "ERR_MANIFEST_UNKNOWN_TOOL",
                            f"Gateway {mdoc.name}: include names {tool!r}, which "
                            f"{binding.provider.name} does not have{hint}",
                        )
            if gateway.lock is None:
                continue
            lock_path = self.result.base_dir / gateway.lock
            if not lock_path.exists():
                self.add(
                    mdoc.source.value_pos(("lock",)),
                    "ERR_MANIFEST_LOCK",
                    f"Gateway {mdoc.name}: the lock {gateway.lock} does not exist yet: every tool is "
                    "withheld until it does (write it with `toolbridge lock --out FILE MANIFEST`)",
                    "warning",
                )
                continue
            try:
                from ..pinning import read_lock

                lock = read_lock(lock_path)
            except ImportError:  # a build without pinning: nothing to check against
                continue
            except ConfigError as exc:
                self.add(
                    mdoc.source.value_pos(("lock",)),
                    "ERR_MANIFEST_LOCK",
                    f"Gateway {mdoc.name}: {exc.message}",
                )
                continue
            for b, binding in enumerate(gateway.tool_providers):
                target = self.result.docs.get(binding.provider.name)
                if target is None or not isinstance(target.model, ToolProviderDoc):
                    continue
                server = target.model.client.name
                if server in lock.servers:
                    pinned = lock.server(server).tools
                    known.setdefault(mdoc.name, []).extend(model_legal(binding.prefix + t) for t in pinned)
                if server not in lock.servers:
                    self.add(
                        mdoc.source.value_pos(("toolProviders", b, "provider")),
                        "ERR_MANIFEST_LOCK",
                        f"Gateway {mdoc.name}: the lock {gateway.lock} does not pin server {server!r}: its "
                        f"tools are withheld until it does (`toolbridge lock --out {gateway.lock} MANIFEST`)",
                        "warning",
                    )
