"""A YAML loader that remembers where every node came from.

Manifests are read with PyYAML's `SafeLoader` in two steps. `yaml.compose_all` builds the node
graph (every node carries its start mark); `_Converter` then turns each node into plain Python
data while recording, for every path into the document, the 1-based line and column of the key
and of the value. The analyzer uses those positions to point each diagnostic at the exact node
that is wrong.

Two tags are special:

- `!ref Name` on a scalar becomes a `Ref` (a reference to another document, with its own
  position); on anything else it is an error.
- `!cel "expression"` on a scalar becomes a `Cel` (a CEL expression, evaluated at load time or
  at run time depending on the field; see `_cel`); on anything else it is an error.
- Any other non-standard tag is `ERR_MANIFEST_UNSUPPORTED`, naming the tag.

Standard tags are limited to what plain data needs: `!!map` on mappings, `!!seq` on sequences,
the scalar types on scalars. `!!set`, `!!omap`, `!!python/...` and the like are errors.

A mapping that repeats a key is an error too (PyYAML would silently keep the last one). Errors do
not stop the conversion: each becomes a `YamlProblem` and the value is dropped, so one pass finds
them all. A syntax error does stop the file; everything after it is unreadable.

Work is bounded before it is done (`ERR_MANIFEST_LIMIT`): sequences and mappings nest at most
`MAX_DEPTH` levels, counted while composing and again after aliases are expanded, and a file
holds, and expands to, at most `MAX_NODES` nodes (a 344-byte "billion laughs" of nested aliases
fails at once, before anything is expanded). An alias inside its own anchor is an error, and so are the
control characters YAML forbids (NUL, ESC, ...), with the position of the character.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .._bounded import MAX_DEPTH

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "Cel",
    "Document",
    "Path",
    "Pos",
    "Ref",
    "YamlProblem",
    "YamlSyntaxError",
    "parse_documents",
]

MAX_NODES = 50_000
"""The most nodes one manifest file may hold, and may expand to once aliases are expanded."""

Path = tuple[str | int, ...]
"""A path into a document: mapping keys and list indexes."""


@dataclass(frozen=True, slots=True)
class Pos:
    """A 1-based line and column in a file."""

    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Ref:
    """A `!ref Name` reference to another document of the same manifest.

    Attributes:
        name: the referenced document's `metadata.name`.
        pos: where the `!ref` tag starts.
        accepts: the kinds the slot holding this reference accepts (set by validation).
    """

    name: str
    pos: Pos = field(default=Pos(0, 0), compare=False)
    accepts: tuple[str, ...] = field(default=(), compare=False)

    def __repr__(self) -> str:
        return f"Ref({self.name!r})"


@dataclass(frozen=True, slots=True)
class Cel:
    """A `!cel "expression"` value: a CEL expression and where its tag starts."""

    expr: str
    pos: Pos = field(default=Pos(0, 0), compare=False)

    def __repr__(self) -> str:
        return f"Cel({self.expr!r})"


@dataclass(frozen=True, slots=True)
class YamlProblem:
    """Something in the YAML itself that is wrong (not a schema problem)."""

    code: str
    message: str
    pos: Pos


class YamlSyntaxError(Exception):
    """The file is not valid YAML, or breaks a limit; `pos` is where the parser gave up.

    `code` is `ERR_MANIFEST_YAML`, or `ERR_MANIFEST_LIMIT` for a nesting or alias-expansion limit.
    """

    def __init__(self, message: str, pos: Pos, code: str = "ERR_MANIFEST_YAML") -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos
        self.code = code


@dataclass
class Document:
    """One YAML document of a manifest, converted to plain data.

    Attributes:
        data: the document's value (mappings are dicts, `!ref` scalars are `Ref`s).
        pos: where the document's root node starts.
        keys: path -> position of the mapping key that leads to it.
        values: path -> position of the value node.
        problems: tag, key and alias problems found while converting.
    """

    data: Any
    pos: Pos
    keys: dict[Path, Pos] = field(default_factory=dict)
    values: dict[Path, Pos] = field(default_factory=dict)
    problems: list[YamlProblem] = field(default_factory=list)

    def value_pos(self, path: Path) -> Pos:
        """Position of the value at `path`, or of its nearest recorded ancestor."""
        return _lookup(self.values, path, self.pos)

    def key_pos(self, path: Path) -> Pos:
        """Position of the key leading to `path` (the value's position for list items)."""
        while path:
            if path in self.keys:
                return self.keys[path]
            if path in self.values:
                return self.values[path]
            path = path[:-1]
        return self.pos


def _lookup(table: dict[Path, Pos], path: Path, default: Pos) -> Pos:
    while path:
        if path in table:
            return table[path]
        path = path[:-1]
    return table.get((), default)


def _pos(node: Node) -> Pos:
    return Pos(node.start_mark.line + 1, node.start_mark.column + 1)


_STANDARD_TAG_PREFIX = "tag:yaml.org,2002:"
_MAPPING_TAGS = frozenset({_STANDARD_TAG_PREFIX + "map"})
_SEQUENCE_TAGS = frozenset({_STANDARD_TAG_PREFIX + "seq"})
_SCALAR_TAGS = frozenset(
    _STANDARD_TAG_PREFIX + name for name in ("str", "int", "float", "bool", "null", "merge", "timestamp")
)


def _allowed_tag(node: Node) -> bool:
    if isinstance(node, MappingNode):
        return node.tag in _MAPPING_TAGS
    if isinstance(node, SequenceNode):
        return node.tag in _SEQUENCE_TAGS
    return node.tag in _SCALAR_TAGS or not node.tag.startswith(_STANDARD_TAG_PREFIX)


class _Loader(yaml.SafeLoader):
    """`SafeLoader` that refuses to compose more than `MAX_NODES` nodes, or nesting past `MAX_DEPTH`."""

    _depth = 0
    _nodes = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if not isinstance(event, yaml.AliasEvent):
            self._nodes += 1
            if self._nodes > MAX_NODES:
                mark = event.start_mark
                raise YamlSyntaxError(
                    f"the file holds more than {MAX_NODES} nodes",
                    Pos(mark.line + 1, mark.column + 1),
                    "ERR_MANIFEST_LIMIT",
                )
        nested = isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent)
        if nested:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                mark = event.start_mark
                raise YamlSyntaxError(
                    f"sequences and mappings nest deeper than {MAX_DEPTH} levels",
                    Pos(mark.line + 1, mark.column + 1),
                    "ERR_MANIFEST_LIMIT",
                )
        try:
            return super().compose_node(parent, index)
        finally:
            if nested:
                self._depth -= 1


