"""The kinds that make a manifest a Telo application: the application itself and its targets.

- `Telo.Application`: `imports` (aliases of modules: `Ai`, `AiOpenai`, `AiMcp`, `Mcp`, or any
  alias such as `McpClient` for the MCP client module), `secrets` and `variables` (declared
  values read from the environment, for `!cel` expressions), and `targets` (what
  `toolbridge run` runs).
- `Ai.Text`, `Ai.TextStream`, `Ai.AgentStream`: one-shot text, streamed text, a streamed agent
  run; `Mcp.ToolsCall` and `Mcp.ToolsList`: one MCP request as a runnable document;
  `Mcp.SessionProvider`: where an `Mcp.HttpClient` in external session mode gets its session id.
- `Ai.Image` with `AiOpenai.OpenaiImageModel`: images from a prompt (OpenAI's images API).

`ALL_KINDS` is every kind a manifest may use: the base kinds of `_kinds` plus these.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Discriminator, Field, PlainValidator, Tag, model_validator
from pydantic.json_schema import SkipJsonSchema

from ._kinds import (
    CLIENT_KINDS,
    KINDS,
    MODEL_KINDS,
    NAME_PATTERN,
    AgentDoc,
    CelOrJson,
    KindDoc,
    NonNegativeInt,
    PlainJson,
    PlainObject,
    RefTo,
    SecretText,
    _Closed,
)
from ._kinds_gateway import GatewayDoc
from ._kinds_mcp_server import (
    HttpEndpointDoc,
    HttpServerDoc,
    McpServerPromptsDoc,
    McpServerResourcesDoc,
    McpServerToolsDoc,
    StdioServerDoc,
)
from ._yaml import Cel, Ref

__all__ = [
    "ALL_KINDS",
    "RUNNABLE_KINDS",
    "AgentStreamDoc",
    "ApplicationDoc",
    "GatedTarget",
    "ImageDoc",
    "OpenaiImageModelDoc",
    "SessionProviderDoc",
    "TargetEntry",
    "TextDoc",
    "TextStreamDoc",
    "ToolsCallDoc",
    "ToolsListDoc",
    "target_name",
]

RUNNABLE_KINDS = (
    "Ai.Agent",
    "Ai.AgentStream",
    "Ai.Text",
    "Ai.TextStream",
    "Ai.Image",
    "Mcp.ToolsCall",
    "Mcp.ToolsList",
    "McpServer.StdioServer",
    "McpServer.HttpEndpoint",
    "HttpServer.Server",
)
"""Kinds `toolbridge run` can run (directly with `--target NAME`, or as a `targets` entry)."""

ALIAS_PATTERN = r"^[A-Z][A-Za-z0-9]*$"


class AppMetadata(_Closed):
    """A `Telo.Application`'s `metadata`."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    """The application's name."""
    version: str | None = None
    """The application's version (informative)."""
    description: str | None = None
    """Free text for people."""
    categories: list[str] | None = None
    """Free-form labels (informative)."""


# JSON Schema keywords a declared value may carry besides `type` (checked when the value is read).
SCHEMA_KEYWORDS = frozenset(
    {
        "$comment", "additionalProperties", "allOf", "anyOf", "const", "contains", "deprecated",
        "enum", "examples", "exclusiveMaximum", "exclusiveMinimum", "format", "items", "maxItems",
        "maxLength", "maxProperties", "maximum", "minItems", "minLength", "minProperties", "minimum",
        "multipleOf", "not", "oneOf", "pattern", "patternProperties", "prefixItems", "properties",
        "propertyNames", "readOnly", "required", "title", "uniqueItems", "writeOnly",
    }
)  # fmt: skip


def _keywords_in_schema(schema: dict[str, Any]) -> None:
    props = schema.setdefault("properties", {})
    props.pop("x-toolbridge-keywords", None)
    for keyword in sorted(SCHEMA_KEYWORDS):
        props[keyword] = {"description": "a JSON Schema keyword the value is checked against"}


