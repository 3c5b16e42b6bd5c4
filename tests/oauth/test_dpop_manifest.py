"""`Mcp.HttpClient`'s `auth:` in a manifest: workload identity and DPoP against `dpop_server.py`."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest
from test_dpop_client import Start, _log, _platform_jwt, dpop_server  # noqa: F401  (a fixture)

from toolbridge.manifest import check_manifest, load_manifest


def _manifest(tmp_path: Path, url: str, auth: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            kind: Mcp.HttpClient
            metadata: {{ name: Web }}
            url: {url}
            auth:
            """
        )
        + textwrap.indent(textwrap.dedent(auth), "  ")
    )
    return path


async def test_a_workload_identity_client_from_a_manifest(dpop_server: Start, tmp_path: Path) -> None:  # noqa: F811
    base = dpop_server()
    (tmp_path / "token").write_text(_platform_jwt(base))
    path = _manifest(tmp_path, f"{base}/mcp", "grant: jwtBearer\nassertionFile: token\n")
    async with load_manifest(path).open() as live:
        client = await live.build("Web")
        result = await client.call_tool("whoami", {})
    assert result["content"][0]["text"] == "ok"
    log = await asyncio.to_thread(_log, base)
    [token] = [e for e in log if e["at"] == "token"]
    assert token["grant"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" and token["bound"]
    assert {e["scheme"] for e in log if e["at"] == "mcp"} == {"DPoP"}


async def test_dpop_off_from_a_manifest(dpop_server: Start, tmp_path: Path) -> None:  # noqa: F811
    base = dpop_server()
    auth = "grant: clientCredentials\nclientId: c1\nclientSecret: s3cret\ndpop: off\n"
    path = _manifest(tmp_path, f"{base}/mcp", auth)
    async with load_manifest(path).open() as live:
        client = await live.build("Web")
        await client.call_tool("whoami", {})
    log = await asyncio.to_thread(_log, base)
    assert not any(e["proof"] for e in log)


@pytest.mark.parametrize(
    "auth",
    [
        "grant: jwtBearer\n",
        "grant: jwtBearer\nassertionFile: a\nassertionEnv: B\n",
        "assertionEnv: B\n",
        "grant: clientCredentials\nclientId: c1\n",
        "clientSecret: s\n",
        "dpop: sometimes\n",
        "issuer: ftp://as\n",
    ],
)
def test_a_wrong_auth_mapping_is_a_diagnostic(tmp_path: Path, auth: str) -> None:
    path = _manifest(tmp_path, "http://127.0.0.1:1/mcp", auth)
    diagnostics = check_manifest(path).diagnostics
    assert diagnostics and all(d.line >= 4 for d in diagnostics), diagnostics
