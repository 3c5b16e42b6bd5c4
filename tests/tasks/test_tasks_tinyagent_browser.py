"""TinyAgent's action library on Playwright, against pages of our own (issue 18), in real Chromium.

`site/users.html` is a form made like the TinyVue one of TinyAgent's demo (a sex popper, a TinyVue
style date picker, a Save button that posts to `/api/users`); `site/router.html` is a Vue app root
with a router behaving like Vue Router 3 (`?v=3`) or 4. `tinyagent/users-tool.json` is a tool file
of our own written the way TinyAgent's demo file is: served by `toolbridge serve-tasks` and called
with the official MCP client, elicitation included.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters

from toolbridge.tasks import TaskToolSet

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

HERE = Path(__file__).resolve().parent
USERS_TOOL = HERE / "tinyagent" / "users-tool.json"


def instr(action: str, **params: Any) -> dict[str, Any]:
    return {"action": action, "params": params}


def tool(name: str, *instructions: dict[str, Any], props: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "name": name,
        "inputSchema": {"type": "object", "properties": {p: {} for p in props}},
        "task": {"instructions": list(instructions)},
    }


TOOLS = {
    "tools": [
        tool("open", instr("goto", url="{{url}}"), props=("url",)),
        tool("text", instr("getText", selector="{{selector}}"), props=("selector",)),
        tool("value", instr("findDom", selector="{{selector}}"), props=("selector",)),
        tool(
            "pick_date",
            instr("click", selector=".user-date input"),
            instr("selectDate", selector=".user-date-popper", date="{{date}}", timeout=3000),
            props=("date",),
        ),
        tool("fill_date", instr("selectDate", selector="#joined", date="{{date}}"), props=("date",)),
        tool("insert", instr("insertBefore", selector="#anchor", content="{{content}}"), props=("content",)),
        tool(
            "api",
            instr("apiConfirmStart", url="{{url}}", method="{{method}}"),
            instr("goto", url="{{page}}"),
            instr("apiConfirmEnd", url="{{url}}", timeout=3000),
            props=("url", "method", "page"),
        ),
        tool("api_end_only", instr("apiConfirmEnd", url="/api/users", timeout=500)),
        tool("push", instr("vueRouterPush", to="{{to}}"), props=("to",)),
        tool("replace", instr("vueRouterReplace", to="{{to}}"), props=("to",)),
        tool("go", instr("vueRouterGo", steps="{{steps}}"), props=("steps",)),
        tool("back", instr("vueRouterGoBack")),
        tool("forward", instr("vueRouterGoForward")),
        tool(
            "guide", instr("userGuide", selector="#anchor", title="Check", text="Look at this", timeout=2000)
        ),
    ]
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ts(chromium: str) -> AsyncIterator[TaskToolSet]:
    async with TaskToolSet(
        TOOLS, chromium=chromium, browser_allow=["127.0.0.1"], default_timeout_ms=2000
    ) as tools:
        yield tools


async def ok(ts: TaskToolSet, name: str, args: dict[str, Any] | None = None, **kw: Any) -> Any:
    outcome = await ts.run(name, args or {}, **kw)
    assert outcome.ok, outcome.envelope
    return outcome.envelope.get("result")


async def error(ts: TaskToolSet, name: str, args: dict[str, Any] | None = None, **kw: Any) -> str:
    outcome = await ts.run(name, args or {}, **kw)
    assert outcome.status == "error", outcome.envelope
    message = str(outcome.envelope["error"]["message"])
    assert "\n" not in message and "Traceback" not in message
    return message


async def date_value(ts: TaskToolSet) -> str:
    return await (await ts.services.browser.page()).locator(".user-date input").input_value()


async def test_select_date_drives_the_date_picker(ts: TaskToolSet, site: str) -> None:
    await ok(ts, "open", {"url": f"{site}/users.html"})
    for date in ["2020-02-29", "2041-07-04", "1990-12-31", "2025-05-01"]:  # on the page, later, earlier
        assert await ok(ts, "pick_date", {"date": date}) == {"date": date}
        assert await date_value(ts) == date
    assert "is not a date written YYYY-MM-DD" in await error(ts, "pick_date", {"date": "next tuesday"})
    assert "month 1-12" in await error(ts, "pick_date", {"date": "2020-13-01"})
    assert "2021-02 has no day 30" in await error(ts, "pick_date", {"date": "2021-02-30"})
    await ok(ts, "open", {"url": f"{site}/page.html"})
    assert await ok(ts, "fill_date", {"date": "1843-07-10"}) == {"date": "1843-07-10"}
    joined = await (await ts.services.browser.page()).locator("#joined").input_value()
    assert joined == "1843-07-10"


async def test_insert_before_and_find_dom(ts: TaskToolSet, site: str) -> None:
    await ok(ts, "open", {"url": f"{site}/users.html"})
    await ok(ts, "insert", {"content": "<b id='ins'>inserted</b>"})
    assert await ok(ts, "value", {"selector": "#ins"}) == {"dom": ['<b id="ins">inserted</b>']}
    html = (await ok(ts, "value", {"selector": "#anchor"}))["dom"][0]
    assert html == '<div id="anchor">anchor</div>'
    previous = await (await ts.services.browser.page()).evaluate(
        "document.getElementById('anchor').previousSibling.outerHTML"
    )
    assert previous == '<div><b id="ins">inserted</b></div>'
    assert "insertBefore needs a non-empty content" in await error(ts, "insert", {"content": ""})
    assert "'#nowhere'" in await error(ts, "value", {"selector": "#nowhere"})


async def test_api_confirm_waits_for_the_matching_response(ts: TaskToolSet, site: str) -> None:
    body = await ok(ts, "api", {"url": "/second.html", "method": "GET", "page": f"{site}/second.html"})
    assert "Second page" in body
    failed = await error(ts, "api", {"url": "/api/fail", "method": "get", "page": f"{site}/api/fail"})
    assert "answered 503" in failed and "unavailable" in failed
    missed = await error(ts, "api", {"url": "/second.html", "method": "POST", "page": f"{site}/second.html"})
    assert "no matching request was answered within 3000 ms" in missed
    assert "no apiConfirmStart with this url ran earlier" in await error(ts, "api_end_only")


@pytest.mark.parametrize("version", ["3", "4"])
async def test_vue_router_actions(ts: TaskToolSet, site: str, version: str) -> None:
    await ok(ts, "open", {"url": f"{site}/router.html?v={version}"})
    assert (await ok(ts, "push", {"to": "/users"}))["path"] == "/users"
    assert (await ok(ts, "replace", {"to": "/a"}))["path"] == "/a"
    assert (await ok(ts, "push", {"to": {"path": "/b"}}))["path"] == "/b"
    assert (await ok(ts, "back"))["path"] == "/a"
    assert (await ok(ts, "forward"))["path"] == "/b"
    assert (await ok(ts, "go", {"steps": "-2"}))["path"] == "/"
    assert (await ok(ts, "text", {"selector": "#route"}))["text"] == f"/ (v{version})"
    assert "Navigation aborted" in await error(ts, "push", {"to": "/forbidden"})
    if version == "3":  # Vue Router 3 rejects a redundant navigation, and TinyAgent reports it
        assert "redundant navigation" in await error(ts, "push", {"to": "/"})
    else:  # Vue Router 4 resolves it with a failure that is not an error
        assert (await ok(ts, "push", {"to": "/"}))["path"] == "/"
    await ok(ts, "open", {"url": f"{site}/second.html"})
    assert "no Vue Router found on the page" in await error(ts, "push", {"to": "/x"})


async def test_user_guide_asks_through_elicitation(ts: TaskToolSet, site: str) -> None:
    await ok(ts, "open", {"url": f"{site}/users.html"})
    assert "the MCP client does not offer elicitation" in await error(ts, "guide")
    asked: list[tuple[str, dict[str, Any]]] = []

    async def accept(message: str, schema: dict[str, Any]) -> dict[str, Any]:
        outline = await (await ts.services.browser.page()).evaluate(
            "document.getElementById('anchor').style.outline"
        )
        asked.append((message, schema))
        assert "solid" in outline  # the element is shown while the person is asked
        return {"action": "accept", "content": {"done": True}}

    async def decline(message: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"action": "decline", "content": {}}

    assert await ok(ts, "guide", elicit=accept) == {"action": "accept"}
    assert asked[0][0] == "Check\nLook at this\nContinue after completing the operation"
    assert asked[0][1]["type"] == "object"
    assert "did not continue (they answered 'decline')" in await error(ts, "guide", elicit=decline)
    outline = await (await ts.services.browser.page()).evaluate(
        "document.getElementById('anchor').style.outline"
    )
    assert outline == ""  # restored


# --- over serve-tasks, with the official MCP client ------------------------------------------------


def _serve(tools_path: Path, chromium: str, site: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-c",
            "import sys; from toolbridge.cli import main; sys.exit(main())",
            "serve-tasks",
            str(tools_path),
            "--chromium",
            chromium,
            "--start-url",
            f"{site}/users.html",
        ],
    )


async def test_a_tool_file_written_like_tinyagents_runs_end_to_end(chromium: str, site: str) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"done": True})

    with anyio.fail_after(90):
        client_with_elicitation = Client(
            _serve(USERS_TOOL, chromium, site), elicitation_callback=on_elicit, mode="legacy"
        )
        async with client_with_elicitation as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            assert listed == {"addUserByUI", "noteUsers", "confirmSave"}
            added = await client.call_tool(
                "addUserByUI", {"name": "岑子轩", "sex": "男", "date": "1999-03-14"}
            )
            assert added.is_error is False, added.content
            assert added.structured_content is not None
            assert added.structured_content["result"] == {
                "received": {"name": "岑子轩", "sex": "男", "date": "1999-03-14"}
            }
            note = await client.call_tool("noteUsers", {"note": "checked"})
            assert note.structured_content is not None
            assert note.structured_content["result"] == {"dom": ['<p id="note">checked</p>']}
            confirmed = await client.call_tool("confirmSave", {})
            assert confirmed.is_error is False, confirmed.content
            assert asked == [
                "Check\nPlease check the form, then continue\nContinue after completing the operation"
            ]

    async with Client(_serve(USERS_TOOL, chromium, site)) as client:  # no elicitation offered
        with anyio.fail_after(60):
            refused = await client.call_tool("confirmSave", {})
        assert refused.is_error is True and refused.structured_content is not None
        assert "does not offer elicitation" in refused.structured_content["error"]["message"]
        assert refused.structured_content["index"] == 0
