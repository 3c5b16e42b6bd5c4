"""What the gateway's OAuth mode costs per HTTP request: checking a token, in the same run.

    .venv/bin/python bench/bench_gateway_oauth.py [--checks N]

A loopback key server (in this process, a thread) publishes an RS256 and an ES256 key; the
verifiers of `toolbridge.gateway` check tokens the way `OAuthGate` does for each request:

- a JWT verified in full (`jwt_cache_s=0`: header, key, signature, claims by PyJWT), RS256 and ES256;
- the same JWT remembered (the default: a client's next requests within 30 s);
- an opaque token whose introspection answer is cached;

each against the baseline of the same run: comparing a static bearer token in constant time
(what the gateway does without OAuth). Medians of `--rounds` rounds of `--checks` checks each.
"""

from __future__ import annotations

import argparse
import hmac
import json
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from toolbridge.gateway import IntrospectionVerifier, JwtVerifier, OAuthSettings

RESOURCE = "http://127.0.0.1:1/mcp"


class KeyServer:
    """JWKS at /jwks and an introspection endpoint that says every token is active."""

    def __init__(self) -> None:
        self.keys = {
            "r1": (rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256"),
            "e1": (ec.generate_private_key(ec.SECP256R1()), "ES256"),
        }
        jwks = []
        for kid, (key, alg) in self.keys.items():
            item = json.loads(jwt.algorithms.get_default_algorithms()[alg].to_jwk(key.public_key()))
            jwks.append({**item, "kid": kid, "alg": alg, "use": "sig"})
        body = json.dumps({"keys": jwks}).encode()
        active = json.dumps({"active": True, "sub": "a", "aud": RESOURCE, "scope": "mcp"}).encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, data: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(body)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._send(active)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def token(self, kid: str) -> str:
        key, alg = self.keys[kid]
        now = int(time.time())
        claims = {"iss": self.url, "aud": RESOURCE, "sub": "a", "exp": now + 3600, "iat": now, "scope": "mcp"}
        return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})

    def __enter__(self) -> KeyServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


async def _per_check_us(check: Callable[[], Awaitable[Any]], n: int) -> float:
    await check()
    started = time.perf_counter()
    for _ in range(n):
        await check()
    return (time.perf_counter() - started) / n * 1e6


async def run(checks: int, rounds: int) -> dict[str, float]:
    """Median microseconds per check of each way, over `rounds` interleaved rounds."""
    with KeyServer() as srv:
        common = {"resource": RESOURCE, "issuer": srv.url, "jwks_url": f"{srv.url}/jwks"}
        full = JwtVerifier(OAuthSettings(**common, jwt_cache_s=0))
        remembered = JwtVerifier(OAuthSettings(**common))
        intro = IntrospectionVerifier(
            OAuthSettings(
                resource=RESOURCE,
                issuer=srv.url,
                introspection_url=f"{srv.url}/introspect",
                client_id="bench",
                client_secret="bench-secret",
            )
        )
        rs, es = srv.token("r1"), srv.token("e1")
        static = [(f"static-token-{i:04d}".encode(), f"c{i}") for i in range(3)]
        given = b"static-token-0002"

        async def compare() -> None:
            for token, _name in static:
                hmac.compare_digest(given, token)

        ways: dict[str, Callable[[], Awaitable[Any]]] = {
            "static bearer token (baseline)": compare,
            "JWT RS256, verified in full": lambda: full.check(rs),
            "JWT ES256, verified in full": lambda: full.check(es),
            "JWT RS256, remembered": lambda: remembered.check(rs),
            "opaque token, introspection cached": lambda: intro.check("opaque-token"),
        }
        samples: dict[str, list[float]] = {name: [] for name in ways}
        try:
            for _ in range(rounds):
                for name, check in ways.items():
                    samples[name].append(await _per_check_us(check, checks))
        finally:
            for v in (full, remembered, intro):
                await v.aclose()
    return {name: statistics.median(values) for name, values in samples.items()}


def render(results: dict[str, float]) -> str:
    base = results["static bearer token (baseline)"]
    lines = [f"{'per request':40} {'us/check':>10} {'x baseline':>11}"]
    for name, us in results.items():
        lines.append(f"{name:40} {us:10.1f} {us / base if base else float('nan'):11.1f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(render(anyio.run(run, args.checks, args.rounds)))


if __name__ == "__main__":
    main()
