"""The manifest kinds: one closed pydantic model per `kind`.

Field names are camelCase in YAML (the models use snake_case attributes with camelCase
aliases) and every model forbids unknown fields, so a misspelt key is an error, not a silently
ignored one.

Three field types carry manifest-specific meaning:

- `RefTo("A", "B")` (used as `Annotated[Ref, RefTo(...)]`): a slot that holds a `!ref Name` to a
  document of one of the given kinds. A plain string there is an error (`ERR_MANIFEST_REF_FORM`);
  the kind check itself is the analyzer's, because it needs the other documents.
- `SecretText`: a string that may come from `${{ secrets.NAME }}` (a `Secret`). Every other
  string field refuses a secret (`ERR_MANIFEST_SECRET_PLACEMENT`), so a secret can only reach
  the places meant for it.
- `PlainJson`: free-form JSON (options, JSON Schemas, inline task tools); it may hold neither a
  `!ref`, a secret nor a `!cel` expression.
- `CelOrJson`: free-form JSON or a `!cel` expression evaluated at run time (`Ai.Tools` entries'
  `inputs` and `result`); never a `!ref` or a secret.

The JSON Schema of the whole format (`manifest_json_schema()`, printed by `toolbridge schema`)
is generated from these models.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from ._secrets import Secret
from ._yaml import Cel, Ref

__all__ = [
    "CLIENT_KINDS",
    "INVOCABLE_KINDS",
    "KINDS",
    "MODEL_KINDS",
    "PROVIDER_KINDS",
    "AgentDoc",
    "AgentToolSearch",
    "AnthropicModelDoc",
    "GeminiModelDoc",
    "HttpClientAuth",
    "HttpClientDoc",
    "KindDoc",
    "McpToolDoc",
    "OpenaiModelDoc",
    "RefTo",
    "RuntimeDoc",
    "ScriptedModelDoc",
    "SecretText",
    "SecretsDoc",
    "StdioClientDoc",
    "TaskToolSetDoc",
    "ToolProviderDoc",
    "ToolsDoc",
]

CLIENT_KINDS = ("Mcp.StdioClient", "Mcp.HttpClient")
MODEL_KINDS = (
    "AiOpenai.OpenaiModel",
    "AiAnthropic.AnthropicModel",
    "AiGoogle.GeminiModel",
    "Ai.ScriptedModel",
)
PROVIDER_KINDS = ("AiMcp.ToolProvider", "Ai.Tools", "Tasks.ToolSet")
INVOCABLE_KINDS = ("Ai.Text", "Ai.Agent", "Ai.Image", "Mcp.ToolsCall", "Mcp.ToolsList")
"""Kinds an `Ai.Tools` entry's `tool: !ref` may name (each runs to one complete result)."""
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]*$"


class RefTo:
    """Marks a `Ref` field with the kinds it accepts (see the module docstring)."""

    def __init__(self, *kinds: str) -> None:
        self.kinds = kinds

    def __get_pydantic_core_schema__(
        self, source: object, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        kinds = self.kinds

        def validate(value: object) -> Ref:
            if isinstance(value, Ref):
                return replace(value, accepts=kinds)
            raise _ref_form_error(value, kinds)

        return core_schema.no_info_plain_validator_function(validate)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "type": "string",
            "pattern": NAME_PATTERN,
            "description": f"`!ref Name` of a {' or '.join(self.kinds)} document",
            "x-toolbridge-ref": list(self.kinds),
        }


_REF_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)?$")


