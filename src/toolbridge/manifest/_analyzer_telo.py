"""The analyzer's Telo passes: kinds through aliases, declared values, `!cel`, targets, tool entries.

`TeloPasses` is mixed into the analyzer of one file (`_analyzer._FileAnalysis`):

- `resolve_kind` maps a written kind through the application's `imports` (`McpClient.HttpClient`
  is `Mcp.HttpClient`); a kind of a module toolbridge does not provide is one
  `ERR_MANIFEST_UNSUPPORTED` at its `kind`, the document is skipped whole (its tags, fields and
  references are not toolbridge's business), and a `!ref` to it never dangles;
- `declared_values` reads a `Telo.Application`'s `secrets` (a source for every secret) and
  `variables`;
- `cel_value` checks a `!cel` expression where it stands: in an `Ai.Tools` entry's `inputs`
  (seeing `arguments`) or `result` (seeing `arguments` and `result`) it is kept for run time;
  anywhere else it is evaluated now, from `secrets` and `variables` (a value read from a secret
  becomes a `Secret`, so the placement rules apply to it);
- `check_targets` and `check_tool_entries` check names and schemas across documents.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._schema_loops import schema_hazard
from ..redact import MIN_SECRET_CHARS, register_secret
from ._cel import CelError, members_of, variables_of
from ._cel import evaluate as cel_evaluate
from ._kinds import ToolsDoc
from ._kinds_run import ApplicationDoc, ValueDecl, target_name
from ._secrets import Secret, SecretSources
from ._telo import TELO_NAMESPACES, telo_namespace_message
from ._yaml import Cel, Document, Path, Pos, YamlProblem

if TYPE_CHECKING:
    from ._analyzer import AnalyzedManifest

__all__ = ["TeloPasses", "runtime_cel_scope"]

_LOAD_SCOPE = frozenset({"secrets", "variables"})


_TARGET_SCOPE = frozenset({"steps", "variables"})


def is_target_expression(kind: str, path: Path) -> bool:
    """Whether `path` of a `kind` document is a target's `inputs` or `when`."""
    return (
        kind == "Telo.Application"
        and len(path) >= 3
        and path[0] == "targets"
        and isinstance(path[1], int)
        and path[2] in ("inputs", "when")
    )


def runtime_cel_scope(kind: str, path: Path, names: frozenset[str] = frozenset()) -> frozenset[str] | None:
    """The variables a `!cel` at `path` of a `kind` document sees at run time; `None`: load time.

    A target's `inputs` and `when` are evaluated when the manifest loads, unless the expression
    (whose top-level variables are `names`) reads `steps`: then when the target's turn comes.
    """
    if "steps" in names and is_target_expression(kind, path):
        return _TARGET_SCOPE
    if kind == "Ai.Tools" and len(path) >= 3 and path[0] == "tools" and isinstance(path[1], int):
        if path[2] == "inputs":
            return frozenset({"arguments"})
        if path[2] == "result":
            return frozenset({"arguments", "result"})
    if kind in _SERVED_KINDS and len(path) >= 3 and path[0] == "entries" and isinstance(path[1], int):
        return _SERVED_SCOPES.get(str(path[2]))
    return None


_SERVED_KINDS = frozenset({"McpServer.Tools", "McpServer.Resources", "McpServer.Prompts"})

# What a `!cel` of an `McpServer.Tools` (`.Resources`, `.Prompts`) entry sees, by its field.
_SERVED_SCOPES = {
    "inputs": frozenset({"request"}),
    "result": frozenset({"request", "result"}),
    "catches": frozenset({"request", "error"}),
}


def _coerce(value: Any, decl: ValueDecl) -> Any:
    """A declared value of its `type`, checked against its JSON Schema keywords.

    Raises:
        ValueError: the value is not of that type, or breaks a keyword (the message says which).
    """
    value = _of_type(value, decl)
    if decl.keywords:
        import jsonschema  # type: ignore[import-untyped]

        schema = decl.value_schema()
        try:
            jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(
                schema
            ).validate(value)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"its declaration is not a valid JSON Schema: {exc.message[:200]}") from None
        except jsonschema.ValidationError as exc:
            raise ValueError(f"it does not match its declaration: {exc.message[:200]}") from None
    return value


