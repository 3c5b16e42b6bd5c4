"""`toolbridge gateway MANIFEST`: serve a manifest's `Gateway` as one governed MCP server.

The manifest is checked completely first (a manifest `toolbridge check` rejects is refused:
one line on stderr, exit 1), then every upstream is built (started lazily, on the first
listing or call). Serving is over stdio by default (the client is the local user), or
Streamable HTTP at `http://HOST:PORT/mcp` with `--transport http` (clients are known by their
bearer tokens); `--stateless` serves HTTP without sessions, for replicas behind a load balancer.
Over HTTP, one line on stderr says where it listens once the port is bound
(`toolbridge gateway: serving NAME at http://127.0.0.1:PORT/mcp`; `--port 0` takes a free port
and shows it). Over stdio, the secrets only HTTP clients need (bearer tokens, OAuth settings) are
not required.

Secrets come from `--secret NAME=VALUE`, `--secrets-file FILE` and the environment, as for `run`.
`--print-config claude|vscode|cursor` starts nothing: it prints the JSON that client application
reads to start (stdio) or reach (`--transport http`) this gateway, with absolute paths and, over
HTTP, a placeholder for the token (never a secret's value).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import signal
import sys

import anyio
import anyio.abc

from ..errors import ConfigError
from ._manifest import _given_secrets, _secret_options
from ._output import emit, warn
from ._parsing import Subcommands

__all__ = ["register"]

log = logging.getLogger("toolbridge.gateway")


def register(subparsers: Subcommands) -> None:
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
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000; 0: any free port)")
    p.add_argument("--stateless", action="store_true", help="HTTP without sessions (for replicas)")
    _secret_options(p)
    p.add_argument(
        "--print-config",
        choices=("claude", "vscode", "cursor"),
        metavar="CLIENT",
        help="print the config of CLIENT (claude, vscode, cursor) for this gateway and exit",
    )
    p.set_defaults(handler=_gateway)


SIGTERM_GRACE_S = 5.0
"""Over HTTP, how long a SIGTERM lets uvicorn close its connections before serving is cancelled."""


async def _stop_on_sigterm(
    scope: anyio.CancelScope,
    grace_s: float = 0.0,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Cancel `scope` on SIGTERM (after `grace_s`), so that the gateway stops its upstreams and
    exits 0 instead of dying by the signal.

    Over HTTP uvicorn sees the signal too and shuts down gracefully; when it is done, serving ends
    by itself before the grace runs out. (Without this receiver, uvicorn re-raised the SIGTERM it
    had caught once it was done, and the default action ended the process before the upstreams
    were stopped.) Started with `tg.start`: the receiver is in place before uvicorn installs its own
    handler (which it puts back when it is done), so both hear the signal.
    """
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            await anyio.sleep(grace_s)
            scope.cancel()
            return


def _gateway(args: argparse.Namespace) -> int:
    from .. import _speedups
    from ..gateway import listening_url, open_gateway, serve_http, serve_stdio

    if not 0 <= args.port < 65536:
        raise ConfigError(f"--port {args.port} is not a TCP port", code="ERR_CONFIG")
    if args.print_config:
        return _print_config(args)
    secrets = _given_secrets(args)
    secrets_file = args.secrets_file

    async def main() -> None:
        async with open_gateway(
            args.manifest,
            name=args.name,
            secrets=secrets,
            secrets_file=secrets_file,
            transport=args.transport,
        ) as gateway:
            _tune_gc()
            log.info("gateway %s: event loop %s", gateway.name, _speedups.loop_name())
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

                def listening(host: str, port: int) -> None:
                    warn(f"toolbridge gateway: serving {gateway.name} at {listening_url(host, port)}")

                async with anyio.create_task_group() as tg:
                    await tg.start(_stop_on_sigterm, tg.cancel_scope, SIGTERM_GRACE_S)
                    await serve_http(
                        gateway,
                        host=args.host,
                        port=args.port,
                        stateless=args.stateless,
                        on_listening=listening,
                    )
                    tg.cancel_scope.cancel()

    # uvloop when installed (the `fast` extra) unless TOOLBRIDGE_SPEEDUPS=off (`toolbridge._speedups`)
    factory = _speedups.loop_factory()
    anyio.run(main, backend_options=None if factory is None else {"loop_factory": factory})
    return 0


def _tune_gc() -> None:
    """The garbage collector of a serving gateway: its start-up heap frozen, young collections rarer.

    - What the gateway built at start-up (modules, its catalog, schemas: about 68,000 objects)
      is left out of every later collection (`gc.freeze`): each full collection walked all of
      them, about 56 ms of CPU, a pause every call in flight waits for. Frozen objects are still
      freed by reference counting; only cycles among them would be kept.
    - The youngest generation is collected after 10,000 new objects instead of 700: with 32 HTTP
      clients, the objects of the calls in flight were traversed at every young collection and
      promoted, then traversed again by the middle generation's. The collector's CPU per call went
      from about 0.98 ms to 0.42 ms (bench/README.md); cyclic garbage waits a little longer (a few
      MiB at most).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


def _print_config(args: argparse.Namespace) -> int:
    """`--print-config CLIENT`: the client's config for this gateway, on stdout (nothing starts)."""
    from ..gateway import client_config, config_hint

    if args.secret:
        raise ConfigError(
            "--print-config writes no secret into a config: give the gateway's secrets with "
            "--secrets-file (its path goes into the config) or the client's environment",
            code="ERR_INVALID_INPUT",
        )
    config = client_config(
        args.print_config,
        args.manifest,
        name=args.name,
        transport=args.transport,
        host=args.host,
        port=args.port,
        secrets_file=args.secrets_file,
    )
    emit(json.dumps(config, indent=2, ensure_ascii=False))
    warn(
        config_hint(
            args.print_config, args.manifest, transport=args.transport, secrets_file=args.secrets_file
        )
    )
    return 0
