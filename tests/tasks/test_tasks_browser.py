"""Browser actions in process, on one shared Chromium for the whole module (Debian's chromium)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import pytest_asyncio

from toolbridge.content import ImagePart
from toolbridge.errors import ToolError
from toolbridge.tasks import Task, TaskToolSet
from toolbridge.tasks.actions._navigation import NavigationPolicy
from toolbridge.tasks.actions.browser import BrowserSession

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def instr(action: str, **params: Any) -> dict[str, Any]:
    return {"action": action, "params": params}


def tool(
    name: str, *instructions: dict[str, Any], properties: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "inputSchema": {"type": "object", "properties": properties or {}},
        "task": {"instructions": list(instructions)},
    }


URL = {"url": {"type": "string"}}

TOOLS = {
    "tools": [
        tool("open", instr("goto", url="{{url}}"), properties=URL),
        tool("text", instr("getText", selector="{{selector}}"), properties={"selector": {"type": "string"}}),
        tool("double", instr("doubleClick", selector="#dbl"), instr("getText", selector="#log")),
        tool("right", instr("rightClick", selector="#ctx"), instr("getText", selector="#log")),
        tool(
            "pick",
            instr("clickByText", text="{{text}}", selector="#menu"),
            instr("getText", selector="#log"),
            properties={"text": {"type": "string"}},
        ),
        tool(
            "fill_form",
            instr("input", selector="#q", value="{{q}}"),
            instr("radio", selector="#large"),
            instr("checkbox", selector="#agree", checked=True),
            instr("select", selector="#fruit", value="Pear"),
            instr("getText", selector="#state"),
            properties={"q": {}},
        ),
        tool("submit_form", instr("submit", selector="#q"), instr("getText", selector="#log")),
        tool(
            "uncheck",
            instr("checkbox", selector="#agree"),  # no `checked`: unchecks, as in TinyAgent
            instr("getText", selector="#state"),
        ),
        tool(
            "misc",
            instr("scrollTo", selector="#bottom"),
            instr("highlight", selector="#title"),
            instr("click", selector="#late-btn"),
            instr("waitFor", selector="#late"),
            instr("getText", selector="#late"),
        ),
        tool(
            "history",
            instr("click", selector="#next"),
            {**instr("getText", selector="#title"), "id": "second"},
            instr("goBack"),
            {**instr("getText", selector="#title"), "id": "first"},
            instr("goForward"),
            instr("result", value={"second": "{{second.text}}", "first": "{{first.text}}"}),
        ),
        tool("shot", instr("screenshot"), {**instr("screenshot", selector="#title"), "id": "el"}),
        tool("missing", instr("click", selector="#nope", timeout=300), instr("click", selector="#dbl")),
        tool("missing_default", instr("getText", selector=".never-there")),
        tool(
            "recover",
            {
                **instr("click", selector="#nope", timeout=200),
                "catchInstruction": instr("clickByText", text="Apples"),
            },
            instr("getText", selector="#log"),
        ),
        tool("long_wait", instr("waitFor", selector="#never", timeout=20000)),
        tool("bad_url", instr("goto", url="http://127.0.0.1:1/", timeout=3000)),
    ]
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser_tools(chromium: str) -> AsyncIterator[TaskToolSet]:
    async with TaskToolSet(
        TOOLS, chromium=chromium, default_timeout_ms=500, browser_allow=["127.0.0.1"]
    ) as ts:
        yield ts


async def run(ts: TaskToolSet, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    outcome = await ts.run(name, args or {})
    return outcome.envelope


async def open_page(ts: TaskToolSet, site: str, page: str = "actions.html") -> None:
    env = await run(ts, "open", {"url": f"{site}/{page}"})
    assert env["status"] == "success", env


async def test_goto_and_get_text(browser_tools: TaskToolSet, site: str) -> None:
    env = await run(browser_tools, "open", {"url": f"{site}/actions.html"})
    assert env["result"] == {"url": f"{site}/actions.html", "title": "Actions"}
    assert (await run(browser_tools, "text", {"selector": "#title"}))["result"] == {"text": "Actions"}


async def test_clicks(browser_tools: TaskToolSet, site: str) -> None:
    await open_page(browser_tools, site)
    assert (await run(browser_tools, "double"))["result"] == {"text": "double"}
    assert (await run(browser_tools, "right"))["result"] == {"text": "right"}
    assert (await run(browser_tools, "pick", {"text": "Pears"}))["result"] == {"text": "picked Pears"}


async def test_form_actions(browser_tools: TaskToolSet, site: str) -> None:
    await open_page(browser_tools, site)
    env = await run(browser_tools, "fill_form", {"q": 42})
    assert env["status"] == "success", env
    assert env["result"] == {"text": "size=l agree=true fruit=p q=42"}
    assert (await run(browser_tools, "submit_form"))["result"] == {"text": "submitted 42"}
    assert "agree=false" in (await run(browser_tools, "uncheck"))["result"]["text"]


async def test_scroll_highlight_wait(browser_tools: TaskToolSet, site: str) -> None:
    await open_page(browser_tools, site)
    env = await run(browser_tools, "misc")
    assert env["status"] == "success", env
    assert env["result"] == {"text": "arrived"}


async def test_history(browser_tools: TaskToolSet, site: str) -> None:
    await open_page(browser_tools, site)
    env = await run(browser_tools, "history")
    assert env["status"] == "success", env
    assert env["result"] == {"second": "Second page", "first": "Actions"}


async def test_screenshot_returns_png_images(browser_tools: TaskToolSet, site: str) -> None:
    await open_page(browser_tools, site)
    outcome = await browser_tools.run("shot", {})
    assert outcome.ok
    assert len(outcome.parts) == 2
    for part in outcome.parts:
        assert isinstance(part, ImagePart) and part.media_type == "image/png"
        assert base64.b64decode(part.data).startswith(PNG_MAGIC)
    assert outcome.envelope["result"]["mimeType"] == "image/png"
    assert outcome.envelope["result"]["size"] == len(base64.b64decode(outcome.parts[1].data))
    call = outcome.to_call_result()
    assert [b["type"] for b in call["content"]] == ["text", "image", "image"]
    result = await browser_tools.call_tool("shot", {})
    assert result.kind == "parts" and [p.type for p in result.parts] == ["text", "image", "image"]


async def test_a_missing_element_names_the_selector(browser_tools: TaskToolSet, site: str) -> None:
    await open_page(browser_tools, site)
    env = await run(browser_tools, "missing")
    assert env["status"] == "error" and env["index"] == 0
    assert env["error"]["message"] == (
        "task.instructions[0] (click): no element matching selector '#nope' became ready within 300 ms"
    )
    env = await run(browser_tools, "missing_default")
    assert "'.never-there'" in env["error"]["message"] and "within 500 ms" in env["error"]["message"]
    with pytest.raises(ToolError, match="#nope"):
        await browser_tools.call_tool("missing", {})


async def test_catch_instruction_recovers_in_the_browser(browser_tools: TaskToolSet, site: str) -> None:
    await open_page(browser_tools, site)
    env = await run(browser_tools, "recover")
    assert env["status"] == "success", env
    assert env["result"] == {"text": "picked Apples"}


async def test_navigation_failure_is_reported(browser_tools: TaskToolSet) -> None:
    env = await run(browser_tools, "bad_url")
    assert env["status"] == "error"
    assert env["error"]["message"].startswith(
        "task.instructions[0] (goto): could not open http://127.0.0.1:1: "
    )
    assert "\n" not in env["error"]["message"]


async def test_stop_interrupts_a_browser_wait(browser_tools: TaskToolSet, site: str) -> None:
    await open_page(browser_tools, site)
    created: list[Task] = []
    ready = anyio.Event()

    def on_created(task: Task) -> None:
        created.append(task)
        ready.set()

    browser_tools.scheduler.on_created = on_created
    outcome: Any = None

    async def call() -> None:
        nonlocal outcome
        outcome = await browser_tools.run("long_wait", {})

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await ready.wait()
                await created[0].wait_started()
                await anyio.sleep(0.2)
                created[0].stop()
    finally:
        browser_tools.scheduler.on_created = None
    assert outcome.envelope["status"] == "partial completed" and outcome.envelope["index"] == 0
    assert (await run(browser_tools, "text", {"selector": "#title"}))["status"] == "success"


async def test_browser_session_is_lazy_and_closes(chromium: str, site: str) -> None:
    session = BrowserSession(chromium, navigation=NavigationPolicy.parse([site]))
    assert not session.started
    page = await session.page()
    assert session.started
    await page.goto(f"{site}/second.html")
    assert await page.title() == "Second"
    crashed = session._browser
    assert crashed is not None
    await crashed.close()  # as if Chromium had died
    page = await session.page()  # a new Chromium
    assert session._browser is not crashed
    await page.goto(f"{site}/second.html")
    assert await page.title() == "Second"
    await session.aclose()
    assert not session.started
    with pytest.raises(ToolError, match="closed"):
        await session.page()
    await session.aclose()
