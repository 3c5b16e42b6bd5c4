"""fastmcp's proxy of server-everything, the peer of `bench/bench_gateway.py` (runs in bench/.venvs/fastmcp).

    python fastmcp_proxy.py EVERYTHING_JS stdio
    python fastmcp_proxy.py EVERYTHING_JS http PORT

fastmcp 4.1.6 has `fastmcp.server.create_proxy` (what `FastMCP.as_proxy` became): the proxy is
built the way its documentation recommends, from a stdio client of the backend (kept alive between
sessions), with no policy of any kind.
"""

from __future__ import annotations

import sys

from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy


def main() -> None:
    everything, transport = sys.argv[1], sys.argv[2]
    backend = Client(StdioTransport(command="node", args=[everything, "stdio"], keep_alive=True))
    proxy = create_proxy(backend, name="fastmcp-proxy")
    if transport == "stdio":
        proxy.run(show_banner=False)
    else:
        proxy.run(transport="http", host="127.0.0.1", port=int(sys.argv[3]), show_banner=False)


if __name__ == "__main__":
    main()