def _ref_form_error(value: object, kinds: tuple[str, ...]) -> PydanticCustomError:
    """Why `value` is not a reference, in Telo's terms (Telo refuses the same forms)."""
    wanted = " or ".join(kinds)
    if isinstance(value, str) and _REF_NAME_RE.match(value) and len(value) <= 120:
        return PydanticCustomError(
            "ref_form",
            "is a bare name; a reference to a {kinds} document is written `!ref {name}` "
            "(Telo refuses a bare name too: INVALID_REFERENCE_FORM)",
            {"kinds": wanted, "name": value},
        )
    if isinstance(value, Mapping) and isinstance(value.get("kind"), str):
        name = value.get("name")
        if isinstance(name, str) and _REF_NAME_RE.match(name) and len(name) <= 120:
            return PydanticCustomError(
                "ref_form",
                "is Telo's old `{kind, name}` reference form, which Telo refuses too "
                "(INVALID_REFERENCE_FORM): write `!ref {name}`",
                {"name": name},
            )
        if "name" not in value:
            return PydanticCustomError(
                "ref_form",
                "is an inline declaration (a mapping with `kind` and no `name`), which toolbridge does "
                "not take: declare the {kinds} as a document of its own and write `!ref Name`",
                {"kinds": wanted},
            )
    return PydanticCustomError(
        "ref_form", "must be a reference to a {kinds} document: write `!ref Name`", {"kinds": wanted}
    )


class _SecretTextType:
    def __get_pydantic_core_schema__(
        self, source: object, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        def validate(value: object) -> str | Secret:
            if isinstance(value, str | Secret):
                return value
            if isinstance(value, Ref):
                raise PydanticCustomError("ref_not_allowed", "does not take a reference")
            if isinstance(value, Cel):
                raise PydanticCustomError("cel_not_allowed", "does not take a `!cel` expression")
            raise PydanticCustomError("string_type", "Input should be a valid string")

        return core_schema.no_info_plain_validator_function(validate)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "description": 'may use "${{ secrets.NAME }}"'}


SecretText = Annotated[str | Secret, _SecretTextType()]
"""A string field that may hold a `Secret`."""


def _find_special(
    value: object, path: tuple[str | int, ...] = ()
) -> tuple[tuple[str | int, ...], Ref | Secret | Cel] | None:
    if isinstance(value, Ref | Secret | Cel):
        return path, value
    if isinstance(value, Mapping):
        for k, v in value.items():
            found = _find_special(v, (*path, k))
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _find_special(v, (*path, i))
            if found:
                return found
    return None


def _plain(value: object) -> object:
    found = _find_special(value)
    if found is not None:
        path, item = found
        if isinstance(item, Secret):
            raise PydanticCustomError(
                "secret_placement", "secrets are not allowed here", {"path": list(path)}
            )
        if isinstance(item, Cel):
            raise PydanticCustomError(
                "cel_not_allowed", "a `!cel` expression is not allowed here", {"path": list(path)}
            )
        raise PydanticCustomError("ref_not_allowed", "a `!ref` is not allowed here", {"path": list(path)})
    return value


def _cel_or_plain(value: object) -> object:
    if isinstance(value, Cel):
        return value
    if isinstance(value, Mapping):
        return {k: _cel_or_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cel_or_plain(v) for v in value]
    return _plain(value)


class _CelOrJsonType:
    def __get_pydantic_core_schema__(
        self, source: object, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(_cel_or_plain)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"description": 'JSON; any value may be a `!cel "expression"`'}


PlainJson = Annotated[object, AfterValidator(_plain)]
CelOrJson = Annotated[object, _CelOrJsonType()]
"""JSON whose values may be `!cel` expressions (evaluated at run time)."""
PlainObject = Annotated[dict[str, Any], AfterValidator(_plain)]
Effects = Literal["none", "read", "write", "host"]
PositiveInt = Annotated[int, Field(ge=1, strict=True)]
NonNegativeInt = Annotated[int, Field(ge=0, strict=True)]


class _Closed(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=False,
        frozen=True,
        arbitrary_types_allowed=True,
        use_attribute_docstrings=True,
        field_title_generator=lambda name, info: info.alias or name,
    )


class Metadata(_Closed):
    """Every document's `metadata`."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    """The document's name, used by `!ref Name`: letters, digits, `_` and `-`, not starting with a digit."""
    description: str | None = None
    """Free text for people."""


class KindDoc(_Closed):
    """Fields every document has."""

    kind: str
    metadata: Metadata

    @property
    def name(self) -> str:
        """The document's `metadata.name`."""
        return self.metadata.name


ClientMode = Literal["auto", "legacy", "modern"]
"""How a client negotiates the protocol revision with its server."""