def _of_type(value: Any, decl: ValueDecl) -> Any:
    if decl.type in ("object", "array"):
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError(f"it is not JSON (an {decl.type} is read as JSON)") from None
        wanted = dict if decl.type == "object" else list
        if not isinstance(value, wanted):
            raise ValueError(f"it is not an {decl.type}")
        return value
    if decl.type == "string":
        return value if isinstance(value, str) else json.dumps(value)
    if decl.type == "boolean":
        if isinstance(value, bool):
            return value
        if str(value).strip().lower() in ("true", "1", "yes"):
            return True
        if str(value).strip().lower() in ("false", "0", "no"):
            return False
        raise ValueError("it is not true or false")
    article = "an" if decl.type == "integer" else "a"
    if isinstance(value, bool | dict | list):
        raise ValueError(f"it is not {article} {decl.type}")
    text = str(value).strip()
    try:
        # Never the value itself in the message: it may be a secret's.
        return int(text) if decl.type == "integer" else float(text)
    except ValueError:
        raise ValueError(f"it is not {article} {decl.type}") from None


class TeloPasses:
    """Telo passes of the analyzer (see the module docstring); needs `add` and `result`."""

    result: AnalyzedManifest
    sources: SecretSources
    secret_decls: dict[str, ValueDecl]
    variable_values: dict[str, Any]
    variable_decls: dict[str, ValueDecl]
    variable_problems: dict[str, str]

    def add(self, pos: Pos, code: str, message: str, severity: Any = "error") -> None:
        raise NotImplementedError  # pragma: no cover - provided by the analyzer

    # ------------------------------------------------------------------ declared values

    def declared_values(
        self, app: ApplicationDoc, env: Mapping[str, str]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The application's secret name -> env var mapping and defaults; reads its variables."""
        mapping: dict[str, str] = {}
        defaults: dict[str, str] = {}
        self.secret_decls = dict(app.secrets)
        for name, decl in app.secrets.items():
            if decl.env:
                mapping[name] = decl.env
            if decl.default is not None:
                defaults[name] = decl.default if isinstance(decl.default, str) else json.dumps(decl.default)
        self.variable_decls = dict(app.variables)
        for name, decl in app.variables.items():
            raw: Any = env.get(decl.env) if decl.env else None
            if raw is None:
                raw = decl.default
            if raw is None:
                continue
            try:
                self.variable_values[name] = _coerce(raw, decl)
            except ValueError as exc:
                source = f"${decl.env}" if decl.env and env.get(decl.env) is not None else "its default"
                self.variable_problems[name] = (
                    f"{source}: {exc.args[0] if exc.args else 'not a ' + decl.type}"
                )
                continue  # reported where it is used
        return mapping, defaults

    # ------------------------------------------------------------------ !cel

    def cel_value(self, doc: Document, kind: str, path: Path, cel: Cel) -> Any:
        """What a `!cel` at `path` stands for after the analysis (see the module docstring)."""
        try:
            names = variables_of(cel.expr)
        except CelError as exc:
            self.add(cel.pos, "ERR_MANIFEST_EXPRESSION", exc.message)
            doc.problems.append(YamlProblem("ERR_MANIFEST_EXPRESSION", "reported", cel.pos))
            return None
        scope = runtime_cel_scope(kind, path, frozenset(names))
        allowed = scope if scope is not None else _LOAD_SCOPE
        unknown = sorted(names - allowed)
        if unknown:
            seen = " and ".join(f"`{v}`" for v in sorted(allowed))
            if scope is _TARGET_SCOPE:
                where = "an expression that reads `steps` is evaluated when its target runs, " + (
                    f"where it sees {seen}"
                )
            elif scope is not None:
                where = f"when the tool runs, expressions here see {seen}"
            else:
                where = (
                    "this field is evaluated when the manifest loads, where expressions see "
                    "`secrets` and `variables`"
                )
                if is_target_expression(kind, path):
                    where += " (and, when it reads `steps`, an earlier target's result)"
            telo = [n for n in unknown if n in TELO_NAMESPACES]
            if telo:
                self.add(
                    cel.pos, "ERR_MANIFEST_UNSUPPORTED", telo_namespace_message(telo[0], cel.expr, where)
                )
            else:
                self.add(cel.pos, "ERR_MANIFEST_EXPRESSION", f"`{unknown[0]}` is not available here: {where}")
            doc.problems.append(YamlProblem("ERR_MANIFEST_EXPRESSION", "reported", cel.pos))
            return None
        if scope is _TARGET_SCOPE and not self._variables_known(cel):
            doc.problems.append(YamlProblem("ERR_MANIFEST_EXPRESSION", "reported", cel.pos))
            return None
        if scope is not None:
            return cel
        value = self._load_time(cel, names)
        if value is None or (isinstance(value, Secret) and not value.resolved):
            # Reported here: the schema check must not report the same node again.
            doc.problems.append(YamlProblem("ERR_MANIFEST_EXPRESSION", "reported", cel.pos))
        return value

    def _load_time(self, cel: Cel, names: set[str]) -> Any:
        scope: dict[str, Any] = {}
        secret_names: list[str] = []
        redact: list[str] = []
        ok = True
        if "secrets" in names:
            wanted = sorted(members_of(cel.expr, "secrets"))
            if not wanted:
                self.add(cel.pos, "ERR_MANIFEST_EXPRESSION", "read secrets by name: `secrets.NAME`")
                return None
            values: dict[str, Any] = {}
            for name in wanted:
                secret_names.append(name)
                raw = self.sources.lookup(name)
                if raw is None:
                    ok = False
                    self.add(
                        cel.pos,
                        "ERR_MANIFEST_SECRET_UNRESOLVED",
                        f"secret {name} cannot be resolved (looked in {self.sources.where_to_look(name)})",
                    )
                    continue
                if raw.endswith(("\r", "\n")):
                    ok = False
                    self.add(
                        cel.pos,
                        "ERR_MANIFEST_SECRET_VALUE",
                        f"secret {name} ends with a line break (CR/LF); remove the trailing line break",
                    )
                    continue
                if not register_secret(raw, name=name) and raw:
                    self.add(
                        cel.pos,
                        "ERR_MANIFEST_SECRET_SHORT",
                        f"secret {name} is shorter than {MIN_SECRET_CHARS} characters; "
                        "it cannot be redacted from output",
                        "warning",
                    )
                redact.append(raw)
                decl = self.secret_decls.get(name)
                if decl is None:
                    values[name] = raw
                    continue
                try:
                    values[name] = _coerce(raw, decl)
                except ValueError as exc:
                    ok = False
                    # The reason names the type or keyword, never the value.
                    reason = exc.args[0] if exc.args else f"it is not a {decl.type}"
                    if "does not match" in reason:
                        reason = "it does not match its declaration"
                    self.add(
                        cel.pos,
                        "ERR_MANIFEST_INVALID_VALUE",
                        f"secret {name} is not a valid {decl.type}: {reason}",
                    )
            scope["secrets"] = values
        if "variables" in names:
            ok = self._variables_known(cel) and ok
            scope["variables"] = self.variable_values
        if not ok:
            return Secret(f"!cel {cel.expr}", tuple(secret_names), None) if secret_names else None
        try:
            value = cel_evaluate(cel.expr, scope, redact=tuple(redact))
        except CelError as exc:
            self.add(cel.pos, "ERR_MANIFEST_EXPRESSION", exc.message)
            return None
        if secret_names:
            text = value if isinstance(value, str) else json.dumps(value)
            return Secret(f"!cel {cel.expr}", tuple(secret_names), text)
        return value

    def _variables_known(self, cel: Cel) -> bool:
        """Whether every `variables.NAME` the expression reads has a value (each one missing is
        reported)."""
        ok = True
        for name in sorted(members_of(cel.expr, "variables")):
            if name not in self.variable_values:
                ok = False
                decl = self.variable_decls.get(name)
                if name in self.variable_problems:
                    why = f"{self.variable_problems[name]}; it is declared {decl.type if decl else ''}"
                elif decl is None:
                    why = "no `variables` entry of the Telo.Application declares it"
                else:
                    why = f"set ${decl.env}" if decl.env else "give it a default"
                self.add(cel.pos, "ERR_MANIFEST_EXPRESSION", f"variable {name} has no value ({why})")
        return ok

    # ------------------------------------------------------------------ cross-document checks

    def check_targets(self, app: Any) -> None:
        """Target names are unique; `steps.NAME` in a target's expressions names an earlier target.

        A target is named by its entry name or its document's name.
        """
        if app is None:
            return
        model = app.model
        assert isinstance(model, ApplicationDoc)
        seen: list[str] = []
        for i, item in enumerate(model.targets):
            name = target_name(item)
            for cel in _cels_in((getattr(item, "inputs", None), getattr(item, "when", None))):
                for step in sorted(members_of(cel.expr, "steps")):
                    if step not in seen:
                        earlier = ", ".join(seen) if seen else "none"
                        self.add(
                            cel.pos,
                            "ERR_MANIFEST_EXPRESSION",
                            f"Telo.Application {model.name}: `steps.{step}` names no earlier target of "
                            f"targets[{i}] (targets run in order; earlier: {earlier})",
                        )
            if name in seen:
                self.add(
                    app.source.value_pos(("targets", i)),
                    "ERR_MANIFEST_INVALID_VALUE",
                    f"Telo.Application {model.name}: target {name!r} is listed twice"
                    + ("" if getattr(item, "name", None) else " (give one a `name:`)"),
                )
            seen.append(name)

    def check_tool_entries(self, jsonschema: Any) -> None:
        """`Ai.Tools` entries: valid object schemas, unique names, `arguments.X` that exist."""
        for mdoc in self.result.of_kind("Ai.Tools"):
            model = mdoc.model
            assert isinstance(model, ToolsDoc)
            names: list[str] = []
            for i, entry in enumerate(model.tools or []):
                name = entry.name or entry.tool.name
                if name in names:
                    self.add(
                        mdoc.source.value_pos(("tools", i)),
                        "ERR_MANIFEST_INVALID_VALUE",
                        f"Ai.Tools {mdoc.name}: two tools are named {name!r}",
                    )
                names.append(name)
                schema = entry.parameters
                hazard = schema_hazard(schema)
                if hazard is not None:
                    self.add(
                        mdoc.source.value_pos(("tools", i, "parameters")),
                        "ERR_MANIFEST_INVALID_VALUE",
                        f"Ai.Tools {mdoc.name}: `tools[{i}].parameters` is not a usable JSON Schema: "
                        f"it {hazard}",
                    )
                    continue
                try:
                    jsonschema.validators.validator_for(
                        schema, default=jsonschema.Draft202012Validator
                    ).check_schema(schema)
                except jsonschema.SchemaError as exc:
                    self.add(
                        mdoc.source.value_pos(("tools", i, "parameters", *exc.path)),
                        "ERR_MANIFEST_INVALID_VALUE",
                        f"Ai.Tools {mdoc.name}: `tools[{i}].parameters` is not a valid JSON Schema: "
                        f"{exc.message}",
                    )
                    continue
                if schema.get("type", "object") != "object":
                    self.add(
                        mdoc.source.value_pos(("tools", i, "parameters")),
                        "ERR_MANIFEST_INVALID_VALUE",
                        f"Ai.Tools {mdoc.name}: `tools[{i}].parameters` must describe an object "
                        "(`type: object`)",
                    )
                    continue
                self._check_argument_names(mdoc.name, i, entry, schema)

    def _check_argument_names(self, doc_name: str, i: int, entry: Any, schema: Mapping[str, Any]) -> None:
        props = schema.get("properties")
        if schema.get("additionalProperties", True) is not False or not isinstance(props, Mapping):
            return  # an open object: any argument may exist
        for cel in _cels_in((entry.inputs, entry.result)):
            for member in sorted(members_of(cel.expr, "arguments")):
                if member not in props:
                    self.add(
                        cel.pos,
                        "ERR_MANIFEST_EXPRESSION",
                        f"Ai.Tools {doc_name}: `arguments.{member}` is not a parameter of tools[{i}] "
                        f"(it has: {', '.join(props) or 'none'})",
                    )


def _cels_in(value: Any) -> list[Cel]:
    if isinstance(value, Cel):
        return [value]
    if isinstance(value, Mapping):
        return [c for v in value.values() for c in _cels_in(v)]
    if isinstance(value, list | tuple):
        return [c for v in value for c in _cels_in(v)]
    return []
