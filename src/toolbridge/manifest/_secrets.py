"""Secrets: `"${{ secrets.NAME }}"` in a manifest, resolved at load time, never printed.

A string that contains `${{ secrets.NAME }}` becomes a `Secret`. Its value is found, in order:

1. `--secret NAME=VALUE` on the command line, then a `--secrets-file` (both end up in
   `SecretSources.given`);
2. the manifest's `Secrets` document, which maps NAME to the name of an environment variable;
3. the environment variable `NAME`;
4. the environment variable named by NAME's UPPER_SNAKE_CASE form (`openaiApiKey` reads
   `OPENAI_API_KEY`).

The first source that has a value wins. A `Secret`'s `str()` and `repr()` are redacted, so a
secret that ends up in a log line, an exception message or `--json` output reads `***`; only
`reveal()` gives the value, and only the code that builds live objects calls it.

Every resolved value is also registered with the process-wide redactor (`toolbridge.redact`), so
it is scrubbed wherever the built objects might carry it out (errors, logs, events, the journal,
the command line's output). A value ending with CR or LF is refused
(`ERR_MANIFEST_SECRET_VALUE`, naming the secret); a value shorter than 4 characters resolves but
cannot be redacted, which is a warning (`ERR_MANIFEST_SECRET_SHORT`).

`${{ manifestDir }}` is the other expression manifests know: the absolute directory of the
manifest file, for paths that must not depend on where the command runs.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from ..errors import ConfigError
from ..redact import MIN_SECRET_CHARS, register_secret
from ._telo import TELO_NAMESPACES, telo_namespace_message

__all__ = [
    "EXPRESSION",
    "Secret",
    "SecretSources",
    "read_secrets_file",
    "upper_snake",
]

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
"""A `${{ ... }}` expression inside a string."""

_SECRET_REF = re.compile(r"^secrets\.([A-Za-z_][A-Za-z0-9_-]*)$")
_SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
REDACTED = "***"


class Secret:
    """A string that came (at least partly) from a secret. Printing it shows `***`.

    Args:
        template: the manifest text, e.g. `"Bearer ${{ secrets.token }}"`.
        names: the secret names the template uses.
        value: the resolved text, or `None` when some secret could not be resolved.
    """

    __slots__ = ("_value", "names", "template")

    def __init__(self, template: str, names: tuple[str, ...], value: str | None) -> None:
        self.template = template
        self.names = names
        self._value = value

    @property
    def resolved(self) -> bool:
        """True when every secret in the template had a value."""
        return self._value is not None

    def reveal(self) -> str:
        """The real text. Call it only to hand the value to the thing that needs it.

        Raises:
            ConfigError: `ERR_MANIFEST_SECRET_UNRESOLVED` when a secret had no value.
        """
        if self._value is None:
            raise ConfigError(
                f"secret {', '.join(self.names)} cannot be resolved", code="ERR_MANIFEST_SECRET_UNRESOLVED"
            )
        return self._value

    def __str__(self) -> str:
        return REDACTED

    def __repr__(self) -> str:
        return f"Secret({REDACTED})"

    def __reduce__(self) -> Any:  # pragma: no cover - pickling would carry the value out
        raise TypeError("a Secret cannot be pickled")


def upper_snake(name: str) -> str:
    """`openaiApiKey` -> `OPENAI_API_KEY`, `api-key` -> `API_KEY`, `HTTPToken` -> `HTTP_TOKEN`."""
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", spaced)
    return re.sub(r"[^A-Za-z0-9]+", "_", spaced).strip("_").upper()


@dataclass
class SecretSources:
    """Where secret values come from, in the documented order.

    Attributes:
        given: values from `--secret` / `--secrets-file` (or the `secrets=` argument).
        mapping: a `Secrets` document's mapping, secret name -> environment variable name.
        env: the environment (defaults to `os.environ`).
    """

    given: Mapping[str, str] = field(default_factory=dict)
    mapping: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    defaults: Mapping[str, str] = field(default_factory=dict)
    """Values used when no other source has one (a `Telo.Application` secret's `default`)."""

    def lookup(self, name: str) -> str | None:
        """The value of secret `name`, or `None` when no source has it."""
        if name in self.given:
            return self.given[name]
        mapped = self.mapping.get(name)
        if mapped and self.env.get(mapped) is not None:
            return self.env[mapped]
        if self.env.get(name) is not None:
            return self.env[name]
        snake = upper_snake(name)
        if snake and self.env.get(snake) is not None:
            return self.env[snake]
        return self.defaults.get(name)

    def where_to_look(self, name: str) -> str:
        """A short, value-free hint of the places `name` was looked for."""
        places = [f"--secret {name}=…"]
        mapped = self.mapping.get(name)
        if mapped:
            places.append(f"${mapped} (declared)")
        for variable in (name, upper_snake(name)):  # each variable named once
            if variable and variable != mapped and f"${variable}" not in places:
                places.append(f"${variable}")
        return ", ".join(places)


def parse_secret_arg(text: str) -> tuple[str, str]:
    """Split one `NAME=VALUE` command-line argument.

    Raises:
        ConfigError: `ERR_MANIFEST_SECRET_ARG` when it is not `NAME=VALUE` (the value is not quoted).
    """
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not _SECRET_NAME.match(name):
        raise ConfigError("--secret expects NAME=VALUE", code="ERR_MANIFEST_SECRET_ARG")
    return name, value


_DOTENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=(.*)$")


def read_secrets_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a secrets file: `KEY=VALUE` lines (dotenv style) or a YAML / JSON mapping.

    The file is dotenv style when every line that is not blank or a `#` comment looks like
    `KEY=VALUE` (an optional `export ` prefix and surrounding quotes are removed); otherwise it
    must be a YAML (or JSON) mapping of names to scalar values.

    Raises:
        ConfigError: `ERR_MANIFEST_SECRETS_FILE` when the file cannot be read or has the wrong
            shape. Messages give line numbers, never file content.
    """
    from .._bounded import MAX_JSON_FILE_BYTES, InputLimitError, loads_json, read_text_file

    p = Path(path)
    try:
        text = read_text_file(p, max_bytes=MAX_JSON_FILE_BYTES)
    except InputLimitError as exc:
        raise ConfigError(
            f"secrets file {exc.where(str(p))}: {exc.message}", code="ERR_MANIFEST_SECRETS_FILE"
        ) from None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if lines and all(_DOTENV_LINE.match(ln) for ln in lines):
        out: dict[str, str] = {}
        for ln in lines:
            m = _DOTENV_LINE.match(ln)
            assert m is not None
            value = m.group(2).strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            out[m.group(1)] = value
        return out
    try:
        data = _bounded_yaml(text) if p.suffix != ".json" else loads_json(text)
    except (yaml.YAMLError, InputLimitError) as exc:
        mark = exc.problem_mark if isinstance(exc, yaml.MarkedYAMLError) else None
        where = f" at line {mark.line + 1}" if mark is not None else ""
        if isinstance(exc, InputLimitError):
            where = f" at line {exc.line}" if exc.line else f": it {exc.message}"
        raise ConfigError(
            f"secrets file {p} is neither KEY=VALUE lines nor a YAML/JSON mapping (syntax error{where})",
            code="ERR_MANIFEST_SECRETS_FILE",
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"secrets file {p} must be KEY=VALUE lines or a mapping of names to values",
            code="ERR_MANIFEST_SECRETS_FILE",
        )
    result: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, dict | list) or value is None:
            raise ConfigError(
                f"secrets file {p}: the value of {key!s} must be a string or number",
                code="ERR_MANIFEST_SECRETS_FILE",
            )
        result[str(key)] = value if isinstance(value, str) else json.dumps(value)
    return result


@dataclass
class ExpressionProblem:
    """An expression that is not understood, or a secret without a value."""

    code: str
    message: str
    severity: Literal["error", "warning"] = "error"


def expand(
    text: str, sources: SecretSources, manifest_dir: str
) -> tuple[str | Secret, list[ExpressionProblem]]:
    """Expand the `${{ ... }}` expressions of one string.

    Returns the plain string when it holds no secret, else a `Secret`; and the problems found
    (unknown expressions, unresolved secrets — each named, never valued).
    """
    problems: list[ExpressionProblem] = []
    names: list[str] = []
    unresolved = False

    def substitute(match: re.Match[str]) -> str:
        nonlocal unresolved
        expr = match.group(1)
        if expr == "manifestDir":
            return manifest_dir
        m = _SECRET_REF.match(expr)
        root = re.match(r"[A-Za-z_][A-Za-z0-9_]*", expr)
        if m is None and root is not None and root.group(0) in TELO_NAMESPACES:
            problems.append(
                ExpressionProblem(
                    "ERR_MANIFEST_UNSUPPORTED",
                    telo_namespace_message(
                        root.group(0),
                        expr,
                        "inside a longer string, `${{ … }}` may read `secrets.NAME` and `manifestDir`",
                    ),
                )
            )
            return ""
        if m is None:
            problems.append(
                ExpressionProblem(
                    "ERR_MANIFEST_EXPRESSION",
                    f"unknown expression `${{{{ {expr} }}}}` (known: secrets.NAME, manifestDir)",
                )
            )
            return ""
        name = m.group(1)
        if name not in names:
            names.append(name)
        value = sources.lookup(name)
        if value is None:
            unresolved = True
            problems.append(
                ExpressionProblem(
                    "ERR_MANIFEST_SECRET_UNRESOLVED",
                    f"secret {name} cannot be resolved (looked in {sources.where_to_look(name)})",
                )
            )
            return ""
        if value.endswith(("\r", "\n")):
            unresolved = True
            problems.append(
                ExpressionProblem(
                    "ERR_MANIFEST_SECRET_VALUE",
                    f"secret {name} ends with a line break (CR/LF), as a token file saved on Windows "
                    "does; remove the trailing line break",
                )
            )
            return ""
        if not register_secret(value, name=name) and value:
            problems.append(
                ExpressionProblem(
                    "ERR_MANIFEST_SECRET_SHORT",
                    f"secret {name} is shorter than {MIN_SECRET_CHARS} characters; "
                    "it cannot be redacted from output",
                    "warning",
                )
            )
        return value

    expanded = EXPRESSION.sub(substitute, text)
    if not names:
        return expanded, problems
    return Secret(text, tuple(names), None if unresolved else expanded), problems


def _bounded_yaml(text: str) -> Any:
    """`yaml.safe_load` within the manifest loader's limits (aliases, nesting, nodes)."""
    from ._yaml import YamlSyntaxError, parse_documents

    try:
        docs = parse_documents(text)
    except YamlSyntaxError as exc:
        mark = yaml.Mark("secrets", 0, exc.pos.line - 1, exc.pos.column - 1, None, 0)
        raise yaml.MarkedYAMLError(problem=exc.message, problem_mark=mark) from None
    if not docs:
        return None
    if len(docs) != 1 or docs[0].problems:
        where = docs[0].problems[0].pos if docs and docs[0].problems else None
        found: yaml.Mark | None = (
            yaml.Mark("secrets", 0, where.line - 1, where.column - 1, None, 0) if where else None
        )
        raise yaml.MarkedYAMLError(problem="expected one plain YAML mapping", problem_mark=found)
    return docs[0].data
