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
`ERROR_TEXT_LIMIT` characters and redacted (`toolbridge.redact.redact`); its `data` stays here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..errors import bounded
from ..redact import redact
from ..sanitize import clean_text, is_clean
from ._core import ERROR_TEXT_LIMIT

__all__ = [
    "clean_completion",
    "clean_prompt",
    "clean_prompt_result",
    "clean_read_result",
    "clean_resource",
    "relayed_error",
    "template_matches",
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


def relayed_error(exc: MCPError) -> MCPError:
    """An upstream's JSON-RPC error as the client gets it: its code, its message cleaned, cut and
    redacted (never its `data`)."""
    code = exc.error.code if isinstance(exc.error.code, int) else types.INTERNAL_ERROR
    message = exc.error.message if isinstance(exc.error.message, str) else ""
    text = bounded(redact(clean_text(message)), ERROR_TEXT_LIMIT) or "the upstream refused the request"
    return MCPError(code, text)


_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^{}]*)\}")


@lru_cache(maxsize=1024)
def _template_pattern(template: str) -> re.Pattern[str] | None:
    """A regular expression for the URIs an RFC 6570 template can expand to (None: unusable)."""
    out: list[str] = []
    at = 0
    for m in _EXPRESSION.finditer(template):
        out.append(re.escape(template[at : m.start()]))
        operator = m.group(1)
        if operator == "+":
            out.append(".*")
        elif operator == "#":
            out.append(r"(?:#.*)?")
        elif operator in ("?", "&"):
            out.append(r"(?:[?&][^#]*)?")
        elif operator in ("/", ".", ";"):
            out.append(r"(?:" + re.escape(operator) + r"[^/?#]*)*")
        else:
            out.append(r"[^/?#]*")
        at = m.end()
    out.append(re.escape(template[at:]))
    try:
        return re.compile("".join(out), re.S)
    except re.error:
        return None


def template_matches(template: str, uri: str) -> bool:
    """Whether `uri` is an expansion of the URI template `template` (RFC 6570, as a pattern)."""
    if len(template) > 2000:
        return False
    pattern = _template_pattern(template)
    return pattern is not None and pattern.fullmatch(uri) is not None
