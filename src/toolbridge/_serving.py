"""Serving an SDK server: over stdin/stdout (bounded lines) or Streamable HTTP with uvicorn.

The plumbing every server toolbridge serves shares: the task tools' server
(`toolbridge.tasks.server`) and the gateway (`toolbridge.gateway`). `run_stdio` goes through
`toolbridge._stdio_wire` (bounded lines, any kind of stdin, a Ctrl-C that never waits for a
read); `run_http` can bind the socket first and say which port it got (for port 0).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import ConfigError

if TYPE_CHECKING:
    from mcp.server import Server

__all__ = ["run_http", "run_stdio"]

log = logging.getLogger("toolbridge.serving")


async def run_stdio(server: Server[Any]) -> None:
    """Serve `server` over stdin/stdout until the client closes the connection (also the gateway's).

    Through `toolbridge._stdio_wire`: bounded lines, any kind of stdin, and a cancellation
    (Ctrl-C) that never waits for a read.
    """
    from ._stdio_wire import stdio_wire

    async with stdio_wire() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def run_http(
    app: Any, *, host: str, port: int, on_listening: Callable[[str, int], None] | None = None
) -> None:
    """Serve an ASGI app (the SDK's Streamable HTTP app) with uvicorn until interrupted.

    With `on_listening`, the socket is bound first and `on_listening(host, port)` is told the port
    it got (the real one for port 0) before serving starts; connections made from then on wait
    in the socket's backlog until uvicorn accepts them.
    """
    import uvicorn

    from . import _speedups

    # log_config=None: uvicorn's records reach the process's own handlers (the command line's
    # shows control characters as escapes) instead of a formatter of uvicorn's
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on", log_config=None, http=_http_protocol()
    )
    config.load()
    log.info(
        "serving HTTP with %s on %s",
        config.http_protocol_class.__name__,  # BoundedHttpToolsProtocol or H11Protocol
        _speedups.loop_name(),
    )
    if on_listening is None:
        await uvicorn.Server(config).serve()
        return
    sock = _bound_socket(host, port)
    try:
        on_listening(host, sock.getsockname()[1])
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()


def _http_protocol() -> Any:
    """uvicorn's HTTP protocol: httptools, its heads bounded as h11 bounds them
    (`toolbridge._httptools`), when installed (the `fast` extra) and the speedups are on
    (`toolbridge._speedups`); else h11."""
    from . import _speedups

    if _speedups.enabled():
        try:
            from ._httptools import BoundedHttpToolsProtocol
        except ImportError:  # no httptools
            pass
        else:
            return BoundedHttpToolsProtocol
    return "h11"


def _bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port`, listening (as uvicorn binds one).

    Raises:
        ConfigError: `ERR_CONFIG` when the address cannot be bound (in use, not this host's).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", code="ERR_CONFIG"
        ) from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
        sock.set_inheritable(True)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", code="ERR_CONFIG"
        ) from None
    except BaseException:
        sock.close()
        raise
    return sock
