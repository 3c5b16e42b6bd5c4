"""An SDK `MCPServer` over Streamable HTTP whose tool list grows at run time, and that can restart.

Usage: `python growing_http_server.py PORT [--flap]`

Tools: `echo(text)`, and `add_tool(name)`, which registers a tool `name` (answering "I am <name>")
and announces the change the way `MCPServer` does: to `subscriptions/listen` streams on 2026-07-28
connections; on 2025-11-25 connections the server does not advertise `tools.listChanged` and sends
nothing, so the client is never told.

`--flap`: every `subscriptions/listen` stream is cut right after the server acknowledged it, as a
flapping proxy or server would (the client must not reopen such a stream forever).

SIGHUP restarts the server inside the process: every connection and stream is dropped and a fresh
`MCPServer` (without the added tools) serves the same port at once, as a restarted server would,
only faster than a new process. Each time the server is ready it prints `serving <n>` (n counts
the starts) on stdout.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer


class CutListenStreams:
    """ASGI middleware: a `subscriptions/listen` response ends right after its acknowledgment."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        messages, body, more = [], b"", True
        while more:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            more = message.get("more_body", False)
        replay = iter(messages)

        async def replayed() -> Any:
            return next(replay, None) or await receive()

        if b'"subscriptions/listen"' not in body:
            await self.app(scope, replayed, send)
            return
        with anyio.CancelScope() as cut:

            async def send_until_acknowledged(message: Any) -> None:
                if message["type"] == "http.response.body" and b"acknowledged" in message.get("body", b""):
                    await send({**message, "more_body": False})
                    cut.cancel()
                    return
                await send(message)

            await self.app(scope, replayed, send_until_acknowledged)


def build() -> MCPServer:
    server = MCPServer("growing")

    @server.tool()
    def echo(text: str) -> str:
        """Say it back."""
        return text

    async def add_tool(name: str, ctx: Context) -> str:
        """Register a new tool named `name`."""

        def new_tool() -> str:
            return f"I am {name}"

        server.add_tool(new_tool, name=name, description=f"Added at run time: {name}")
        await ctx.notify_tools_changed()  # reaches 2026-07-28 listen streams only
        return f"added {name}"

    server.add_tool(add_tool)
    return server


async def main(port: int, flap: bool) -> None:
    starts = 0
    while True:
        starts += 1
        app: Any = build().streamable_http_app()
        if flap:
            app = CutListenStreams(app)
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
        )
        server = uvicorn.Server(config)
        restart = False

        def on_hup(signum: int, frame: object, server: uvicorn.Server = server) -> None:
            nonlocal restart
            restart = True
            server.should_exit = True

        signal.signal(signal.SIGHUP, on_hup)

        async def announce(server: uvicorn.Server = server, number: int = starts) -> None:
            while not server.started:  # noqa: ASYNC110 - uvicorn offers no event for it
                await asyncio.sleep(0.01)
            print(f"serving {number}", flush=True)

        announcer = asyncio.create_task(announce())
        await server.serve()
        announcer.cancel()
        if not restart:
            return


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), "--flap" in sys.argv[2:]))
