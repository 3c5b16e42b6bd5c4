"""The mcp SDK's private parts toolbridge's client relies on, checked by name and parameters.

The client sends a call to the SDK session directly (`clients/_call_support.py`) and, in the rare
cases, finishes a 2026-07-28 input-required call with `Client._drive_input_required` and relists
after a `HEADER_MISMATCH` with `Client._relist_tool`, as `mcp.Client.call_tool` does. Those are
not public API: an SDK release that renames or reshapes them must fail here, with this message,
rather than in a user's rare call.
"""

from __future__ import annotations

import inspect

from mcp import Client
from mcp.client.session import ClientSession


def test_the_sdk_client_keeps_the_private_parts_the_direct_call_path_uses() -> None:
    drive = inspect.signature(Client._drive_input_required)
    assert list(drive.parameters) == ["self", "first", "retry"], f"mcp.Client._drive_input_required{drive}"
    relist = inspect.signature(Client._relist_tool)
    assert list(relist.parameters) == ["self", "name"], f"mcp.Client._relist_tool{relist}"
    call = inspect.signature(ClientSession.call_tool)
    for name in ("progress_callback", "input_responses", "request_state", "allow_input_required"):
        assert name in call.parameters, f"ClientSession.call_tool{call} lacks {name}"