class ClientInfo(_Closed):
    """How the client introduces itself to the server."""

    name: str
    version: str = "0.0.0"


class StdioClientDoc(KindDoc):
    """`Mcp.StdioClient`: an MCP server started as a child process, spoken to over stdio.

    The server runs in `cwd`, which is relative to the manifest's directory and defaults to it.
    """

    kind: Literal["Mcp.StdioClient"]
    command: SecretText
    """The program to run, looked up on `PATH`."""
    args: list[SecretText] = []
    """Its arguments; relative paths work from `cwd`."""
    env: dict[str, SecretText] | None = None
    """Environment variables for the server, added to the safe set (`HOME`, `LOGNAME`, `PATH`,
    `SHELL`, `TERM`, `USER`); the caller's other variables are not passed on."""
    inherit_env: bool = False
    """Pass the caller's whole environment to the server (plus `env`): an explicit opt-in."""
    cwd: str | None = None
    """The server's working directory, relative to the manifest (default: the manifest's directory)."""
    client_info: ClientInfo | None = None
    """Name and version announced to the server."""
    shutdown_grace_ms: NonNegativeInt = 5000
    """How long the server may take to exit after stdin closes, and again after SIGTERM."""
    mode: ClientMode = "auto"
    """Protocol negotiation: `auto` (probe `server/discover`, fall back to `initialize`), `legacy`
    (`initialize` only: no probe, for servers that log an error for it), `modern` (2026-07-28 only)."""


class HttpClientAuth(_Closed):
    """`auth:` of `Mcp.HttpClient`: OAuth 2.1 tokens the client obtains itself (when the server answers 401).

    `grant` is `authorizationCode` (a user; the headless authorizer, for servers that approve at
    once), `clientCredentials` (`clientId` + `clientSecret`) or `jwtBearer` (workload identity,
    RFC 7523: the platform's token from `assertionFile` or `assertionEnv`, no registration). DPoP
    (RFC 9449) is used as `dpop` says: `auto` (when the authorization server offers ES256),
    `always` or `off`.
    """

    grant: Literal["authorizationCode", "clientCredentials", "jwtBearer"] = "authorizationCode"
    """How tokens are obtained."""
    client_id: SecretText | None = None
    """A client id registered beforehand (needed by `clientCredentials`)."""
    client_secret: SecretText | None = None
    """Its secret (`clientCredentials`, or a confidential `authorizationCode` client)."""
    scope: str | None = None
    """Scopes to ask for (default: what the server asks for)."""
    issuer: str | None = None
    """The authorization server's issuer: credentials and assertions are only sent to it."""
    assertion_file: str | None = None
    """`jwtBearer`: the file the platform keeps the workload's JWT in (relative to the manifest),
    read afresh for every token request, at most 64 KiB."""
    assertion_env: str | None = None
    """`jwtBearer`: the environment variable holding the workload's JWT."""
    dpop: Literal["auto", "always", "off"] = "auto"
    """DPoP-bound tokens: `auto`, `always` or `off` (YAML reads a bare `off` as false: both work)."""

    @field_validator("dpop", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: Any) -> Any:
        if value is False:
            return "off"
        if value is True:
            return "always"
        return value

    @model_validator(mode="after")
    def _grant_needs(self) -> HttpClientAuth:
        assertions = [a for a in (self.assertion_file, self.assertion_env) if a is not None]
        if self.grant == "jwtBearer" and len(assertions) != 1:
            raise PydanticCustomError(
                "auth_assertion", "`jwtBearer` needs one of `assertionFile` and `assertionEnv`"
            )
        if self.grant != "jwtBearer" and assertions:
            raise PydanticCustomError(
                "auth_assertion", "`assertionFile`/`assertionEnv` go with `grant: jwtBearer`"
            )
        if self.grant == "clientCredentials" and (self.client_id is None or self.client_secret is None):
            raise PydanticCustomError(
                "auth_client", "`clientCredentials` needs `clientId` and `clientSecret`"
            )
        if self.client_secret is not None and self.client_id is None:
            raise PydanticCustomError("auth_client", "`clientSecret` needs `clientId`")
        if self.issuer is not None and not self.issuer.startswith(("https://", "http://")):
            raise PydanticCustomError("auth_issuer", "`issuer` must be an http(s) URL")
        return self


