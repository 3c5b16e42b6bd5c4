"""The static analyzer behind `toolbridge check` (and the first step of `toolbridge run`).

One file is one manifest: its documents reference each other by `!ref Name` and nothing outside
it. The analysis of a file runs in passes and never stops at the first problem:

1. read and parse the YAML, keeping every node's position (`_yaml`);
2. per document: the `kind` (missing, wrong type, unknown), then `${{ ... }}` expressions
   (secrets resolved now, from the sources `_secrets` lists), then the kind's closed schema
   (`_kinds`): unknown, missing and wrongly typed fields, bad values, refs and secrets in the
   wrong places;
3. across documents: duplicate names, dangling references, references to the wrong kind,
   reference cycles, more than one `Runtime`;
4. tool sets whose tools are known statically (`Tasks.ToolSet`, `Ai.Tools`) are loaded, and
   each agent's `include` / `exclude` is checked against them.

Every finding is a `Diagnostic` with a 1-based line and column that point at the offending key
(unknown field, duplicate key) or value (everything else; the enclosing mapping for a missing
field), a stable code, and a one-line message. Messages name secrets but never show their values.

Codes (also in `docs/manifests.md`): ERR_MANIFEST_FILE, ERR_MANIFEST_YAML,
ERR_MANIFEST_DUPLICATE_KEY, ERR_MANIFEST_UNKNOWN_KIND, ERR_MANIFEST_MISSING_FIELD,
ERR_MANIFEST_UNKNOWN_FIELD, ERR_MANIFEST_WRONG_TYPE, ERR_MANIFEST_INVALID_VALUE,
ERR_MANIFEST_REF_FORM, ERR_MANIFEST_DANGLING_REF, ERR_MANIFEST_REF_KIND, ERR_MANIFEST_DUPLICATE_NAME,
ERR_MANIFEST_REF_CYCLE, ERR_MANIFEST_SECRET_UNRESOLVED, ERR_MANIFEST_SECRET_PLACEMENT,
ERR_MANIFEST_EXPRESSION, ERR_MANIFEST_TOOLSET_LOAD, ERR_MANIFEST_IMPORT, ERR_MANIFEST_UNKNOWN_TOOL,
ERR_MANIFEST_MULTIPLE_RUNTIMES, ERR_MANIFEST_LOCK, ERR_MANIFEST_UNSUPPORTED, ERR_MANIFEST_LIMIT,
ERR_MANIFEST_NO_AGENT.

Telo applications (`Telo.Application`, module aliases, `!cel`, targets) are handled by the
passes of `_analyzer_telo`.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from .._bounded import InputLimitError, read_text_file
from ._analyzer_telo import TeloPasses
from ._analyzer_tools import ToolPasses, _dotted
from ._kinds import (
    NAME_PATTERN,
    KindDoc,
    SecretsDoc,
)
from ._kinds_run import ALL_KINDS, ApplicationDoc
from ._schema_errors import TYPE_WORDS, aliases_of, model_at, plain_errors, type_name
from ._secrets import Secret, SecretSources, expand, read_secrets_file
from ._telo import KindResolver
from ._yaml import Cel, Document, Path, Pos, Ref, YamlSyntaxError, parse_documents

__all__ = [
    "MAX_MANIFEST_BYTES",
    "AnalyzedManifest",
    "CheckReport",
    "Diagnostic",
    "ManifestDoc",
    "analyze_file",
    "check_manifest",
]

MAX_MANIFEST_BYTES = 1024 * 1024
"""The largest manifest file read (1 MiB); `max_bytes=` of `check_manifest` / `load_manifest` changes it."""

Severity = Literal["error", "warning"]


# Kind resolutions reported once for the whole document (its fields are not checked).
_WHOLE_DOCUMENT = frozenset({"ERR_MANIFEST_UNSUPPORTED", "ERR_MANIFEST_UNDEFINED_KIND"})


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding of the analyzer.

    Attributes:
        file: the manifest file as given.
        line: 1-based line of the offending node.
        column: 1-based column of the offending node.
        severity: `"error"` (fails the check) or `"warning"`.
        code: stable code, e.g. `ERR_MANIFEST_UNKNOWN_FIELD`.
        message: one line for people.
    """

    file: str
    line: int
    column: int
    severity: Severity
    code: str
    message: str

    def format(self) -> str:
        """`file:line:column: severity CODE: message`."""
        return f"{self.file}:{self.line}:{self.column}: {self.severity} {self.code}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form used by `toolbridge check --json`."""
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
        }


