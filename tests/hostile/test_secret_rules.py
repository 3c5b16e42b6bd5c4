"""Secrets: what a stdio server sees, the redactor's rules, URLs, and OAuth's quiet failures."""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbridge import ConfigError, HttpClient, StdioClient, TransportError, load_manifest, register_secret
from toolbridge.redact import (
    REDACTED,
    RedactingStream,
    forget_secrets,
    redact,
    redact_metadata,
    redact_value,
    shorten_urls,
)

SERVER = Path(__file__).resolve().parent / "canary_server.py"
HOST_SECRETS = {"OPENAI_API_KEY": "sk-host-openai-0000", "AWS_SECRET_ACCESS_KEY": "aws-host-secret-1111"}


def _text(result: dict[str, object]) -> str:
    content = result["content"]
    assert isinstance(content, list)
    return str(content[0]["text"])


# ----------------------------------------------------------------------------- environment


async def test_a_stdio_server_gets_only_the_safe_set_and_what_is_declared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in HOST_SECRETS.items():
        monkeypatch.setenv(name, value)
    async with StdioClient(sys.executable, [str(SERVER)], env={"DECLARED": "yes-declared"}) as client:
        for name in HOST_SECRETS:
            assert _text(await client.call_tool("env", {"name": name})) == "<unset>"
        assert _text(await client.call_tool("env", {"name": "DECLARED"})) == "yes-declared"
        assert _text(await client.call_tool("env", {"name": "PATH"})) != "<unset>"  # `node` still found
    async with StdioClient(sys.executable, [str(SERVER)], env={"OPENAI_API_KEY": "given"}) as client:
        assert _text(await client.call_tool("env", {"name": "OPENAI_API_KEY"})) == "given"  # declared wins
    async with StdioClient(sys.executable, [str(SERVER)], inherit_env=True) as client:
        for name, value in HOST_SECRETS.items():
            assert _text(await client.call_tool("env", {"name": name})) == value  # the explicit opt-in


async def test_a_manifest_server_gets_the_safe_set_unless_inherit_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in HOST_SECRETS.items():
        monkeypatch.setenv(name, value)
    cases = ((None, "<unset>"), ("false", "<unset>"), ("true", HOST_SECRETS["OPENAI_API_KEY"]))
    for inherit, expected in cases:
        line = f"inheritEnv: {inherit}\n" if inherit else ""
        path = tmp_path / f"m-{inherit}.yaml"
        path.write_text(
            "kind: Mcp.StdioClient\nmetadata: { name: S }\n"
            f'command: "{sys.executable}"\nargs: ["{SERVER}"]\nenv: {{ DECLARED: "1" }}\n{line}'
        )
        async with load_manifest(path).open() as live:
            client = await live.build("S")
            assert _text(await client.call_tool("env", {"name": "OPENAI_API_KEY"})) == expected
            assert _text(await client.call_tool("env", {"name": "AWS_SECRET_ACCESS_KEY"})) in (
                "<unset>",
                HOST_SECRETS["AWS_SECRET_ACCESS_KEY"],
            )
            assert _text(await client.call_tool("env", {"name": "DECLARED"})) == "1"