class HttpClientDoc(KindDoc):
    """`Mcp.HttpClient`: an MCP server over Streamable HTTP."""

    kind: Literal["Mcp.HttpClient"]
    url: SecretText
    """The server's MCP endpoint, e.g. `http://127.0.0.1:8000/mcp`."""
    headers: dict[str, SecretText] | None = None
    """HTTP headers sent with every request, e.g. `Authorization: "Bearer ${{ secrets.token }}"`."""
    client_info: ClientInfo | None = None
    """Name and version announced to the server."""
    mode: ClientMode = "auto"
    """Protocol negotiation: `auto`, `legacy` or `modern` (as on `Mcp.StdioClient`)."""
    protocol_version: Literal["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"] | None = (
        None
    )
    """The protocol era to speak: a version before 2026-07-28 uses the `initialize` handshake
    (the server's answer decides the exact version); `2026-07-28` speaks that version directly.
    Default: try 2026-07-28, fall back to the handshake."""
    session_provider: Annotated[Ref, RefTo("Mcp.SessionProvider")] | None = None
    """External session mode: every request carries the session id this provider returns, and
    the client never opens, renews or closes a session itself."""
    auth: HttpClientAuth | None = None
    """OAuth 2.1 tokens obtained by the client itself (grants, workload identity, DPoP)."""

    @model_validator(mode="after")
    def _one_way_to_negotiate(self) -> HttpClientDoc:
        if self.protocol_version is not None and self.mode != "auto":
            raise PydanticCustomError("protocol_choice", "give `protocolVersion` or `mode`, not both")
        return self


class ToolProviderDoc(KindDoc):
    """`AiMcp.ToolProvider`: a whole MCP server's tools, discovered at run time."""

    kind: Literal["AiMcp.ToolProvider"]
    client: Annotated[Ref, RefTo(*CLIENT_KINDS)]
    """The client whose server's tools are offered."""
    lock: str | None = None
    """A lock file written by `toolbridge lock MANIFEST` (relative to the manifest): only tools whose
    definitions match their pins (under the client's document name) are offered."""


class ToolProviderBinding(_Closed):
    """One entry of an agent's `toolProviders`."""

    provider: Annotated[Ref, RefTo(*PROVIDER_KINDS)]
    """The tool provider."""
    prefix: str = ""
    """Prepended to each tool name the model sees (`fs_` -> `fs_read_file`)."""
    include: list[str] | None = None
    """Only these bare tool names (before the prefix) are offered."""
    exclude: list[str] | None = None
    """Bare tool names never offered."""
    effects: Effects | None = None
    """What these tools may do, for a Runtime (undeclared: `write`)."""
    capabilities: list[str] | None = None
    """Capabilities a Runtime requires for these tools."""


class AgentToolSearch(_Closed):
    """`toolSearch:` of an `Ai.Agent` as an object (an integer is the `threshold` alone)."""

    threshold: Annotated[int, Field(ge=0, le=1_000_000, strict=True)] = 30
    """The search is on when the agent has more tools than this."""
    pinned: list[Annotated[str, Field(min_length=1, max_length=256)]] = []
    """Model-facing tool names always shown (never deferred)."""
    max_results: Annotated[int, Field(ge=1, le=50, strict=True)] = 10
    """The most matches one `find_tools` returns."""
    max_working_set: Annotated[int, Field(ge=1, le=10_000, strict=True)] = 32
    """The most tools `use_tools` calls keep shown (the most recently asked)."""
    native: Literal["bm25", "regex", "none"] = "bm25"
    """The provider's own search when the model has one (Anthropic): `bm25` (plain words),
    `regex`, or `none` (always the meta tools `find_tools` / `use_tools`)."""


