"""Built-in actions that need no browser: `wait`, `http`, `mcp` and `result`.

- `wait {ms}` (0..600000) waits; no result.
- `http {url, method?, headers?, json?, body?, timeout?}` (GET, 10000 ms) gives
  `{status, headers, body}`.
- `mcp {server, tool, arguments?, timeout?}` (60000 ms) gives the tool's structured content, or
  `{text}` from its text content (images become content blocks of the task result).
- `result {value}` gives `value` (any JSON, after substitution), which becomes the task's result.

`http` reaches only hosts on the server's allow list (`TaskServices.http_allow`, from
`serve-tasks --allow-host`); an entry is a host name (any port) or `host:port`. The request runs
on an async HTTP client (httpx2, the MCP SDK's; no worker thread) under one total deadline,
`timeout`, for connecting, sending and reading the whole body: a server that drip-feeds its
answer is cut off then, and nothing is left reading. Redirects are not followed (a redirect to
a host off the list would escape it), proxies and credentials from the environment are not
used; a JSON response body is parsed, any other is returned as text (at most 1 MB).
A status of 400 or more fails the instruction, so its `catchInstruction` can handle it.

`mcp` calls a tool on one of the servers configured for the tool set, by name, through
toolbridge's own clients (`StdioClient`, `HttpClient`): one connection per server, opened by the
first call and closed with the tool set. A result with `isError` fails the instruction
with the server's text.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import anyio
from pydantic import Field

from ...content import TextPart, parts_from_mcp, to_json_text
from ...errors import McpTimeoutError, ToolbridgeError, ToolError, bounded
from ._context import ActionContext
from ._registry import _DEFAULT, ActionParams, ActionResult, action

__all__ = ["HttpParams", "McpParams", "ResultParams", "WaitParams"]

_MAX_BODY = 1_000_000


class WaitParams(ActionParams):
    """`{ms}`."""

    ms: int = Field(ge=0, le=600_000)


class HttpParams(ActionParams):
    """`{url, method?, headers?, json?, body?, timeout?}`."""

    url: str = Field(min_length=1)
    method: str = Field(default="GET", pattern=r"^(GET|POST|PUT|PATCH|DELETE|HEAD)$")
    headers: dict[str, str] = Field(default_factory=dict)
    json_body: Any = Field(default=None, alias="json")
    body: str | None = None
    timeout: int = Field(default=10_000, ge=1, le=120_000)


class McpParams(ActionParams):
    """`{server, tool, arguments?, timeout?}`."""

    server: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    timeout: int = Field(default=60_000, ge=1, le=600_000)


class ResultParams(ActionParams):
    """`{value}`: any JSON value."""

    value: Any


@action("wait", params=WaitParams, registry=_DEFAULT)
async def wait(params: WaitParams, ctx: ActionContext) -> None:
    """Wait `ms` milliseconds."""
    await anyio.sleep(params.ms / 1000)


def _host_allowed(url: str, allow: frozenset[str]) -> tuple[bool, str]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(f"http: {url!r} is not an http(s) URL", code="ERR_TOOL_ACTION_FAILED")
    host = parts.hostname.lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return (host in allow or f"{host}:{port}" in allow), f"{host}:{port}"


async def _do_request(params: HttpParams) -> dict[str, Any]:
    """One request on an async client: no redirects, no proxies or .netrc from the environment,
    the body read up to `_MAX_BODY` bytes. The caller bounds the whole exchange in time."""
    import httpx2 as httpx

    headers = dict(params.headers)
    content: bytes | None = None
    if params.json_body is not None:
        content = json.dumps(params.json_body).encode()
        headers.setdefault("Content-Type", "application/json")
    elif params.body is not None:
        content = params.body.encode()
    timeout = httpx.Timeout(params.timeout / 1000)
    try:
        async with (
            httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=timeout) as client,
            client.stream(params.method, params.url, headers=headers, content=content) as response,
        ):
            raw = bytearray()
            async for chunk in response.aiter_raw():
                raw.extend(chunk)
                if len(raw) > _MAX_BODY:
                    break
            status = response.status_code
            out_headers = {k.lower(): v for k, v in response.headers.items()}
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ToolError(
            f"http {params.method} {_shown(params.url)}: {bounded(reason, 300)}",
            code="ERR_TOOL_ACTION_FAILED",
        ) from None
    text = bytes(raw[:_MAX_BODY]).decode("utf-8", errors="replace")
    body: Any = text
    if "json" in out_headers.get("content-type", ""):
        try:
            body = json.loads(text)
        except ValueError:
            body = text
    return {"status": status, "headers": out_headers, "body": body}


def _shown(url: str) -> str:
    """The URL without userinfo or query (they may hold credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


@action("http", params=HttpParams, registry=_DEFAULT)
async def http(params: HttpParams, ctx: ActionContext) -> dict[str, Any]:
    """Send an HTTP request to a host on the allow list; a status of 400 or more fails."""
    allowed, where = _host_allowed(params.url, ctx.services.http_allow)
    if not allowed:
        raise ToolError(
            f"http: host {where} is not on this server's allow list (serve-tasks --allow-host HOST adds it)",
            code="ERR_TOOL_ACTION_FAILED",
        )
    try:
        with anyio.fail_after(params.timeout / 1000):
            result = await _do_request(params)
    except TimeoutError:
        raise ToolError(
            f"http {params.method} {_shown(params.url)}: no complete answer within {params.timeout} ms",
            code="ERR_TOOL_ACTION_FAILED",
        ) from None
    if result["status"] >= 400:
        raise ToolError(
            f"http {params.method} {_shown(params.url)} answered {result['status']}: "
            f"{bounded(to_json_text(result['body']), 300)}",
            code="ERR_TOOL_ACTION_FAILED",
        )
    return result


@action("mcp", params=McpParams, registry=_DEFAULT)
async def mcp(params: McpParams, ctx: ActionContext) -> ActionResult:
    """Call a tool on another configured MCP server; its structured content (or content) is the result."""
    client = ctx.services.mcp_client(params.server)
    where = f"{params.server}.{params.tool}"
    try:
        result = await client.call_tool(params.tool, params.arguments, timeout=params.timeout / 1000)
    except McpTimeoutError:
        raise ToolError(
            f"mcp: {where} gave no answer within {params.timeout} ms", code="ERR_TOOL_ACTION_FAILED"
        ) from None
    except ToolbridgeError as exc:
        raise ToolError(
            f"mcp: calling {where} failed: {exc.message}", code="ERR_TOOL_ACTION_FAILED"
        ) from None
    blocks = [b for b in result.get("content", []) if isinstance(b, dict)]
    if result.get("isError"):
        text = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text") or to_json_text(
            blocks
        )
        raise ToolError(
            f"mcp: {where} failed: {bounded(text, 1000)}",
            code="ERR_TOOL_ACTION_FAILED",
            server_text=text,
        )
    if result.get("structuredContent") is not None:
        return ActionResult(value=result["structuredContent"])
    parts = parts_from_mcp(blocks)
    if parts is None:  # resource links, embedded resources: pass the blocks through
        return ActionResult(value={"content": blocks})
    text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
    media = tuple(p for p in parts if not isinstance(p, TextPart))
    return ActionResult(value={"text": text}, parts=media)


@action("result", params=ResultParams, registry=_DEFAULT)
async def result(params: ResultParams, ctx: ActionContext) -> ActionResult:
    """Make `value` (after substitution) the task's result."""
    return ActionResult(value=params.value, sets_task_result=True)