@dataclass
class CheckReport:
    """The result of checking one or more manifest files."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def error_count(self) -> int:
        """How many diagnostics are errors."""
        return sum(1 for d in self.diagnostics if d.severity == "error")

    @property
    def warning_count(self) -> int:
        """How many diagnostics are warnings."""
        return sum(1 for d in self.diagnostics if d.severity == "warning")

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings do not count)."""
        return self.error_count == 0

    @property
    def errors(self) -> list[Diagnostic]:
        """The error diagnostics only."""
        return [d for d in self.diagnostics if d.severity == "error"]

    def to_dict(self) -> dict[str, Any]:
        """`{ok, errorCount, warningCount, diagnostics: [...]}`, as `check --json` prints it."""
        return {
            "ok": self.ok,
            "errorCount": self.error_count,
            "warningCount": self.warning_count,
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        }


@dataclass
class ManifestDoc:
    """A document that passed its schema: the model plus where it came from."""

    model: KindDoc
    source: Document
    index: int

    @property
    def kind(self) -> str:
        """The document's kind."""
        return self.model.kind

    @property
    def name(self) -> str:
        """The document's `metadata.name`."""
        return self.model.metadata.name


@dataclass
class AnalyzedManifest:
    """Everything the analyzer learned about one file.

    Attributes:
        path: the file.
        docs: the valid documents by name, in file order.
        diagnostics: every finding.
        tool_names: for each statically known tool set (by document name), its tool names.
        unsupported: documents of kinds toolbridge does not run, name -> kind as written.
    """

    path: FsPath
    docs: dict[str, ManifestDoc] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    tool_names: dict[str, list[str]] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)
    """The `Telo.Application`'s variables that have a value, for expressions run later."""

    @property
    def application(self) -> ManifestDoc | None:
        """The `Telo.Application` document, if the manifest has one."""
        apps = self.of_kind("Telo.Application")
        return apps[0] if apps else None

    @property
    def ok(self) -> bool:
        """True when there is no error."""
        return not any(d.severity == "error" for d in self.diagnostics)

    @property
    def base_dir(self) -> FsPath:
        """The manifest's directory (absolute): relative paths in the manifest start here."""
        return self.path.resolve().parent

    def of_kind(self, *kinds: str) -> list[ManifestDoc]:
        """The valid documents of the given kinds, in file order."""
        return [d for d in self.docs.values() if d.kind in kinds]


# --------------------------------------------------------------------------- helpers


_NAME = re.compile(NAME_PATTERN)


def _is_bare_target(path: Path, value: Any) -> bool:
    """A plain name as a `targets` entry, or as a gated target's `ref`."""
    if not isinstance(value, str) or not _NAME.fullmatch(value) or len(path) < 2:
        return False
    if path[0] != "targets" or not isinstance(path[1], int):
        return False
    return len(path) == 2 or (len(path) == 3 and path[2] == "ref")


_WHOLE_EXPRESSION = re.compile(r"^\s*\$\{\{\s*((?:(?!\}\}).)+?)\s*\}\}\s*$", re.S)
_TOOLBRIDGE_EXPRESSION = re.compile(r"^(?:manifestDir|secrets\.[A-Za-z_][A-Za-z0-9_-]*)$")