class AgentDoc(KindDoc):
    """`Ai.Agent`: a model, its tools and its loop settings."""

    kind: Literal["Ai.Agent"]
    model: Annotated[Ref, RefTo(*MODEL_KINDS)]
    """The model."""
    system: str | None = None
    """The system prompt."""
    max_steps: PositiveInt = 8
    """The most model turns in one run."""
    on_max_steps: Literal["throw", "return"] = "throw"
    """At the step limit: fail (`throw`) or return the last text (`return`)."""
    on_tool_error: Literal["feedback", "throw"] = "feedback"
    """A failing tool: tell the model (`feedback`) or end the run (`throw`)."""
    max_parallel_tools: PositiveInt = 8
    """How many tool calls of one turn run at once."""
    options: PlainObject | None = None
    """Model options for every call (e.g. `temperature`)."""
    tool_providers: list[ToolProviderBinding] = []
    """Tool providers offered to the model."""
    tools: list[Annotated[Ref, RefTo("AiMcp.Tool")]] = []
    """Declared (governed) tools offered to the model."""
    tool_search: Annotated[int, Field(ge=0, le=1_000_000, strict=True)] | AgentToolSearch | None = None
    """Past this many tools, the model searches for the tools it needs instead of being shown all
    (`Agent(tool_search=...)`; default off; see docs/discovery.md): a threshold, or an object
    with `threshold`, `pinned`, `maxResults`, `maxWorkingSet` and `native` (`bm25`, `regex`,
    `none`: the provider's own search, Anthropic's, when the model has one)."""


class Prices(_Closed):
    """Model prices in micro-USD per million tokens."""

    input_per_million_micros: NonNegativeInt
    output_per_million_micros: NonNegativeInt
    cache_read_per_million_micros: NonNegativeInt | None = None
    """Input tokens read from the prompt cache (default: the input price)."""
    cache_write_per_million_micros: NonNegativeInt | None = None
    """Input tokens written to the prompt cache (default: the input price)."""


class OpenaiModelDoc(KindDoc):
    """`AiOpenai.OpenaiModel`: any OpenAI-compatible Chat Completions endpoint."""

    kind: Literal["AiOpenai.OpenaiModel"]
    model: str
    """The model name, e.g. `gpt-4o-mini`."""
    api_key: SecretText | None = None
    """The API key, normally `"${{ secrets.openaiApiKey }}"`."""
    base_url: SecretText | None = None
    """Any OpenAI-compatible endpoint (default: OpenAI's)."""
    options: PlainObject | None = None
    """Request options (camelCase or snake_case), e.g. `temperature`."""
    prices: Prices | None = None
    """What the model costs; the runtime's budget uses it."""
    max_retries: NonNegativeInt = 3
    """Retries on 429 and 5xx answers and connection failures, with backoff."""


class AnthropicModelDoc(KindDoc):
    """`AiAnthropic.AnthropicModel`: Claude over the Anthropic Messages API."""

    kind: Literal["AiAnthropic.AnthropicModel"]
    model: str
    """The model name, e.g. `claude-sonnet-5`."""
    api_key: SecretText | None = None
    """The API key, normally `"${{ secrets.anthropicApiKey }}"`."""
    base_url: SecretText | None = None
    """Another Messages API endpoint (default: Anthropic's)."""
    options: PlainObject | None = None
    """Request options (camelCase or snake_case), e.g. `maxTokens`, `temperature`."""
    prices: Prices | None = None
    """What the model costs; the runtime's budget uses it."""
    max_retries: NonNegativeInt = 3
    """Retries on 429, 529 and 5xx answers and connection failures, with backoff."""
    prompt_caching: bool = True
    """Mark the tool list and the system prompt for Anthropic's prompt cache."""


class GeminiModelDoc(KindDoc):
    """`AiGoogle.GeminiModel`: Gemini over the Gemini API."""

    kind: Literal["AiGoogle.GeminiModel"]
    model: str
    """The model name, e.g. `gemini-2.5-flash`."""
    api_key: SecretText | None = None
    """The API key, normally `"${{ secrets.geminiApiKey }}"`."""
    base_url: SecretText | None = None
    """Another Gemini API endpoint (default: Google's)."""
    options: PlainObject | None = None
    """Request options (camelCase or snake_case), e.g. `temperature`, `maxOutputTokens`."""
    prices: Prices | None = None
    """What the model costs; the runtime's budget uses it."""
    max_retries: NonNegativeInt = 3
    """Retries on 429 and 5xx answers and connection failures, with backoff."""


