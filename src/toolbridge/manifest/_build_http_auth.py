"""`Mcp.HttpClient`'s `auth:` built into the `httpx2.Auth` of `toolbridge.clients` (see `HttpClientAuth`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._kinds import HttpClientAuth

__all__ = ["http_auth"]


def http_auth(auth: HttpClientAuth, url: str, base: Path, reveal: Callable[[Any], Any]) -> Any:
    """The client's auth object: the grant `auth.grant` names, with `auth.dpop`.

    Args:
        auth: the validated `auth:` mapping.
        url: the MCP endpoint (revealed).
        base: the manifest's directory (`assertionFile` is relative to it).
        reveal: turns a `Secret` into its value (only while building).
    """
    from ..clients import (
        assertion_from_env,
        assertion_from_file,
        client_credentials_auth,
        oauth_auth,
        workload_identity_auth,
    )

    client_id = reveal(auth.client_id) if auth.client_id is not None else None
    client_secret = reveal(auth.client_secret) if auth.client_secret is not None else None
    if auth.grant == "jwtBearer":
        source = (
            assertion_from_file(base / auth.assertion_file)
            if auth.assertion_file is not None
            else assertion_from_env(str(auth.assertion_env))
        )
        return workload_identity_auth(
            url, assertion=source, client_id=client_id, scope=auth.scope, issuer=auth.issuer, dpop=auth.dpop
        )
    if auth.grant == "clientCredentials":
        return client_credentials_auth(
            url,
            client_id=str(client_id),
            client_secret=client_secret,
            scope=auth.scope,
            issuer=auth.issuer,
            dpop=auth.dpop,
        )
    return oauth_auth(url, client_id=client_id, client_secret=client_secret, scope=auth.scope, dpop=auth.dpop)
