"""The console in a real browser: Playwright drives Debian's Chromium against a real gateway
(`toolbridge gateway --transport http`, a real upstream) while the raw SDK client, with no
elicitation callback, calls an approval-gated tool. The operator signs in, approves one call,
denies another, lets a third time out, reads the journal and watches a call live; an
unauthorized visitor sees only the sign-in form; a hostile argument is shown as text, never run.
Screenshots of each page land in docs/console/ (the documentation shows them)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
import pytest_asyncio
from gw_helpers import TOOLBRIDGE, calls_of, gateway_http, upstream_manifest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from test_gateway_console import ALICE, CLIENTS, ENV, OLGA
from test_gateway_operator_approval import BINDING

from toolbridge.tasks.actions.browser import LAUNCH_ARGS, find_chromium

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"
"""Where the screenshots go with `TOOLBRIDGE_SCREENSHOTS=1` (they illustrate docs/console.md);
otherwise the test's own directory."""
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def manifest_of(tmp_path: Path, timeout_ms: int) -> Path:
    console = f"""console:
  operators:
    - name: olga
      token: "${{{{ secrets.olgaToken }}}}"
approvalTimeoutMs: {timeout_ms}
"""
    return upstream_manifest(tmp_path, clients=CLIENTS, binding=BINDING, gateway=console)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Any]:
    """One Chromium for the module; each test opens its own context (cookies apart)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        launched = await p.chromium.launch(
            executable_path=find_chromium(), headless=True, args=list(LAUNCH_ARGS)
        )
        try:
            yield launched
        finally:
            await launched.close()


@asynccontextmanager
async def chromium(browser: Any) -> AsyncIterator[Any]:
    """A fresh page in a fresh context of the module's browser."""
    context = await browser.new_context(viewport={"width": 1180, "height": 760})
    try:
        yield await context.new_page()
    finally:
        await context.close()


@asynccontextmanager
async def alice(url: str) -> AsyncIterator[Client]:
    """The raw SDK client of identity alice: no elicitation callback, so it cannot be asked."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=120) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,  # type: ignore[arg-type]
    ):
        yield client


async def sign_in(page: Any, base: str) -> None:
    await page.goto(f"{base}/console/login")
    await page.fill("#token", OLGA)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url("**/console/approvals")


async def wait_for_approval(page: Any, base: str) -> None:
    """Reload the approvals page until a pending approval shows (reading needs no script)."""
    with anyio.fail_after(60):
        while True:
            await page.goto(f"{base}/console/approvals")
            if await page.locator("section.approval").count():
                return
            await anyio.sleep(0.2)


async def test_operator_approves_denies_and_reads_the_journal_in_the_browser(
    tmp_path: Path, browser: Any
) -> None:
    shots = DOCS if os.environ.get("TOOLBRIDGE_SCREENSHOTS") == "1" else tmp_path
    with gateway_http(manifest_of(tmp_path, 90_000), env=ENV) as url:
        base = url.removesuffix("/mcp")
        async with chromium(browser) as page, alice(url) as client, anyio.create_task_group() as tg:
            # an unauthorized visitor: 401 and the sign-in form, nothing of the gateway's
            visit = await page.goto(f"{base}/console/approvals")
            assert visit is not None and visit.status == 401
            assert await page.locator("#token").count() == 1
            await page.screenshot(path=str(shots / "sign-in.png"))
            await page.fill("#token", "not-an-operator-token")
            await page.get_by_role("button", name="Sign in").click()
            await page.wait_for_selector("text=That token is not an operator's.")
            await sign_in(page, base)

            answers, answered = anyio.create_memory_object_stream[types.CallToolResult](4)

            async def call(text: str) -> None:
                await answers.send(await client.call_tool("w_note", {"text": text, "path": "/etc/motd"}))

            # approved in the page: the waiting call completes
            tg.start_soon(call, HOSTILE)
            await wait_for_approval(page, base)
            card = page.locator("section.approval")
            assert await card.locator("text=alice").count() >= 1
            shown = await card.locator("table.args").inner_text()
            assert HOSTILE.replace('"', '\\"') in shown, "every argument shown in full, as text"
            assert await page.evaluate("window.__pwned === undefined"), "a hostile argument never runs"
            await page.screenshot(path=str(shots / "approvals.png"), full_page=True)
            await card.get_by_role("button", name="Approve").click()
            await page.wait_for_selector("text=Approved: the call goes on.")
            with anyio.fail_after(60):
                approved = await answered.receive()
            assert not approved.is_error and approved.content[0].text == "noted"  # type: ignore[union-attr]
            assert calls_of(tmp_path) == ["note"]

            # denied with a reason: refused, nothing sent
            tg.start_soon(call, "drop everything")
            await wait_for_approval(page, base)
            await page.fill("section.approval input[name=reason]", "not without a ticket")
            await page.get_by_role("button", name="Deny").click()
            await page.wait_for_selector("text=Denied: the call is refused.")
            with anyio.fail_after(60):
                denied = await answered.receive()
            assert denied.is_error and denied.meta is not None
            assert denied.meta["toolbridge/code"] == "PERMISSION_DENIED"
            assert calls_of(tmp_path) == ["note"]
            decided = await page.locator("#decided").inner_text()
            assert "approved" in decided and "denied" in decided and "not without a ticket" in decided

            # the journal page shows both, filtered by outcome; one call's evidence on its own page
            await page.goto(f"{base}/console/journal?tool=w_note")
            table = await page.locator("#calls").inner_text()
            assert "succeeded" in table and "not_started" in table and "PERMISSION_DENIED" in table
            await page.screenshot(path=str(shots / "journal.png"), full_page=True)
            await page.select_option("select[name=outcome]", "succeeded")
            await page.get_by_role("button", name="Filter").click()
            table = await page.locator("#calls").inner_text()
            assert "succeeded" in table and "PERMISSION_DENIED" not in table
            await page.locator("#calls a code").first.click()
            evidence = await page.locator("section.card").inner_text()
            assert "w_note" in evidence and "arguments SHA-256" in evidence and "yes" in evidence
            await page.screenshot(path=str(shots / "call.png"), full_page=True)

            # live calls: a call appears on the Calls page as it happens (server-sent events)
            await page.goto(f"{base}/console/calls")
            await page.wait_for_selector("#live-state:has-text('live')")
            assert not (await client.call_tool("up_echo", {"text": "live"})).is_error
            row = page.locator("#live-calls tr", has_text="up_echo").first
            await row.locator("td.outcome-succeeded").wait_for()
            denied_row = await page.locator("#live-calls tr", has_text="PERMISSION_DENIED").first.inner_text()
            assert "w_note" in denied_row and "not_started" in denied_row, (
                "a refused call shows with its code"
            )
            await page.screenshot(path=str(shots / "calls.png"), full_page=True)

            # signing out ends the session: the pages are 401 again
            await page.goto(f"{base}/console/approvals")
            await page.get_by_role("button", name="Sign out").click()
            again = await page.goto(f"{base}/console/journal")
            assert again is not None and again.status == 401


async def test_no_decision_in_time_shows_as_timed_out_and_the_call_is_refused(
    tmp_path: Path, browser: Any
) -> None:
    with gateway_http(manifest_of(tmp_path, 3000), env=ENV) as url:
        base = url.removesuffix("/mcp")
        async with chromium(browser) as page, alice(url) as client:
            await sign_in(page, base)
            refused = await client.call_tool("w_note", {"text": "nobody is watching"})
            assert refused.is_error and refused.meta is not None
            assert refused.meta["toolbridge/code"] == "APPROVAL_TIMEOUT"
            await page.goto(f"{base}/console/approvals")
            assert await page.locator("#no-pending").count() == 1
            decided = await page.locator("#decided").inner_text()
            assert "timed_out" in decided and "gateway" in decided
        assert calls_of(tmp_path) == []


async def test_a_pin_change_is_reviewed_with_a_diff_and_accepted_in_the_page(
    tmp_path: Path, browser: Any
) -> None:
    shots = DOCS if os.environ.get("TOOLBRIDGE_SCREENSHOTS") == "1" else tmp_path
    clients = CLIENTS.replace("tool:up_echo,", "tool:up_echo, tool:up_mutate, tool:up_evil,")
    console = """console:
  operators:
    - name: olga
      token: "${{ secrets.olgaToken }}"
