"""`toolbridge gateway MANIFEST`: serve a manifest's `Gateway` as one governed MCP server.

The manifest is checked completely first (a manifest `toolbridge check` rejects is refused:
one line on stderr, exit 1), then every upstream is built (started lazily, on the first
listing or call). Serving is over stdio by default (the client is the local user), or
Streamable HTTP at `http://HOST:PORT/mcp` with `--transport http` (clients are known by their
bearer tokens); `--stateless` serves HTTP without sessions, for replicas behind a load balancer.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

import anyio

from ..errors import ConfigError

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the `gateway` command."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "gateway",
        help="serve a manifest's Gateway: many MCP servers as one governed MCP server",
        description="Serve the Gateway document of MANIFEST as one MCP server (stdio or Streamable HTTP).",
    )
    p.add_argument("manifest", metavar="MANIFEST", help="the manifest file")
    p.add_argument("--name", help="the Gateway document to serve (default: the only one)")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    p.add_argument("--stateless", action="store_true", help="HTTP without sessions (for replicas)")
    p.add_argument("--secrets-file", metavar="FILE", help="secret values (KEY=VALUE lines, YAML or JSON)")
    p.set_defaults(handler=_gateway)


async def _stop_on_sigterm(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


def _gateway(args: argparse.Namespace) -> int:
    from ..gateway import open_gateway, serve_http, serve_stdio

    if not 0 < args.port < 65536:
        raise ConfigError(f"--port {args.port} is not a TCP port", code="ERR_CONFIG")

    async def main() -> None:
        async with open_gateway(args.manifest, name=args.name, secrets_file=args.secrets_file) as gateway:
            if args.transport == "stdio":
                # SIGTERM ends serving like a closed stdin: the upstreams are stopped on the way out
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_stop_on_sigterm, tg.cancel_scope)
                    await serve_stdio(gateway)
                    tg.cancel_scope.cancel()
            else:
                if gateway.anonymous is not None:
                    print(
                        f"toolbridge: warning: gateway {gateway.name} has no client tokens: "
                        "every HTTP client is 'anonymous' under the runtime's grants",
                        file=sys.stderr,
                    )
                await serve_http(gateway, host=args.host, port=args.port, stateless=args.stateless)

    anyio.run(main)
    return 0