class ValueDecl(_Closed):
    """One declared secret or variable: read from `env`, else `default`.

    As in Telo, any further JSON Schema keyword (`enum`, `minimum`, `pattern`, `items`, …) may
    stand beside `type`; the value is checked against them when it is read.
    """

    EXTRA_KEYS: ClassVar[frozenset[str]] = SCHEMA_KEYWORDS

    env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    """The environment variable holding the value."""
    type: Literal["string", "number", "integer", "boolean", "object", "array"] = "string"
    """The value's type; the text of the environment variable is converted to it (an `object` or
    `array` is JSON-decoded)."""
    default: PlainJson = None
    """The value when the environment variable is not set (without one, the value is required)."""
    description: str | None = None
    """Free text for people."""
    keywords: dict[str, PlainJson] = Field(default={}, alias="x-toolbridge-keywords", exclude=True)
    """The further JSON Schema keywords (collected from the declaration itself)."""

    model_config = ConfigDict(json_schema_extra=_keywords_in_schema)

    @model_validator(mode="before")
    @classmethod
    def _collect_keywords(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        keywords = {k: v for k, v in data.items() if k in SCHEMA_KEYWORDS}
        if not keywords:
            return data
        rest = {k: v for k, v in data.items() if k not in SCHEMA_KEYWORDS}
        return {**rest, "x-toolbridge-keywords": keywords}

    def value_schema(self) -> dict[str, Any]:
        """The JSON Schema the value must satisfy."""
        return {"type": self.type, **self.keywords}


def telo_truthy(value: Any) -> bool:
    """Telo's reading of a `when` (JavaScript's): false, null, 0, NaN and "" are false; anything
    else (a non-empty string, a list or map, even an empty one) is true."""
    if value is None or value is False or value == "":
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return bool(value) and value == value  # 0 and NaN are false
    return True


def _bool_or_cel(value: Any) -> Any:
    if value is None or isinstance(value, bool | Cel):
        return value
    return telo_truthy(value)  # a `!cel` evaluated at load time gave a value that is not a boolean


BoolOrCel = Annotated[Any, PlainValidator(_bool_or_cel, json_schema_input_type=bool)]
"""A target's `when`: a boolean, or a `!cel` kept for run time (it reads `steps`). Any other value
(a `!cel` that gives a number, a string, a list) is read as Telo reads it (see `telo_truthy`)."""


class TargetEntry(_Closed):
    """An invoke target: run `invoke` with `inputs` (Telo's inline invoke step)."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    """The target's name, for `toolbridge run --target NAME` and `steps.NAME.result` (default:
    the invoked document's name)."""
    invoke: Annotated[Ref, RefTo(*RUNNABLE_KINDS)]
    """The document to run."""
    inputs: dict[str, CelOrJson] | None = None
    """Its inputs: `prompt` / `messages` / `system` / `options` for a model kind, `name` and
    `arguments` for `McpClient.ToolsCall`. A `!cel` here is evaluated when the manifest loads
    (it sees `secrets` and `variables`), or, when it reads an earlier target's result
    (`steps.NAME.result`), when the target runs (it sees `steps` and `variables`)."""
    when: BoolOrCel = None
    """Telo's gate: the target runs only when this is true (a `!cel` over `variables` and
    `secrets`, evaluated when the manifest loads, or over `steps` and `variables`, evaluated
    when the target's turn comes)."""


class GatedTarget(_Closed):
    """Telo's gated boot target `{ref: !ref Doc, when: …}`: `!ref Doc` when `when` holds."""

    ref: Annotated[Ref, RefTo(*RUNNABLE_KINDS)]
    """The document to run (the target is named after it)."""
    when: BoolOrCel = None
    """As `TargetEntry.when`."""

    @property
    def name(self) -> str:
        """The target's name: its document's."""
        return self.ref.name


def target_name(item: Any) -> str:
    """The name of a `targets` entry: its `name`, else its document's."""
    if isinstance(item, TargetEntry):
        return item.name or item.invoke.name
    return str(item.name)


def _target_tag(value: Any) -> str:
    if isinstance(value, Ref):
        return "target:ref"
    if isinstance(value, str):
        return "target:name"  # a bare name that is no name (a valid one became a `Ref`)
    if isinstance(value, dict) and "ref" in value and "invoke" not in value:
        return "target:gated"
    return "target:entry"


TargetItem = Annotated[
    Annotated[Annotated[Ref, RefTo(*RUNNABLE_KINDS)], Tag("target:ref")]
    | Annotated[TargetEntry, Tag("target:entry")]
    | Annotated[GatedTarget, Tag("target:gated")]
    | Annotated[SkipJsonSchema[Annotated[str, Field(pattern=NAME_PATTERN)]], Tag("target:name")],
    Discriminator(_target_tag),
]


class ApplicationDoc(KindDoc):
    """`Telo.Application`: module imports, declared secrets and variables, and what to run."""

    kind: Literal["Telo.Application"]
    metadata: AppMetadata  # type: ignore[assignment]
    imports: dict[Annotated[str, Field(pattern=ALIAS_PATTERN)], str] = {}
    """Alias -> module source (`oci://ghcr.io/telorun/ai@0.16.0`, `pkg:npm/@telorun/ai`, or a path
    whose last component names the module). Kinds are then written `Alias.Kind`."""
    secrets: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ValueDecl] = {}
    """Secrets for `!cel "secrets.NAME"` and `"${{ secrets.NAME }}"`."""
    variables: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ValueDecl] = {}
    """Plain values for `!cel "variables.NAME"`."""
    targets: list[TargetItem] = []
    """What `toolbridge run` runs, in order: `!ref Doc` (or Telo's bare name `Doc`),
    `{name?, invoke: !ref Doc, inputs, when}` or `{ref: !ref Doc, when}`."""
    ports: PlainJson = None
    """Accepted for compatibility; toolbridge serves no ports."""


