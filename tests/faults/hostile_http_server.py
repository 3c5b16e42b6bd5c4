"""A deliberately misbehaving MCP server over Streamable HTTP (Starlette + uvicorn).

Run: `python hostile_http_server.py PORT`; the endpoint is `http://127.0.0.1:PORT/mcp`. It writes
JSON-RPC by hand (it is the misbehaving peer), is stateless (no session id), answers
`server/discover` with "method not found" so clients fall back to `initialize`, and answers each
request with a JSON body or, when the tool's `sse` argument is true, with an SSE stream.

Tools (arguments in `arguments`):

* `echo {text}` -> the text.
* `big {size, sse}` -> a text result of exactly `size` characters (same payload as the stdio
  hostile server).
* `malformed {sse}` -> a truncated JSON-RPC answer carrying the request's id.
* `notify {sse}` -> (SSE) a log notification event, then the answer "after notification".
* `endless {size}` -> (SSE) one event whose data line grows to `size` bytes and never ends; the
  stream then stays open for 30 s.
* `deep {depth, sse}` -> a result whose `structuredContent` nests `depth` arrays.

At `/odd/mcp` the same server lists, beside those tools, hostile_server.py's `ODD_SCHEMA_TOOLS`
(tool definitions the SDK's types refuse); calling `no_schema` or `null_schema` answers
"ran <name>".
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from hostile_server import ODD_SCHEMA_TOOLS  # the script's folder is on sys.path
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

PATTERN = "0123456789abcdefghijklmnopqrstuvwxyz"
TOOLS = ["echo", "big", "malformed", "notify", "endless", "deep"]


def payload(size: int) -> str:
    return (PATTERN * (size // len(PATTERN) + 1))[:size]


def dumps(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def answer(body: bytes, sse: bool) -> Response:
    if not sse:
        return Response(body, media_type="application/json")

    async def events() -> AsyncIterator[bytes]:
        yield b"event: message\ndata: " + body + b"\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


async def call(request_id: Any, name: str, args: dict[str, Any]) -> Response:
    sse = bool(args.get("sse"))
    if name == "echo":
        text = str(args.get("text", ""))
        return answer(dumps({"jsonrpc": "2.0", "id": request_id, "result": _text(text)}), sse)
    if name == "big":
        body = dumps({"jsonrpc": "2.0", "id": request_id, "result": _text(payload(int(args["size"])))})
        return answer(body, sse)
    if name == "malformed":
        rid = json.dumps(request_id).encode()
        return answer(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"content":[{"ty', sse)
    if name == "notify":
        params = {"level": "info", "data": "hi"}
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}

        async def notified() -> AsyncIterator[bytes]:
            yield b"event: message\ndata: " + dumps(note) + b"\n\n"
            reply = {"jsonrpc": "2.0", "id": request_id, "result": _text("after notification")}
            yield b"event: message\ndata: " + dumps(reply) + b"\n\n"

        return StreamingResponse(notified(), media_type="text/event-stream")
    if name == "endless":
        size = int(args.get("size", 50_000_000))

        async def endless() -> AsyncIterator[bytes]:
            head = b'event: message\ndata: {"jsonrpc":"2.0","id":' + json.dumps(request_id).encode()
            yield head + b',"result":{"content":[{"type":"text","text":"'
            block = b"x" * (1 << 20)
            for _ in range(size // len(block)):
                yield block
            await asyncio.sleep(30)

        return StreamingResponse(endless(), media_type="text/event-stream")
    if name == "deep":
        depth = int(args.get("depth", 1000))
        nested = b"[" * depth + b"]" * depth
        rid = json.dumps(request_id).encode()
        body = b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"content":[],"structuredContent":{"v":'
        return answer(body + nested + b"}}}", sse)
    error = {"code": -32602, "message": f"no tool {name}"}
    return answer(dumps({"jsonrpc": "2.0", "id": request_id, "error": error}), sse)


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


async def mcp(request: Request) -> Response:
    return await serve(request, odd=False)


async def mcp_odd(request: Request) -> Response:
    return await serve(request, odd=True)


async def serve(request: Request, *, odd: bool) -> Response:
    if request.method != "POST":
        return Response(status_code=405)
    message = json.loads(await request.body())
    request_id = message.get("id")
    method = message.get("method")
    if request_id is None:
        return Response(status_code=202)
    if method == "initialize":
        result = {
            "protocolVersion": message.get("params", {}).get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile-http", "version": "1.0"},
        }
        return answer(dumps({"jsonrpc": "2.0", "id": request_id, "result": result}), False)
    if method == "tools/list":
        tools = [{"name": n, "description": n, "inputSchema": {"type": "object"}} for n in TOOLS]
        if odd:
            tools.extend(ODD_SCHEMA_TOOLS)
        return answer(dumps({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}}), False)
    if method == "tools/call":
        params = message.get("params", {})
        if odd and params.get("name") in ("no_schema", "null_schema"):
            body = {"jsonrpc": "2.0", "id": request_id, "result": _text(f"ran {params['name']}")}
            return answer(dumps(body), False)
        return await call(request_id, params.get("name"), params.get("arguments") or {})
    error = {"code": -32601, "message": "Method not found"}
    return answer(dumps({"jsonrpc": "2.0", "id": request_id, "error": error}), False)


app = Starlette(
    routes=[
        Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]),
        Route("/odd/mcp", mcp_odd, methods=["GET", "POST", "DELETE"]),
    ]
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