def test_inherit_env_must_be_a_boolean_in_a_manifest(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("kind: Mcp.StdioClient\nmetadata: { name: S }\ncommand: x\ninheritEnv: [1]\n")
    with pytest.raises(ConfigError) as info:
        load_manifest(path)
    assert info.value.code == "ERR_MANIFEST_WRONG_TYPE"


# ----------------------------------------------------------------------------- the redactor


def test_registered_values_are_scrubbed_in_every_form() -> None:
    value = 'tok "en"/é&x=1'
    assert register_secret(value, name="T")
    assert redact(f"raw {value}") == f"raw {REDACTED}"
    assert REDACTED in redact(json.dumps({"v": value}))  # JSON-escaped (ensure_ascii)
    assert json.loads(redact(json.dumps({"v": value}))) == {"v": REDACTED}  # still valid JSON
    assert redact(repr(value)) == f"'{REDACTED}'"
    from urllib.parse import quote, quote_plus

    assert redact(f"?k={quote(value, safe='')}") == f"?k={REDACTED}"
    assert redact(f"?k={quote_plus(value)}") == f"?k={REDACTED}"


def test_a_value_ending_with_a_line_break_is_refused_by_name() -> None:
    for bad in ("abcdef\n", "abcdef\r\n", "abcdef\r"):
        with pytest.raises(ConfigError) as info:
            register_secret(bad, name="TOKEN_FILE")
        assert info.value.code == "ERR_SECRET_VALUE"
        assert "TOKEN_FILE" in info.value.message and "abcdef" not in info.value.message


def test_short_values_are_not_registered() -> None:
    assert register_secret("abc", name="tiny") is False
    assert redact("abc abc") == "abc abc"
    assert register_secret("abcd", name="four") is True
    assert redact("abcd") == REDACTED


def test_a_manifest_secret_short_or_with_a_line_break(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text('kind: Mcp.HttpClient\nmetadata: { name: H }\nurl: "http://h/${{ secrets.key }}"\n')
    with pytest.raises(ConfigError) as info:
        load_manifest(path, secrets={"key": "value-from-windows\r\n"})
    assert info.value.code == "ERR_MANIFEST_SECRET_VALUE"
    assert "key" in info.value.message and "value-from-windows" not in info.value.message
    manifest = load_manifest(path, secrets={"key": "ab"})
    assert [d.code for d in manifest.warnings] == ["ERR_MANIFEST_SECRET_SHORT"]


@given(st.text(min_size=4, max_size=40).filter(lambda v: not v.endswith(("\r", "\n"))), st.text(max_size=60))
def test_a_registered_value_never_survives_redaction(value: str, around: str) -> None:
    forget_secrets()
    register_secret(value)
    text = f"{around}{value}{around}"
    assert value not in redact(text) or value in REDACTED
    # nested values are scrubbed too (checked on the values themselves: the JSON text of a
    # harmless character can spell the secret, as "\x00" is written "\\u0000" and holds "0000")
    nested = redact_value({"k": [text], "t": (text,)})
    assert all(value not in part or value in REDACTED for part in [*nested["k"], *nested["t"]])


def test_errors_logs_and_streams_are_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    secret = "sk-unit-7a7a7a7a"
    register_secret(secret, name="UNIT")
    error = TransportError(f"server said {secret}", details={"command": f"run --key {secret}"})
    assert secret not in str(error) and secret not in repr(error) and secret not in json.dumps(error.details)
    caplog.set_level(logging.DEBUG)
    child = logging.getLogger("toolbridge.server.deep.child")  # a child logger: no filter of its own
    child.debug("argv %s", [secret])
    try:
        raise ValueError(secret)
    except ValueError:
        logging.getLogger("some.other.library").exception("failed with %s", secret)
    formatter = logging.Formatter("%(message)s %(exc_text)s")
    assert caplog.records and all(secret not in formatter.format(r) for r in caplog.records)
    buffer = io.StringIO()
    stream = RedactingStream(buffer)
    print(f"--json {secret}", file=stream)  # type: ignore[arg-type]
    assert buffer.getvalue() == f"--json {REDACTED}\n"
    data = redact_metadata({"tool_id": f"t-{secret}", "call_id": secret, "args_sha256": secret})
    assert data == {"tool_id": f"t-{REDACTED}", "call_id": secret, "args_sha256": secret}


def test_the_library_logger_has_a_null_handler() -> None:
    import toolbridge  # noqa: F401

    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("toolbridge").handlers)


# ----------------------------------------------------------------------------- URLs


def test_http_client_registers_its_credentials_and_shows_host_and_port_only() -> None:
    client = HttpClient(
        "https://me:p4ssw0rd-x@mcp.example.com:8443/k3y-in-the-path/mcp?api_key=query-key-1&v=1",
        headers={"Authorization": "Bearer bearer-token-9", "Accept-Language": "en-GB"},
    )
    assert repr(client) == "HttpClient(https://mcp.example.com:8443)"
    assert client._describe() == "HTTP server https://mcp.example.com:8443"
    assert redact("p4ssw0rd-x query-key-1 bearer-token-9") == f"{REDACTED} {REDACTED} {REDACTED}"
    assert redact("en-GB") == "en-GB"  # not a credential header
    assert shorten_urls("GET https://u:p@h.example:8/a/b?k=v done") == "GET https://h.example:8/… done"
    assert shorten_urls("https://h/a/b?k=v&z=1", keep_path=True) == f"https://h/a/b?k={REDACTED}&z={REDACTED}"


def test_an_invalid_url_is_not_echoed() -> None:
    with pytest.raises(ConfigError) as info:
        HttpClient("sk-not-a-url-0123456789")
    assert info.value.code == "ERR_INVALID_INPUT" and "sk-not-a-url" not in info.value.message


async def test_the_path_appears_only_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    caplog.set_level(logging.DEBUG)
    client = HttpClient(f"http://127.0.0.1:{port}/hosted-path-key/mcp?t=1", connect_timeout=5)
    with pytest.raises(TransportError) as info:
        async with client:
            await client.list_tools()
    assert "hosted-path-key" not in info.value.message and f"127.0.0.1:{port}" in info.value.message
    above = [r.getMessage() for r in caplog.records if r.levelno > logging.DEBUG]
    assert all("hosted-path-key" not in m for m in above)
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("hosted-path-key" in m and "t=***" in m for m in debug)


# ----------------------------------------------------------------------------- OAuth


def test_the_response_checker_leaves_oauth_exchanges_alone() -> None:
    from toolbridge.clients._http_limits import _is_mcp_request

    url = "http://127.0.0.1:1/mcp"
    rpc = httpx2.Request("POST", url, content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
    stream = httpx2.Request("GET", url, headers={"accept": "text/event-stream"})
    token = httpx2.Request("POST", "http://127.0.0.1:1/token", content=b"grant_type=client_credentials")
    registration = httpx2.Request("POST", "http://127.0.0.1:1/register", json={"client_name": "x"})
    metadata = httpx2.Request("GET", "http://127.0.0.1:1/.well-known/oauth-authorization-server")
    assert _is_mcp_request(rpc) and _is_mcp_request(stream)
    assert not any(_is_mcp_request(r) for r in (token, registration, metadata))
