"""The client under test for the official MCP conformance suite (`conformance client --command ...`).

The runner starts a scenario server, then runs this script with the server's URL as the last
argument and the scenario's name in `MCP_CONFORMANCE_SCENARIO` (some auth scenarios add a JSON
object in `MCP_CONFORMANCE_CONTEXT`). The script does what the scenario expects of a client and
exits 0; any failure exits non-zero with one line on stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import httpx2
import mcp_types as types

from toolbridge.clients import HttpClient
from toolbridge.clients._oauth import (
    client_credentials_auth,
    id_jag_from_idp,
    identity_assertion_auth,
    oauth_auth,
)
from toolbridge.clients._workload import workload_identity_auth

CIMD_URL = "https://conformance-test.local/client-metadata.json"


async def accept_defaults(params: types.ElicitRequestParams) -> types.ElicitResult:
    """SEP-1034: accept a form request with the defaults its schema declares."""
    schema: Any = getattr(params, "requested_schema", None) or {}
    if hasattr(schema, "model_dump"):
        schema = schema.model_dump(by_alias=True, exclude_none=True)
    content = {k: v["default"] for k, v in schema.get("properties", {}).items() if "default" in v}
    return types.ElicitResult(action="accept", content=content)


async def authorization_server_of(url: str) -> str:
    """The MCP server's authorization server, from its protected-resource metadata.

    Only for the SEP-990 scenario, where the authorization server is configuration: this script
    plays the deployment that knows it.
    """
    parsed = httpx2.URL(url)
    prm = f"{parsed.scheme}://{parsed.netloc.decode()}/.well-known/oauth-protected-resource{parsed.path}"
    async with httpx2.AsyncClient(timeout=10.0) as http:
        response = await http.get(prm)
        response.raise_for_status()
        return str(response.json()["authorization_servers"][0])


async def make_auth(scenario: str, url: str, context: dict[str, Any]) -> httpx2.Auth | None:
    if not scenario.startswith("auth/"):
        return None
    if scenario in ("auth/cross-app-access-complete-flow", "auth/enterprise-managed-authorization"):
        return identity_assertion_auth(
            url,
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            issuer=await authorization_server_of(url),
            assertion_provider=id_jag_from_idp(
                context["idp_token_endpoint"], context["idp_id_token"], client_id=context.get("idp_client_id")
            ),
        )
    if scenario == "auth/wif-jwt-bearer":
        jwt = context["valid_jwt"]

        async def platform_token(audience: str) -> str:
            return str(jwt)

        return workload_identity_auth(url, client_id=context.get("client_id"), assertion=platform_token)
    if scenario == "auth/client-credentials-basic":
        return client_credentials_auth(
            url, client_id=context["client_id"], client_secret=context["client_secret"]
        )
    if scenario == "auth/client-credentials-jwt":
        return client_credentials_auth(
            url,
            client_id=context["client_id"],
            private_key_pem=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm", "ES256"),
        )
    if "client_id" in context:
        return oauth_auth(url, client_id=context["client_id"], client_secret=context.get("client_secret"))
    return oauth_auth(url, client_metadata_url=CIMD_URL)


async def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    auth = await make_auth(scenario, url, context)
    async with HttpClient(url, auth=auth, elicitation_handler=accept_defaults, timeout=30) as client:
        if scenario == "initialize":
            await client.list_tools()
        elif scenario == "tools_call":
            await client.list_tools()
            await client.call_tool("add_numbers", {"a": 5, "b": 3})
        elif scenario == "elicitation-sep1034-client-defaults":
            await client.call_tool("test_client_elicitation_defaults", {})
        elif scenario == "sse-retry":
            await client.call_tool("test_reconnection", {})
        elif scenario.startswith("auth/"):
            tools = await client.list_tools()
            if tools:
                await client.call_tool(tools[0].name, {})
        elif scenario == "json-schema-2020-12-preservation":
            # The scenario: echo the focal tool's inputSchema, as toolbridge listed it, through
            # the echo tool (the server compares it with the schema it sent).
            tools = {tool.name: tool for tool in await client.list_tools()}
            focal = tools["json_schema_2020_12_tool"].input_schema
            await client.call_tool("json_schema_echo", {"schema": focal})
        elif "toolCalls" in context:
            # The scenario names its calls and their arguments (http-custom-headers: SEP-2243
            # Mcp-Param-* headers, mirrored from the listed tool's x-mcp-header parameters).
            await client.list_tools()
            for call in context["toolCalls"]:
                await client.call_tool(call["name"], call["arguments"])
        else:
            # The 2026-07-28 scenarios without a handler of their own: list the tools and call
            # each one, with arguments made from its schema (an error fails that call only).
            for tool in await client.list_tools():
                try:
                    await client.call_tool(tool.name, sample_arguments(tool.input_schema))
                except Exception as exc:
                    print(f"{tool.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 0


def sample_arguments(schema: Any) -> dict[str, Any]:
    """Arguments for a tool: each property's default, else a value of its type."""
    if hasattr(schema, "model_dump"):
        schema = schema.model_dump(by_alias=True, exclude_none=True)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    samples = {"string": "x", "integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}}
    arguments: dict[str, Any] = {}
    for name, spec in (properties or {}).items():
        if not isinstance(spec, dict):
            continue
        if "default" in spec:
            arguments[name] = spec["default"]
        elif isinstance(spec.get("enum"), list) and spec["enum"]:
            arguments[name] = spec["enum"][0]
        elif isinstance(spec.get("type"), str):
            arguments[name] = samples.get(spec["type"], "x")
    return arguments


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except Exception as exc:
        print(f"conformance client failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
