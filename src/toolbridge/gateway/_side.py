"""What the gateway changes in the prompts, resources and templates it passes through, and nothing else.

Every field the protocol defines reaches the client as the upstream sent it (`title`, `icons`,
`annotations`, `_meta`, `size`, `mimeType`, arguments' `required`, ...), apart from:

- the name's prefix (prompts, resources, templates: the binding's prefix before `name`);
- cleaned text (`sanitize.clean_text`: no terminal escapes, control characters or invisible
  Unicode) in every string a model or a person reads: `title` and `description` of prompts,
  their arguments, resources and templates, a resource's `name`; in results, a prompt's
  `description`, its messages' text (text blocks, embedded text resources, resource links'
  `name`/`title`/`description`), text resource contents, and completion values;
- a prompt whose name is not clean text is left out (a client could not name it back safely).

An upstream's JSON-RPC error reaches the client with its code and its message cleaned, cut to
`ERROR_TEXT_LIMIT` characters and redacted (`toolbridge.redact.redact`); of its `data`, only the
URI the client asked for (SEP-2164), the rest stays here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..errors import bounded
from ..sanitize import clean_text, is_clean
from ._answers import error_text

__all__ = [
    "clean_completion",
    "clean_prompt",
    "clean_prompt_result",
    "clean_read_result",
    "clean_resource",
    "not_found",
    "relayed_error",
    "seal_state",
    "template_matches",
    "unseal_state",
]

M = TypeVar("M", bound=Any)


def _cleaned(model: M, fields: Iterable[str], update: dict[str, Any] | None = None) -> M:
    """`model` with its string `fields` cleaned (a copy only when something changes)."""
    changes = dict(update or {})
    for name in fields:
        value = getattr(model, name, None)
        if isinstance(value, str) and not is_clean(value):
            changes[name] = clean_text(value)
    if not changes:
        return model
    copied: M = model.model_copy(update=changes)
    return copied


def clean_prompt(prompt: types.Prompt, name: str) -> types.Prompt | None:
    """The prompt as the client sees it (named `name`); None when its name is not clean text."""
    if not is_clean(prompt.name):
        return None
    update: dict[str, Any] = {"name": name}
    if prompt.arguments:
        update["arguments"] = [_cleaned(a, ("title", "description")) for a in prompt.arguments]
    return _cleaned(prompt, ("title", "description"), update)


def clean_resource(item: M, name: str) -> M:
    """A resource or template as the client sees it (named `name`, text cleaned)."""
    return _cleaned(item, ("title", "description"), {"name": clean_text(name)})


def _clean_contents(contents: Any) -> Any:
    if isinstance(contents, types.TextResourceContents):
        return _cleaned(contents, ("text",))
    return contents


def _clean_block(block: Any) -> Any:
    if isinstance(block, types.TextContent):
        return _cleaned(block, ("text",))
    if isinstance(block, types.EmbeddedResource):
        resource = _clean_contents(block.resource)
        return block if resource is block.resource else block.model_copy(update={"resource": resource})
    if isinstance(block, types.ResourceLink):
        return _cleaned(block, ("name", "title", "description"))
    return block


def clean_prompt_result(result: types.GetPromptResult) -> types.GetPromptResult:
    """A prompt's text cleaned (content, not definition: not pinned)."""
    messages = [m.model_copy(update={"content": _clean_block(m.content)}) for m in result.messages]
    return _cleaned(result, ("description",), {"messages": messages})


def clean_read_result(result: types.ReadResourceResult) -> types.ReadResourceResult:
    """Text resource contents cleaned; blobs as they are."""
    return result.model_copy(update={"contents": [_clean_contents(c) for c in result.contents]})


def clean_completion(result: types.CompleteResult) -> types.CompleteResult:
    """Completion values cleaned."""
    completion = result.completion
    values = [clean_text(v) for v in completion.values]
    return result.model_copy(update={"completion": completion.model_copy(update={"values": values})})


def relayed_error(exc: MCPError, uri: str | None = None) -> MCPError:
    """An upstream's JSON-RPC error as the client gets it: its code, its message cleaned, cut and
    redacted; of its `data`, only `{"uri": uri}` when it names the URI the client asked for
    (SEP-2164's resource-not-found), nothing else. An invalid-params answer (-32602) to a
    `resources/read` (`uri` given) whose data names no URI gets `{"uri": uri}`: the read's one
    parameter is that URI, and SEP-2164 asks for it there (a handshake-era server leaves it out)."""
    code = exc.error.code if isinstance(exc.error.code, int) else types.INTERNAL_ERROR
    message = exc.error.message if isinstance(exc.error.message, str) else ""
    text = error_text(message) or "the upstream refused the request"
    data = exc.error.data
    named = data.get("uri") if isinstance(data, dict) else None
    if uri is not None and (named == uri or (named is None and code == types.INVALID_PARAMS)):
        return MCPError(code, text, {"uri": uri} if len(uri) <= 8192 else None)
    return MCPError(code, text)