class TextDoc(KindDoc):
    """`Ai.Text`: one model call, no tools; returns `{text, usage, finishReason}`."""

    kind: Literal["Ai.Text"]
    model: Annotated[Ref, RefTo(*MODEL_KINDS)]
    """The model."""
    system: str | None = None
    """The system prompt (an input `system` wins)."""
    options: PlainObject | None = None
    """Model options (input `options` are merged over them)."""


class TextStreamDoc(TextDoc):
    """`Ai.TextStream`: one model call whose text streams as `text-delta` parts, then `finish`."""

    kind: Literal["Ai.TextStream"]  # type: ignore[assignment]


class AgentStreamDoc(AgentDoc):
    """`Ai.AgentStream`: an agent run streamed as `text-delta`, `tool-call`, `tool-result`, then
    one `finish` or `error` part."""

    kind: Literal["Ai.AgentStream"]  # type: ignore[assignment]


class OpenaiImageModelDoc(KindDoc):
    """`AiOpenai.OpenaiImageModel`: OpenAI's images API (or any endpoint speaking it)."""

    kind: Literal["AiOpenai.OpenaiImageModel"]
    model: str
    """The image model, e.g. `gpt-image-1`."""
    api_key: SecretText | None = None
    """The API key, normally `!cel "secrets.openaiApiKey"`."""
    base_url: SecretText | None = None
    """Any endpoint speaking OpenAI's images API (default: OpenAI's)."""
    options: PlainObject | None = None
    """Request options as Telo's schema has them (`size`, `quality`, `n`, `background`,
    `outputFormat`, `moderation`, `style`, …); a call's `options` go over them."""
    max_retries: NonNegativeInt = 3
    """Retries on 429 and 5xx answers and connection failures, with backoff."""


class ImageDoc(KindDoc):
    """`Ai.Image`: generate images from a prompt; returns `{images, finishReason, usage}`."""

    kind: Literal["Ai.Image"]
    model: Annotated[Ref, RefTo("AiOpenai.OpenaiImageModel")]
    """The image model."""
    intent: Literal["generate", "edit", "inpaint"] = "generate"
    """Telo's intent: `generate` from a prompt; `edit` the call's `images`; `inpaint` them where
    the call's `mask` is transparent (OpenAI's `images.edit`)."""
    options: PlainObject | None = None
    """Options over the model's (a call's `options` go over these)."""
    output_dir: str | None = None
    """toolbridge's: a directory (relative to the manifest) each image is also written to, as
    `NAME-N.png` (the first free N); the result's `files` lists them."""


class ToolsCallDoc(KindDoc):
    """`McpClient.ToolsCall` (`Mcp.ToolsCall`): call one tool; inputs `{name, arguments}`."""

    kind: Literal["Mcp.ToolsCall"]
    client: Annotated[Ref, RefTo(*CLIENT_KINDS)]
    """The client of the server."""


class ToolsListDoc(KindDoc):
    """`McpClient.ToolsList` (`Mcp.ToolsList`): list the server's tools; returns `{tools}`."""

    kind: Literal["Mcp.ToolsList"]
    client: Annotated[Ref, RefTo(*CLIENT_KINDS)]
    """The client of the server."""


class SessionProviderDoc(KindDoc):
    """`Mcp.SessionProvider`: a Python callable that returns the session id for an external-mode
    `Mcp.HttpClient` (a string, or a mapping with `sessionId`); it may be async."""

    kind: Literal["Mcp.SessionProvider"]
    function: Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]
    """Import path `package.module:function`, called with no arguments before every request."""


RUN_KINDS: dict[str, type[KindDoc]] = {
    "Telo.Application": ApplicationDoc,
    "Ai.Text": TextDoc,
    "Ai.TextStream": TextStreamDoc,
    "Ai.AgentStream": AgentStreamDoc,
    "Mcp.ToolsCall": ToolsCallDoc,
    "Mcp.ToolsList": ToolsListDoc,
    "Mcp.SessionProvider": SessionProviderDoc,
    "Ai.Image": ImageDoc,
    "AiOpenai.OpenaiImageModel": OpenaiImageModelDoc,
    "McpServer.StdioServer": StdioServerDoc,
    "McpServer.HttpEndpoint": HttpEndpointDoc,
    "HttpServer.Server": HttpServerDoc,
    "McpServer.Tools": McpServerToolsDoc,
    "McpServer.Resources": McpServerResourcesDoc,
    "McpServer.Prompts": McpServerPromptsDoc,
}

ALL_KINDS: dict[str, type[KindDoc]] = {**KINDS, **RUN_KINDS, "Gateway": GatewayDoc}
"""Every kind a manifest may use, by its canonical `kind` string."""