"""
    manifest = upstream_manifest(
        tmp_path, clients=clients, binding=BINDING, gateway=console, lock="tools.lock"
    )
    lock = tmp_path / "tools.lock"
    await anyio.run_process(
        [TOOLBRIDGE, "lock", "--out", str(lock), str(manifest)], env={**os.environ, **ENV}
    )
    with gateway_http(manifest, env=ENV) as url:
        base = url.removesuffix("/mcp")
        async with chromium(browser) as page, alice(url) as client:
            await sign_in(page, base)
            await page.goto(f"{base}/console/pins")
            assert await page.locator("#no-pins").count() == 1, await page.content()
            await client.call_tool("up_mutate", {})  # the upstream rewrites echo and adds evil
            with anyio.fail_after(60):
                while await page.locator("section.pin").count() < 2:
                    await anyio.sleep(0.3)
                    await page.goto(f"{base}/console/pins")
            echo = page.locator("section.pin[data-tool=echo]")
            diff = await echo.locator("pre.diff").inner_text()
            assert "-" in diff and "ssh" in diff, "the changed description shows in the diff"
            assert (
                "New: the lock has no pin for it."
                in await page.locator("section.pin[data-tool=evil]").inner_text()
            )
            await page.screenshot(path=str(shots / "pins.png"), full_page=True)
            assert "up_echo" not in {t.name for t in (await client.list_tools()).tools}
            await echo.get_by_role("button", name="Accept").click()
            await page.wait_for_selector("text=Accepted: the lock file pins it now")
            await (
                page.locator("section.pin[data-tool=evil]")
                .get_by_role("button", name="Keep withheld")
                .click()
            )
            await page.wait_for_selector("text=Kept withheld: nothing written.")
            with anyio.fail_after(60):  # the gateway re-reads the lock within a second
                while "up_echo" not in (names := {t.name for t in (await client.list_tools()).tools}):  # noqa: ASYNC110
                    await anyio.sleep(0.3)
            assert "up_evil" not in names
            await page.goto(f"{base}/console/pins")
            assert await page.locator("section.pin").count() == 1  # evil still waits
            assert await page.locator("section.pin[data-tool=evil]").count() == 1