class ScriptedToolCall(_Closed):
    """One tool call of a scripted turn (model-facing tool name)."""

    name: str
    arguments: PlainObject = {}
    id: str | None = None


class ScriptedTurn(_Closed):
    """One scripted turn: tool calls or text."""

    tool_calls: list[ScriptedToolCall] | None = None
    text: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> ScriptedTurn:
        if self.tool_calls is None and self.text is None:
            raise PydanticCustomError("turn_shape", "a turn needs `toolCalls` or `text`")
        return self


class ScriptedModelDoc(KindDoc):
    """`Ai.ScriptedModel`: deterministic turns, for examples, tests and offline demos."""

    kind: Literal["Ai.ScriptedModel"]
    turns: Annotated[list[ScriptedTurn], Field(min_length=1)]
    """The turns, played in order; running out is an error."""


class ToolEntry(_Closed):
    """One entry of `Ai.Tools.tools`: another document of the manifest offered as a tool."""

    tool: Annotated[Ref, RefTo(*INVOCABLE_KINDS)]
    """What runs when the model calls the tool."""
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")] | None = None
    """The tool's name (default: the referenced document's name)."""
    description: str = ""
    """What the tool does, for the model."""
    parameters: PlainObject
    """JSON Schema of the arguments (an object); the model's arguments are validated against it."""
    inputs: dict[str, CelOrJson] | None = None
    """The inputs the tool's document receives; `!cel` values see `arguments`
    (default: the arguments themselves)."""
    result: CelOrJson = None
    """A `!cel` expression over `result` (and `arguments`) shaping what the model sees: a string,
    or content parts (`{type: text, text}`, `{type: image, data, mediaType}`)."""


class ToolsDoc(KindDoc):
    """`Ai.Tools`: tools from Python functions (`functions`) and from other documents (`tools`)."""

    kind: Literal["Ai.Tools"]
    functions: (
        Annotated[list[Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]], Field(min_length=1)]
        | None
    ) = None
    """Import paths `package.module:function`; each function becomes a tool of its name."""
    tools: Annotated[list[ToolEntry], Field(min_length=1)] | None = None
    """Telo's form: `{name, description, parameters, tool: !ref Doc, inputs?, result?}` entries."""

    @model_validator(mode="after")
    def _some_tools(self) -> ToolsDoc:
        if self.functions is None and self.tools is None:
            raise PydanticCustomError("tools_source", "give `functions`, `tools` or both")
        return self


class McpToolDoc(KindDoc):
    """`AiMcp.Tool`: one declared, governed MCP tool. Nothing is taken from the server."""

    kind: Literal["AiMcp.Tool"]
    id: str
    """The tool's id: its permission is `tool:<id>`; the model sees it (made model-legal)."""
    version: str
    """The tool's version, recorded in the journal."""
    description: str
    """What the tool does, for the model."""
    remote_name: str | None = None
    """The tool's name on the server (default: `id`)."""
    client: Annotated[Ref, RefTo(*CLIENT_KINDS)]
    """The client of the server that runs the tool."""
    input: PlainObject
    """JSON Schema of the arguments (an object)."""
    output: PlainObject
    """JSON Schema of the structured result (an object)."""
    effects: Effects
    """What the tool may do: `none`, `read`, `write` or `host`."""
    capabilities: list[str]
    """Capabilities a call requires (may be empty)."""
    cost_micros: NonNegativeInt = 0
    """What one call costs, in millionths of a USD."""
    timeout_ms: PositiveInt = 30000
    """The longest one call may take."""