def not_found(uri: str) -> MCPError:
    """The gateway's own answer for a resource it does not serve: -32602 with `data.uri` (SEP-2164)."""
    data = {"uri": uri} if len(uri) <= 8192 else None
    return MCPError(types.INVALID_PARAMS, f"resource not found: {bounded(uri, 200)}", data)


_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^{}]*)\}")
_MAX_TEMPLATE = 1000
_MAX_URI = 4096

_GAPS = {"": "/?#", ".": "/?#", ";": "/?#", "/": "?#", "?": "#", "&": "#", "+": "", "#": ""}
"""For each RFC 6570 operator, the characters its expansion cannot hold (as a pattern: an
expansion is any run of other characters, empty included)."""


@dataclass(frozen=True)
class _Template:
    """A URI template as a bit-parallel pattern: bit i stands for "matched up to token i"."""

    size: int
    """How many tokens (the accepting bit is `1 << size`)."""
    literals: dict[str, int]
    """Character -> the bits of the literal tokens that are that character."""
    gaps: int
    """The bits of the gap tokens (an expansion: a run of characters, empty included)."""
    excluding: dict[str, int]
    """Character -> the bits of the gaps that cannot hold it."""


@lru_cache(maxsize=1024)
def _template(template: str) -> _Template:
    literals: dict[str, int] = {}
    gaps = 0
    excluding: dict[str, int] = {}
    size = 0
    at = 0

    def literal(text: str) -> None:
        nonlocal size
        for ch in text:
            literals[ch] = literals.get(ch, 0) | 1 << size
            size += 1

    for m in _EXPRESSION.finditer(template):
        literal(template[at : m.start()])
        excluded = _GAPS[m.group(1)]
        if m.start() == at and size and gaps >> (size - 1) & 1:
            # right after another gap: one gap that holds what either holds (a superset: fine
            # for a pattern, and it keeps the matcher linear)
            for ch in "/?#":
                if ch not in excluded:
                    excluding[ch] = excluding.get(ch, 0) & ~(1 << (size - 1))
        else:
            gaps |= 1 << size
            for ch in excluded:
                excluding[ch] = excluding.get(ch, 0) | 1 << size
            size += 1
        at = m.end()
    literal(template[at:])
    return _Template(size, literals, gaps, excluding)


def template_matches(template: str, uri: str) -> bool:
    """Whether `uri` is an expansion of the URI template `template` (RFC 6570, as a pattern).

    Bit-parallel (shift-and with gaps): a few integer operations per character of the URI, no
    backtracking, so a hostile template cannot make it slow. Templates over 1 000 and URIs over
    4 096 characters match nothing.
    """
    if len(template) > _MAX_TEMPLATE or len(uri) > _MAX_URI:
        return False
    t = _template(template)
    states = 1 | (1 & t.gaps) << 1  # a gap may be empty (no two gaps are adjacent)
    for ch in uri:
        stay = states & t.gaps & ~t.excluding.get(ch, 0)
        states = (states & t.literals.get(ch, 0)) << 1 | stay
        states |= (states & t.gaps) << 1
        if not states:
            return False
    return bool(states >> t.size & 1)


_STATE_KEY = secrets.token_bytes(32)
"""Seals the request states of upstream rounds this process hands to clients (see `seal_state`)."""


def _state_mac(bound: str, state: str) -> str:
    return hmac.new(_STATE_KEY, f"{bound}\x00{state}".encode(), hashlib.sha256).hexdigest()


def seal_state(state: str | None, bound: str) -> str:
    """An upstream's `requestState` as the client gets it: bound to `bound` (who asked, for what),
    so another identity, or another prompt, cannot replay it."""
    raw = base64.urlsafe_b64encode((state or "").encode()).decode()
    return f"{raw}.{_state_mac(bound, state or '')}"


def unseal_state(sealed: str | None, bound: str) -> str | None:
    """The upstream's state inside `sealed` (None for none).

    Raises:
        MCPError: -32602 when it was not sealed here for `bound` (forged, replayed elsewhere).
    """
    if sealed is None:
        return None
    raw, _, mac = sealed.rpartition(".")
    try:
        state = base64.urlsafe_b64decode(raw.encode("ascii")).decode()
    except (ValueError, UnicodeError):
        state = None
    if state is None or not hmac.compare_digest(mac, _state_mac(bound, state)):
        raise MCPError(types.INVALID_PARAMS, "invalid requestState")
    return state or None