class _FileAnalysis(TeloPasses, ToolPasses):
    def __init__(
        self,
        path: FsPath,
        display: str,
        given: Mapping[str, str],
        env: Mapping[str, str],
        max_bytes: int = MAX_MANIFEST_BYTES,
    ) -> None:
        self.result = AnalyzedManifest(path=path)
        self.max_bytes = max_bytes
        self.display = display
        self.given = given
        self.env = env
        self.resolver = KindResolver(ALL_KINDS)
        self.sources = SecretSources(given=given, env=env)
        self.secret_decls = {}
        self.variable_decls = {}
        self.variable_values = self.result.variables
        self.variable_problems = {}

    def add(self, pos: Pos, code: str, message: str, severity: Severity = "error") -> None:
        self.result.diagnostics.append(
            Diagnostic(self.display, pos.line, pos.column, severity, code, " ".join(message.split()))
        )

    # ------------------------------------------------------------------ passes

    def run(self) -> AnalyzedManifest:
        try:
            text = read_text_file(self.result.path, max_bytes=self.max_bytes)
        except InputLimitError as exc:
            code = "ERR_MANIFEST_LIMIT" if exc.reason == "too_large" else "ERR_MANIFEST_FILE"
            self.add(Pos(exc.line or 1, exc.column or 1), code, f"the manifest {exc.message}")
            return self.result
        try:
            documents = parse_documents(text)
        except YamlSyntaxError as exc:
            self.add(exc.pos, exc.code, exc.message)
            return self.result

        apps = [d for d in documents if isinstance(d.data, dict) and d.data.get("kind") == "Telo.Application"]
        libraries = [
            d for d in documents if isinstance(d.data, dict) and d.data.get("kind") == "Telo.Library"
        ]
        if libraries and not apps:
            # A library's documents are its own resources, parameterised by whoever imports it:
            # nothing here is an application toolbridge could run, so the file is one finding.
            meta = libraries[0].data.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            label = f"Telo.Library {name[:60]}" if isinstance(name, str) else "Telo.Library"
            self.add(
                libraries[0].value_pos(("kind",)),
                "ERR_MANIFEST_UNSUPPORTED",
                f"this file is a Telo library's own manifest ({label}): toolbridge runs applications "
                "(Telo.Application), not libraries, so the library's documents are not checked",
            )
            return self.result
        if apps:
            imports = apps[0].data.get("imports")
            if isinstance(imports, dict):
                imports = {k: v for k, v in imports.items() if isinstance(k, str) and isinstance(v, str)}
            # Without an `imports` mapping the canonical prefixes stand for themselves; with one,
            # a Telo module's alias must be imported (Telo's UNDEFINED_KIND otherwise).
            self.resolver = KindResolver(
                ALL_KINDS, imports if isinstance(imports, dict) else None, str(self.result.base_dir)
            )
        for extra in apps[1:]:
            self.add(
                extra.value_pos(("kind",)),
                "ERR_MANIFEST_INVALID_VALUE",
                "a manifest has at most one Telo.Application",
            )

        typed: list[tuple[int, Document, str]] = []
        kinds_by_name: dict[str, tuple[str, Document]] = {}
        for index, doc in enumerate(documents):
            kind = self._kind_of(doc)
            if kind is None and self._unsupported(doc, kinds_by_name):
                continue  # one finding for the whole document
            for problem in doc.problems:
                self.add(problem.pos, problem.code, problem.message)
            if kind is not None and not (kind == "Telo.Application" and doc is not apps[0]):
                typed.append((index, doc, kind))

        # Secrets documents and the application first: they are sources for every other document.
        mapping: dict[str, str] = {}
        defaults: dict[str, str] = {}
        for index, doc, kind in typed:
            if kind == "Secrets":
                model = self._validate(doc, kind, index)
                if isinstance(model, SecretsDoc):
                    mapping.update(model.env)
            elif kind == "Telo.Application":
                app = _declarations_only(doc)  # the whole document is validated below
                if app is not None:
                    declared, defaults = self.declared_values(app, self.env)
                    mapping = {**declared, **mapping}
        self.sources = sources = SecretSources(
            given=self.given, mapping=mapping, env=self.env, defaults=defaults
        )
        for index, doc, kind in typed:
            if kind == "Telo.Application":
                # Only its targets take expressions (inputs and gates, evaluated now).
                self._expand(doc, kind, sources, under="targets")
                self._validate(doc, kind, index)
            elif kind != "Secrets":
                self._expand(doc, kind, sources)
                self._validate(doc, kind, index)
            self._register_name(doc, kind, kinds_by_name)

        self._check_refs(documents, kinds_by_name)
        self._check_runtimes()
        self._check_json_schemas()
        self._check_locks()
        self._check_tool_sets()
        self._check_includes()
        self._check_gateways()
        self.check_targets(self.result.application)
        if all(doc.data is None for doc in documents):
            self.add(
                Pos(1, 1),
                "ERR_MANIFEST_NO_AGENT",
                "the manifest is empty: it declares no Ai.Agent, so `toolbridge run` has nothing to run",
                severity="warning",
            )
        self.result.diagnostics.sort(key=lambda d: (d.line, d.column))
        return self.result

    def _kind_of(self, doc: Document) -> str | None:
        if doc.data is None:
            return None
        if not isinstance(doc.data, dict):
            self.add(
                doc.pos,
                "ERR_MANIFEST_WRONG_TYPE",
                "a manifest document must be a mapping with `kind` and `metadata`, "
                f"not {type_name(doc.data)}",
            )
            return None
        if "kind" not in doc.data:
            self.add(doc.pos, "ERR_MANIFEST_MISSING_FIELD", "missing required field `kind`")
            return None
        kind = doc.data["kind"]
        if not isinstance(kind, str):
            self.add(
                doc.value_pos(("kind",)),
                "ERR_MANIFEST_WRONG_TYPE",
                f"`kind` must be a string, not {type_name(kind)}",
            )
            return None
        resolution = self.resolver.resolve(kind)
        if resolution.kind is None:
            if resolution.code not in _WHOLE_DOCUMENT:
                self.add(doc.value_pos(("kind",)), resolution.code, resolution.message)
            return None
        doc.data["kind"] = resolution.kind
        return resolution.kind

    def _unsupported(self, doc: Document, seen: dict[str, tuple[str, Document]]) -> bool:
        """Report a document of a kind toolbridge does not run (or whose module the application
        does not import), once; keep its name for `!ref`s."""
        if not isinstance(doc.data, dict) or not isinstance(doc.data.get("kind"), str):
            return False
        kind = doc.data["kind"]
        resolution = self.resolver.resolve(kind)
        if resolution.code not in _WHOLE_DOCUMENT:
            return False
        self.add(doc.value_pos(("kind",)), resolution.code, resolution.message)
        meta = doc.data.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if isinstance(name, str):
            self.result.unsupported.setdefault(name, kind)
            seen.setdefault(name, (kind, doc))
        return True

    def _expand(self, doc: Document, kind: str, sources: SecretSources, under: str | None = None) -> None:
        manifest_dir = str(self.result.base_dir)

        def walk(value: Any, path: Path) -> Any:
            if kind == "Telo.Application" and _is_bare_target(path, value):
                # Telo runs a target written as a bare name (`targets: [Server]`) as a reference.
                return Ref(value, doc.value_pos(path))
            if isinstance(value, Cel):
                return self.cel_value(doc, kind, path, value)
            whole = _WHOLE_EXPRESSION.match(value) if isinstance(value, str) else None
            if whole and not _TOOLBRIDGE_EXPRESSION.match(whole.group(1)):
                # Telo's inline form of a CEL expression: the whole string is one `${{ … }}`.
                return self.cel_value(doc, kind, path, Cel(whole.group(1), doc.value_pos(path)))
            if isinstance(value, str) and "${{" in value:
                expanded, problems = expand(value, sources, manifest_dir)
                for problem in problems:
                    self.add(doc.value_pos(path), problem.code, problem.message, problem.severity)
                return expanded
            if isinstance(value, dict):
                return {k: walk(v, (*path, k)) for k, v in value.items()}
            if isinstance(value, list):
                return [walk(v, (*path, i)) for i, v in enumerate(value)]
            return value

        if under is None:
            doc.data = walk(doc.data, ())
        elif isinstance(doc.data, dict) and under in doc.data:
            doc.data[under] = walk(doc.data[under], (under,))

    def _validate(self, doc: Document, kind: str, index: int) -> KindDoc | None:
        model_cls = ALL_KINDS[kind]
        try:
            model = model_cls.model_validate(doc.data)
        except ValidationError as exc:
            where = self._doc_label(doc, kind)
            for err in plain_errors(model_cls, exc.errors(include_url=False)):
                self._schema_error(doc, model_cls, where, err)
            return None
        name = model.metadata.name
        if name not in self.result.docs:
            self.result.docs[name] = ManifestDoc(model=model, source=doc, index=index)
        return model

    def _doc_label(self, doc: Document, kind: str) -> str:
        meta = doc.data.get("metadata") if isinstance(doc.data, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        return f"{kind} {name}" if isinstance(name, str) else kind

    def _schema_error(self, doc: Document, model_cls: type[BaseModel], where: str, err: Any) -> None:
        loc: tuple[str | int, ...] = tuple(err["loc"])
        etype: str = err["type"]
        ctx = err.get("ctx") or {}
        value = err.get("input")
        key_error = bool(loc) and loc[-1] == "[key]"
        if key_error:
            loc = loc[:-1]
        extra_path = tuple(ctx.get("path", ())) if isinstance(ctx.get("path"), list) else ()
        dotted = _dotted(loc)
        if etype == "missing":
            parent = loc[:-1]
            self.add(
                doc.value_pos(parent),
                "ERR_MANIFEST_MISSING_FIELD",
                f"{where}: missing required field `{_dotted(loc)}`",
            )
            return
        if etype == "extra_forbidden":
            parent_model = model_at(model_cls, loc[:-1])
            known = aliases_of(parent_model) if parent_model else []
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            hint = (
                f"; did you mean `{close[0]}`?"
                if close
                else (f" (known: {', '.join(known)})" if known else "")
            )
            self.add(
                doc.key_pos(loc), "ERR_MANIFEST_UNKNOWN_FIELD", f"{where}: unknown field `{dotted}`{hint}"
            )
            return
        pos = doc.key_pos(loc) if key_error else doc.value_pos((*loc, *extra_path))
        if any(problem.pos == pos for problem in doc.problems):
            return  # the YAML problem there is already reported; its value was dropped
        if etype == "secret_placement" or isinstance(value, Secret):
            self.add(
                pos,
                "ERR_MANIFEST_SECRET_PLACEMENT",
                f"{where}: `{_dotted((*loc, *extra_path))}` cannot take a secret",
            )
            return
        if etype == "cel_not_allowed" or isinstance(value, Cel):
            self.add(
                pos,
                "ERR_MANIFEST_EXPRESSION",
                f"{where}: `{_dotted((*loc, *extra_path))}` does not take a `!cel` expression",
            )
            return
        if etype in ("ref_not_allowed",) or isinstance(value, Ref):
            self.add(
                pos,
                "ERR_MANIFEST_REF_FORM",
                f"{where}: `{_dotted((*loc, *extra_path))}` does not take a `!ref`",
            )
            return
        if etype == "ref_form":
            self.add(pos, "ERR_MANIFEST_REF_FORM", f"{where}: `{dotted}` {err['msg']}")
            return
        if etype == "telo_unsupported":  # a Telo value of a field toolbridge does not implement
            self.add(pos, "ERR_MANIFEST_UNSUPPORTED", f"{where}: `{dotted}`: {err['msg']}")
            return
        if etype == "union_type":
            what = f"`{dotted}` key" if key_error else f"`{dotted}`"
            message = f"{where}: {what} must be {err['msg']}, not {type_name(value)}"
            self.add(pos, "ERR_MANIFEST_WRONG_TYPE", message)
            return
        if etype in TYPE_WORDS:
            expected = TYPE_WORDS[etype]
            what = f"`{dotted}` key" if key_error else f"`{dotted}`"
            self.add(
                pos,
                "ERR_MANIFEST_WRONG_TYPE",
                f"{where}: {what} must be {expected}, not {type_name(value)}",
            )
            return
        if (
            etype == "string_pattern_mismatch"
            and ctx.get("pattern") == NAME_PATTERN
            and isinstance(value, str)
        ):
            self.add(
                pos,
                "ERR_MANIFEST_INVALID_VALUE",
                f"{where}: `{dotted}` must be a name (letters, digits, `_` and `-`, not starting with a "
                f"digit), not {value[:60]!r}",
            )
            return
        self.add(pos, "ERR_MANIFEST_INVALID_VALUE", f"{where}: `{dotted}`: {err['msg']}")

    def _register_name(self, doc: Document, kind: str, seen: dict[str, tuple[str, Document]]) -> None:
        meta = doc.data.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str):
            return
        if name in seen:
            first_kind, first = seen[name]
            line = first.value_pos(("metadata", "name")).line
            self.add(
                doc.value_pos(("metadata", "name")),
                "ERR_MANIFEST_DUPLICATE_NAME",
                f"duplicate name {name!r}: a {first_kind} on line {line} already has it",
            )
            # A later duplicate must not shadow the first valid document.
            return
        seen[name] = (kind, doc)

    def _check_refs(self, documents: list[Document], kinds_by_name: dict[str, tuple[str, Document]]) -> None:
        accepts: dict[Pos, tuple[str, ...]] = {}
        for mdoc in self.result.docs.values():
            for ref in _refs_in_model(mdoc.model):
                accepts[ref.pos] = ref.accepts
        edges: dict[str, list[Ref]] = {}
        for doc in documents:
            if not isinstance(doc.data, dict) or self._is_unsupported_doc(doc, kinds_by_name):
                continue
            meta = doc.data.get("metadata")
            owner = meta.get("name") if isinstance(meta, dict) else None
            for ref in _refs_in_data(doc.data):
                target = kinds_by_name.get(ref.name)
                if target is None and self._imported_member(ref):
                    continue
                if target is None:
                    names = list(kinds_by_name)
                    close = difflib.get_close_matches(ref.name, names, n=1)
                    hint = f"; did you mean {close[0]}?" if close else ""
                    alias, dot, _ = ref.name.partition(".")
                    if dot and not close:
                        hint = (
                            f" (`Alias.name` is an instance a Telo import exports, and no import is "
                            f"aliased {alias[:40]})"
                        )
                    self.add(
                        ref.pos, "ERR_MANIFEST_DANGLING_REF", f"`!ref {ref.name}` names no document{hint}"
                    )
                    continue
                allowed = accepts.get(ref.pos)
                if ref.name in self.result.unsupported and self._is_unsupported_doc(target[1], kinds_by_name):
                    continue  # already reported, once, at that document
                if allowed and target[0] not in allowed:
                    self.add(
                        ref.pos,
                        "ERR_MANIFEST_REF_KIND",
                        f"`!ref {ref.name}` is a {target[0]}, but this field takes {' or '.join(allowed)}",
                    )
                if isinstance(owner, str) and kinds_by_name.get(owner, (None, None))[1] is doc:
                    edges.setdefault(owner, []).append(ref)
        self._check_cycles(edges)

    def _imported_member(self, ref: Ref) -> bool:
        """Report `!ref Alias.name` (an instance a Telo import exports) precisely; False if not one."""
        alias, dot, member = ref.name.partition(".")
        if not dot or alias not in self.resolver.sources:
            return False
        if self.resolver.provides(alias):
            what = f"{self.resolver.module_label(alias)} exports no instance toolbridge provides"
        else:
            what = f"it is exported by {self.resolver.module_label(alias)}, which toolbridge does not provide"
        self.add(
            ref.pos,
            "ERR_MANIFEST_UNSUPPORTED",
            f"`!ref {ref.name[:80]}` names `{member[:60]}` of the import {alias}: {what}",
        )
        return True

    def _is_unsupported_doc(self, doc: Document, kinds_by_name: dict[str, tuple[str, Document]]) -> bool:
        meta = doc.data.get("metadata") if isinstance(doc.data, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or name not in self.result.unsupported:
            return False
        entry = kinds_by_name.get(name)
        return entry is not None and entry[1] is doc

    def _check_cycles(self, edges: dict[str, list[Ref]]) -> None:
        state: dict[str, int] = {}  # 1 = on the stack, 2 = done
        stack: list[str] = []
        reported: set[frozenset[str]] = set()

        def visit(node: str) -> None:
            state[node] = 1
            stack.append(node)
            for ref in edges.get(node, []):
                nxt = ref.name
                if state.get(nxt) == 1:
                    cycle = [*stack[stack.index(nxt) :], nxt]
                    key = frozenset(cycle)
                    if key not in reported:
                        reported.add(key)
                        self.add(ref.pos, "ERR_MANIFEST_REF_CYCLE", "reference cycle: " + " -> ".join(cycle))
                elif nxt in edges and state.get(nxt) is None:
                    visit(nxt)
            stack.pop()
            state[node] = 2

        for node in edges:
            if state.get(node) is None:
                visit(node)

    def _check_runtimes(self) -> None:
        runtimes = self.result.of_kind("Runtime")
        for extra in runtimes[1:]:
            self.add(
                extra.source.value_pos(("kind",)),
                "ERR_MANIFEST_MULTIPLE_RUNTIMES",
                f"a manifest has at most one Runtime; {runtimes[0].name} is already declared",
            )


def _declarations_only(doc: Document) -> ApplicationDoc | None:
    """The `secrets` and `variables` of an application whose other fields have errors."""
    data = doc.data if isinstance(doc.data, dict) else {}
    try:
        return ApplicationDoc.model_validate(
            {
                "kind": "Telo.Application",
                "metadata": {"name": "app"},
                "secrets": data.get("secrets") or {},
                "variables": data.get("variables") or {},
            }
        )
    except ValidationError:
        return None  # their own errors are already reported


def _refs_in_data(value: Any) -> Iterator[Ref]:
    if isinstance(value, Ref):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _refs_in_data(v)
    elif isinstance(value, list):
        for v in value:
            yield from _refs_in_data(v)


def _refs_in_model(value: Any) -> Iterator[Ref]:
    if isinstance(value, Ref):
        yield value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _refs_in_model(getattr(value, name))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _refs_in_model(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _refs_in_model(v)


def analyze_file(
    path: str | os.PathLike[str],
    *,
    secrets: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    max_bytes: int = MAX_MANIFEST_BYTES,
) -> AnalyzedManifest:
    """Analyze one manifest file; never raises for problems in the file (they are diagnostics).

    Args:
        path: the manifest.
        secrets: values given explicitly (`--secret` / `--secrets-file`), the first source.
        env: the environment to read secrets from (default `os.environ`).
        max_bytes: the largest file read (`ERR_MANIFEST_LIMIT` above it).
    """
    fs_path = FsPath(path)
    given = dict(secrets or {})
    analysis = _FileAnalysis(fs_path, str(path), given, os.environ if env is None else env, max_bytes)
    return analysis.run()


def check_manifest(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    secrets: Mapping[str, str] | None = None,
    secrets_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    max_bytes: int = MAX_MANIFEST_BYTES,
) -> CheckReport:
    """Statically check manifest files, as `toolbridge check` does.

    Each file is a manifest on its own. Nothing is started: no server, no model, no network.
    `Ai.Tools` functions are imported and `Tasks.ToolSet` files are loaded, to know their tools.

    Args:
        paths: one file or several.
        secrets: secret values given explicitly (they win over every other source).
        secrets_file: a file of `KEY=VALUE` lines or a YAML/JSON mapping, read before `secrets`.
        env: the environment for secrets (default `os.environ`).
        max_bytes: the largest manifest file read (default 1 MiB; `ERR_MANIFEST_LIMIT` above it).

    Returns:
        A `CheckReport`; `report.ok` is False when any error was found.

    Raises:
        ConfigError: `ERR_MANIFEST_SECRETS_FILE` when `secrets_file` cannot be read.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    given: dict[str, str] = {}
    if secrets_file is not None:
        given.update(read_secrets_file(secrets_file))
    given.update(secrets or {})
    report = CheckReport()
    for p in paths:
        report.diagnostics.extend(analyze_file(p, secrets=given, env=env, max_bytes=max_bytes).diagnostics)
    return report