class TaskToolSetDoc(KindDoc):
    """`Tasks.ToolSet`: JSON instruction tools, from a file (relative to the manifest) or inline."""

    kind: Literal["Tasks.ToolSet"]
    file: str | None = None
    """Path of a task-tools JSON file (`{"tools": [...]}`), relative to the manifest."""
    tools: list[PlainObject] | None = None
    """The tools inline, in the same format as the file's `tools`."""
    http_allow: list[str] = []
    """Hosts (`name` or `name:port`) the `http` action may reach."""
    mcp_servers: dict[str, Annotated[Ref, RefTo(*CLIENT_KINDS)]] = {}
    """MCP servers the `mcp` action may call, by the name the instructions use."""
    headless: bool = True
    """Run the browser without a window."""
    chromium: str | None = None
    """The Chromium executable (default: `$TOOLBRIDGE_CHROMIUM` or `/usr/bin/chromium`)."""
    default_timeout_ms: NonNegativeInt = 3000
    """How long element lookups retry."""
    browser_allow: list[str] = []
    """Where the browser may navigate: origins (`http://host:port`), hosts, `*`, `file:`..."""
    start_url: str | None = None
    """A page the browser opens when it starts (its origin is allowed)."""
    actions: list[str] = []
    """Actions of your own: `module`, `module:register`, or a `.py` file relative to the manifest."""

    @model_validator(mode="after")
    def _one_source(self) -> TaskToolSetDoc:
        if (self.file is None) == (self.tools is None):
            raise PydanticCustomError("toolset_source", "give exactly one of `file` or `tools`")
        return self


class Permissions(_Closed):
    """The runtime's allow list: exact strings such as `tool:fs.write`, `effect:write`, `model:scripted`."""

    allow: list[str] = []
    """Exact grants: `model:<id>`, `tool:<id>`, `effect:<effects>`, capability names."""


class Limits(_Closed):
    """Run limits; anything left out keeps the runtime's default."""

    max_steps: NonNegativeInt | None = None
    max_model_calls: NonNegativeInt | None = None
    max_tool_calls: NonNegativeInt | None = None
    max_duration_ms: PositiveInt | None = None
    max_input_bytes: NonNegativeInt | None = None
    max_output_bytes: NonNegativeInt | None = None
    max_context_bytes: NonNegativeInt | None = None
    max_cost_micros: NonNegativeInt | None = None
    guard_timeout_ms: PositiveInt | None = None
    tool_timeout_ms: PositiveInt | None = None


class RuntimeDoc(KindDoc):
    """`Runtime`: permissions, limits and the journal every agent of the manifest runs under."""

    kind: Literal["Runtime"]
    profile: Literal["ephemeral", "durable"] = "ephemeral"
    """`ephemeral` (journal in memory) or `durable` (an SQLite journal, written as things happen)."""
    permissions: Permissions = Permissions()
    """The allow list; nothing is allowed by default, not even the model."""
    limits: Limits | None = None
    """Run limits; anything left out keeps its default."""
    journal: SecretText | None = None
    """The durable profile's journal: an SQLite file relative to the manifest, or a PostgreSQL URL
    (`postgresql://...`; may use `${{ secrets.NAME }}` for one holding a password)."""

    @model_validator(mode="after")
    def _journal_for_durable(self) -> RuntimeDoc:
        if self.profile == "durable" and not self.journal:
            raise PydanticCustomError(
                "journal_required", "a durable runtime needs `journal: path/to/file.db`"
            )
        return self


class SecretsDoc(KindDoc):
    """`Secrets`: secret name -> the environment variable that holds its value."""

    kind: Literal["Secrets"]
    env: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")], str]
    """Secret name -> the environment variable holding its value."""


KINDS: dict[str, type[KindDoc]] = {
    "Mcp.StdioClient": StdioClientDoc,
    "Mcp.HttpClient": HttpClientDoc,
    "AiMcp.ToolProvider": ToolProviderDoc,
    "Ai.Agent": AgentDoc,
    "AiOpenai.OpenaiModel": OpenaiModelDoc,
    "AiAnthropic.AnthropicModel": AnthropicModelDoc,
    "AiGoogle.GeminiModel": GeminiModelDoc,
    "Ai.ScriptedModel": ScriptedModelDoc,
    "Ai.Tools": ToolsDoc,
    "AiMcp.Tool": McpToolDoc,
    "Tasks.ToolSet": TaskToolSetDoc,
    "Runtime": RuntimeDoc,
    "Secrets": SecretsDoc,
}
"""Every kind a manifest may use, by its `kind` string."""