def _check_expansion(root: Node, budget: int) -> int:
    """Refuse a document that expands (aliases followed) past `budget` nodes or `MAX_DEPTH`, or loops.

    One pass over the distinct nodes (an alias is the same node object twice), computing each
    node's expanded size and depth bottom-up, without expanding anything. Returns the size.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            kids = _node_children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = (1 + max((depth[id(k)] for k in kids), default=0)) if kids else 0
            if size[key] > budget:
                raise YamlSyntaxError(
                    f"this node takes the file past {MAX_NODES} nodes once its aliases are expanded",
                    _pos(node),
                    "ERR_MANIFEST_LIMIT",
                )
            if depth[key] > MAX_DEPTH:
                raise YamlSyntaxError(
                    f"once aliases are expanded, this node nests deeper than {MAX_DEPTH} levels",
                    _pos(node),
                    "ERR_MANIFEST_LIMIT",
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise YamlSyntaxError("an alias refers to its own anchor (a recursive alias)", _pos(node))
        on_path.add(key)
        stack.append((node, True))
        for kid in _node_children(node):
            if id(kid) in on_path:
                raise YamlSyntaxError("an alias refers to its own anchor (a recursive alias)", _pos(kid))
            if id(kid) not in size:
                stack.append((kid, False))
    return size[id(root)]


def _node_children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


class _Converter:
    def __init__(self, loader: yaml.SafeLoader, doc: Document) -> None:
        self._loader = loader
        self._doc = doc

    def convert(self, node: Node, path: Path) -> Any:
        self._doc.values[path] = _pos(node)
        if node.tag == "!ref":
            if isinstance(node, ScalarNode) and isinstance(node.value, str) and node.value.strip():
                return Ref(node.value.strip(), _pos(node))
            self._problem("ERR_MANIFEST_REF_FORM", "`!ref` takes a document name, e.g. `!ref FilesMcp`", node)
            return None
        if node.tag == "!cel":
            if isinstance(node, ScalarNode) and isinstance(node.value, str) and node.value.strip():
                return Cel(node.value.strip(), _pos(node))
            self._problem(
                "ERR_MANIFEST_EXPRESSION", '`!cel` takes an expression, e.g. `!cel "secrets.token"`', node
            )
            return None
        if not node.tag.startswith(_STANDARD_TAG_PREFIX):
            self._problem(
                "ERR_MANIFEST_UNSUPPORTED",
                f"tag {node.tag[:40]!r} is not supported (manifests use !ref and !cel)",
                node,
            )
            return None
        if not _allowed_tag(node):
            self._problem(
                "ERR_MANIFEST_YAML",
                f"tag {node.tag.replace(_STANDARD_TAG_PREFIX, '!!')!r} is not allowed here "
                "(manifests hold plain mappings, lists and scalars)",
                node,
            )
            return None
        if isinstance(node, MappingNode):
            return self._mapping(node, path)
        if isinstance(node, SequenceNode):
            return [self.convert(item, (*path, i)) for i, item in enumerate(node.value)]
        try:
            return self._loader.construct_object(node, deep=True)
        except ConstructorError as exc:
            self._problem("ERR_MANIFEST_YAML", exc.problem or "invalid scalar", node)
            return None

    def _mapping(self, node: MappingNode, path: Path) -> dict[str, Any]:
        self._loader.flatten_mapping(node)  # resolve `<<` merge keys
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag in ("!ref", "!cel"):
                self._problem("ERR_MANIFEST_WRONG_TYPE", "mapping keys must be plain strings", key_node)
                continue
            key = self._loader.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key)
            if key in out:
                self._problem(
                    "ERR_MANIFEST_DUPLICATE_KEY", f"key {key!r} appears twice in this mapping", key_node
                )
                continue
            self._doc.keys[(*path, key)] = _pos(key_node)
            out[key] = self.convert(value_node, (*path, key))
        return out

    def _problem(self, code: str, message: str, node: Node) -> None:
        self._doc.problems.append(YamlProblem(code, message, _pos(node)))


def _syntax_message(exc: yaml.MarkedYAMLError) -> str:
    # Only the parser's own words: never the snippet of the offending line (it may hold a secret).
    parts = [p for p in (exc.context, exc.problem) if p]
    return "invalid YAML: " + ("; ".join(parts) if parts else "cannot parse")


def parse_documents(text: str) -> list[Document]:
    """Parse a multi-document YAML text into `Document`s with positions.

    Empty documents (a trailing `---`, a comment-only file) are skipped.

    Raises:
        YamlSyntaxError: the text is not valid YAML (carries the 1-based position).
    """
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # a character YAML forbids (NUL, ESC, other controls)
        line, column = _char_position(text, exc.position)
        raise YamlSyntaxError(
            f"invalid YAML: the control character U+{exc.character:04X} is not allowed in YAML text",
            Pos(line, column),
        ) from None
    docs: list[Document] = []
    budget = MAX_NODES
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            budget -= _check_expansion(node, budget)
            doc = Document(data=None, pos=_pos(node))
            doc.data = _Converter(loader, doc).convert(node, ())
            docs.append(doc)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = Pos(mark.line + 1, mark.column + 1) if mark is not None else Pos(1, 1)
        raise YamlSyntaxError(_syntax_message(exc), pos) from None
    except yaml.YAMLError as exc:  # e.g. a reader error for a control character (it has no mark)
        reason = exc.reason if isinstance(exc, yaml.reader.ReaderError) else None
        raise YamlSyntaxError(f"invalid YAML: {reason or 'cannot read the text'}", Pos(1, 1)) from None
    except RecursionError:  # not expected after the limits above; never a traceback
        raise YamlSyntaxError("the document nests too deeply", Pos(1, 1), "ERR_MANIFEST_LIMIT") from None
    finally:
        loader.dispose()
    return docs


def _char_position(text: str, offset: int) -> tuple[int, int]:
    offset = max(0, min(offset, len(text)))
    line_start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1
