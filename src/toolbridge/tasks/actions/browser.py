"""Browser actions on Playwright driving Chromium, and the shared browser session.

The session (`BrowserSession`) starts Playwright and launches Chromium on first use (never at
import or load time), opens one browser context with one page, and keeps them for the life of
the task tool set; `aclose()` closes the browser and stops Playwright. Tasks run one at a time on
that context (the scheduler sees to it), so instructions of two tasks never interleave on a page.

Chromium is Debian's (`/usr/bin/chromium`), or the executable given by the `executable_path`
option or the `TOOLBRIDGE_CHROMIUM` environment variable; Playwright's own browser downloads are
never used. It runs headless unless asked otherwise, with the flags that keep it off the network
on its own (`--disable-background-networking`, `--disable-component-update`, ...).

Element actions take a CSS `selector` (Playwright selector syntax is accepted too) and act on the
first element that matches. The lookup retries until `timeout` milliseconds have passed (default:
the server's, 3000), then fails with a message that names the selector. The parameter names
follow TinyAgent's action library:

| action | params | result |
|---|---|---|
| `goto` | `url`, `timeout?` (ms, default 30000) | `{url, title}` |
| `input` | `selector`, `value`, `timeout?` | — |
| `click`, `doubleClick`, `rightClick` | `selector`, `timeout?` | — |
| `clickByText` | `text`, `selector?` (scope), `timeout?` | — |
| `select` | `selector`, `value` (an option's value or label), `timeout?` | `{selected: [...]}` |
| `checkbox` | `selector`, `checked?` (default false, as in TinyAgent), `timeout?` | — |
| `radio` | `selector`, `timeout?` | — |
| `submit` | `selector` (a form, or a field of one), `timeout?` | — |
| `scrollTo`, `highlight`, `waitFor` | `selector`, `timeout?` | — |
| `getText` | `selector`, `timeout?` | `{text}` |
| `screenshot` | `selector?`, `fullPage?`, `timeout?` | `{mimeType, size}` + a PNG image block |
| `goBack`, `goForward` | `timeout?` | `{url}` |
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import Field

from ..._extras import require
from ...content import ImagePart
from ...errors import ConfigError, ToolError
from ._context import ActionContext
from ._navigation import NavigationPolicy, origin_of
from ._registry import _DEFAULT, ActionParams, ActionResult, action

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, CDPSession, Locator, Page, Playwright

__all__ = ["CHROMIUM_ENV", "DEFAULT_CHROMIUM", "LAUNCH_ARGS", "BrowserSession", "find_chromium"]

CHROMIUM_ENV = "TOOLBRIDGE_CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
)
"""Flags Chromium is launched with (besides headless): no sandbox (root in CI), no GPU, and no
network traffic of its own."""

_LAUNCH_TIMEOUT_S = 60.0


def find_chromium(executable_path: str | None = None) -> str:
    """The Chromium executable to launch.

    The explicit path wins, then `$TOOLBRIDGE_CHROMIUM`, then `/usr/bin/chromium`, then
    `chromium` or `chromium-browser` on `PATH`.

    Raises:
        ToolError: `ERR_TOOL_BROWSER` when none of them exists, saying how to install it.
    """
    candidates = [executable_path, os.environ.get(CHROMIUM_ENV), DEFAULT_CHROMIUM]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
        if candidate and candidate in (executable_path, os.environ.get(CHROMIUM_ENV)):
            raise ToolError(
                f"the Chromium executable {candidate!r} does not exist or is not executable",
                code="ERR_TOOL_BROWSER",
            )
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise ToolError(
        "Chromium is not installed: install Debian's package (`apt-get install chromium`) or set "
        f"{CHROMIUM_ENV} to a Chromium executable",
        code="ERR_TOOL_BROWSER",
    )


class BrowserSession:
    """One lazily launched Chromium with one context and one page, shared by a task tool set.

    Args:
        executable_path: Chromium to launch (see `find_chromium`).
        headless: run without a window (the default).
        viewport: page size as `(width, height)`.
        navigation: where the page may navigate (see `_navigation`); default: nowhere but
            `about:blank` and the start page.
        start_url: a page opened when the page is created (its origin is allowed).

    Raises:
        ConfigError: `ERR_CONFIG` when `start_url` is not an http(s) or file URL.
    """

    def __init__(
        self,
        executable_path: str | None = None,
        *,
        headless: bool = True,
        viewport: tuple[int, int] = (1280, 800),
        navigation: NavigationPolicy | None = None,
        start_url: str | None = None,
    ) -> None:
        self.executable_path = executable_path
        self.headless = headless
        self.viewport = viewport
        self.start_url = start_url
        policy = navigation if navigation is not None else NavigationPolicy()
        if start_url is not None:
            if origin_of(start_url).split(":")[0] not in ("http", "https", "file"):
                raise ConfigError(
                    f"the start URL {start_url[:200]!r} is not an http(s) or file URL", code="ERR_CONFIG"
                )
            policy = policy.with_origin_of(start_url)
        self.navigation = policy
        self._blocked: list[str] = []
        self._creating = False
        self._pending: set[asyncio.Future[None]] = set()
        self._lock = anyio.Lock()
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._context: BrowserContext | None = None
        self._page: Page | None = None
        self._closed = False

    @property
    def started(self) -> bool:
        """Whether the browser has been launched (and not closed)."""
        return self._browser is not None

    async def page(self) -> Page:
        """The shared page, launching Chromium when needed.

        Chromium is launched on first use, and again when it crashed or was killed; a new page
        is opened when the page was closed.

        Raises:
            ToolError: `ERR_TOOL_BROWSER` when the session is closed or Chromium cannot start.
        """
        async with self._lock:
            if self._closed:
                raise ToolError("the browser session is closed", code="ERR_TOOL_BROWSER")
            if self._browser is not None and not self._browser.is_connected():
                await self._shutdown()  # Chromium crashed or was killed: start a new one
            if self._page is not None and not self._page.is_closed():
                return self._page
            if self._browser is None:
                await self._launch()
            assert self._context is not None
            self._creating = True
            try:
                page = await self._context.new_page()
            finally:
                self._creating = False
            await self._guard(page)
            self._page = page
            if self.start_url is not None:
                try:
                    await page.goto(self.start_url, timeout=30_000)
                except Exception as exc:
                    raise ToolError(
                        f"could not open the start page {self.start_url!r}: {_first_line(exc)}",
                        code="ERR_TOOL_BROWSER",
                    ) from None
            return page

    async def _guard(self, page: Page) -> None:
        """Check every main-frame navigation of `page` (each redirect hop too) before it is sent."""
        assert self._context is not None
        cdp = await self._context.new_cdp_session(page)
        tree = await cdp.send("Page.getFrameTree")
        main_frame = tree["frameTree"]["frame"]["id"]

        def on_paused(event: dict[str, Any]) -> None:
            future = asyncio.ensure_future(self._decide(cdp, main_frame, event))
            self._pending.add(future)
            future.add_done_callback(self._pending.discard)

        cdp.on("Fetch.requestPaused", on_paused)
        await cdp.send(
            "Fetch.enable",
            {"patterns": [{"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}]},
        )

    async def _decide(self, cdp: CDPSession, main_frame: str, event: dict[str, Any]) -> None:
        url = str(event.get("request", {}).get("url", ""))
        reason = self.navigation.refusal(url) if event.get("frameId") == main_frame else None
        with contextlib.suppress(Exception):  # the page or browser went away meanwhile
            if reason is None:
                await cdp.send("Fetch.continueRequest", {"requestId": event["requestId"]})
                return
            self._blocked.append(f"navigation to {origin_of(url)} was blocked: {reason}")
            del self._blocked[:-5]
            await cdp.send(
                "Fetch.failRequest", {"requestId": event["requestId"], "errorReason": "BlockedByClient"}
            )

    def take_blocked(self) -> str | None:
        """The last navigation refused since the previous call (and forget them), or None."""
        last = self._blocked[-1] if self._blocked else None
        self._blocked.clear()
        return last

    def _on_new_page(self, page: Page) -> None:
        if not self._creating and page is not self._page:  # a popup or target=_blank: tasks use one page
            future = asyncio.ensure_future(page.close())
            self._pending.add(future)
            future.add_done_callback(self._forget)

    def _forget(self, future: asyncio.Future[None]) -> None:
        self._pending.discard(future)
        if not future.cancelled():
            future.exception()  # retrieved: a page already gone is not an error

    async def _launch(self) -> None:
        async_playwright = _playwright_api().async_playwright
        executable = find_chromium(self.executable_path)
        try:
            with anyio.fail_after(_LAUNCH_TIMEOUT_S):
                self._playwright = await async_playwright().start()
                self._browser = await self._playwright.chromium.launch(
                    executable_path=executable, headless=self.headless, args=list(LAUNCH_ARGS)
                )
                width, height = self.viewport
                self._context = await self._browser.new_context(viewport={"width": width, "height": height})
                self._context.on("page", self._on_new_page)
        except BaseException as exc:
            await self._shutdown()
            if isinstance(exc, Exception):
                raise ToolError(
                    f"could not start Chromium ({executable}): {_first_line(exc)}", code="ERR_TOOL_BROWSER"
                ) from exc
            raise

    async def aclose(self) -> None:
        """Close the browser and stop Playwright. Later `page()` calls fail; safe to call twice."""
        async with self._lock:
            self._closed = True
            await self._shutdown()

    async def _shutdown(self) -> None:
        with anyio.move_on_after(10, shield=True):
            browser, playwright = self._browser, self._playwright
            self._page = self._context = self._browser = None
            self._playwright = None
            if browser is not None:
                with contextlib.suppress(Exception):  # already gone
                    await browser.close()
            if playwright is not None:
                with contextlib.suppress(Exception):
                    await playwright.stop()


async def page_settled(page: Page, timeout_ms: int = 2000) -> None:
    """Wait (briefly) until the page has loaded after an action that may navigate."""
    await page.wait_for_load_state("load", timeout=timeout_ms)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# --- params ---------------------------------------------------------------------------------


class _Timeout(ActionParams):
    timeout: int | None = Field(default=None, ge=0, le=600_000, description="lookup timeout in ms")


class SelectorParams(_Timeout):
    """`{selector, timeout?}`."""

    selector: str = Field(min_length=1)


class GotoParams(ActionParams):
    """`{url, timeout?}`."""

    url: str = Field(min_length=1)
    timeout: int = Field(default=30_000, ge=0, le=600_000)


class InputParams(SelectorParams):
    """`{selector, value, timeout?}`: `value` is typed as text (numbers as their JSON text)."""

    value: str | int | float | bool


class ClickByTextParams(_Timeout):
    """`{text, selector?, timeout?}`: the element whose whole text is `text`, inside `selector`."""

    text: str = Field(min_length=1)
    selector: str | None = None


class SelectParams(SelectorParams):
    """`{selector, value}`: `value` is an option's value or label (a list for a multiple select)."""

    value: str | list[str]


class CheckboxParams(SelectorParams):
    """`{selector, checked?}`: without `checked` the box ends unchecked, as in TinyAgent (whose
    action sets `element.checked = params.checked`, so a missing value unchecks it)."""

    checked: bool = False


class HighlightParams(SelectorParams):
    """`{selector, color?}`."""

    color: str = Field(default="#ff4d4f", pattern=r"^[#A-Za-z0-9(),.%\s]+$")


class WaitForParams(SelectorParams):
    """`{selector, state?}`."""

    state: str = Field(default="visible", pattern=r"^(attached|detached|visible|hidden)$")


class ScreenshotParams(_Timeout):
    """`{selector?, fullPage?}`."""

    selector: str | None = None
    full_page: bool = Field(default=False, alias="fullPage")


class HistoryParams(ActionParams):
    """`{timeout?}` in ms (default 30000)."""

    timeout: int = Field(default=30_000, ge=0, le=600_000)


# --- helpers --------------------------------------------------------------------------------


def _timeout(params: _Timeout, ctx: ActionContext) -> int:
    return params.timeout if params.timeout is not None else ctx.timeout_ms


async def _element(ctx: ActionContext, selector: str, timeout_ms: int, state: str = "visible") -> Locator:
    """The first element matching `selector`, once it is in `state`, retried until the timeout."""
    page = await ctx.page()
    locator = page.locator(selector).first
    await _guard(selector, timeout_ms, locator.wait_for(state=state, timeout=timeout_ms))  # type: ignore[arg-type]
    return locator


def _playwright_api() -> Any:
    """`playwright.async_api`, or `MissingExtraError` naming the `browser` extra."""
    return require("browser", "playwright.async_api", "a browser action")


async def _guard(selector: str, timeout_ms: int, awaitable: Any) -> Any:
    """Await a Playwright call, turning its errors into messages a model can act on."""
    api = _playwright_api()
    PlaywrightError, PlaywrightTimeout = api.Error, api.TimeoutError

    try:
        return await awaitable
    except PlaywrightTimeout:
        raise ToolError(
            f"no element matching selector {selector!r} became ready within {timeout_ms} ms",
            code="ERR_TOOL_ACTION_FAILED",
        ) from None
    except PlaywrightError as exc:
        message = _first_line(exc)
        raise ToolError(
            f"selector {selector!r}: {message}",
            code="ERR_TOOL_ACTION_FAILED",
        ) from None


def check_navigation(ctx: ActionContext) -> None:
    """Fail when a navigation was refused (by the allow list) while the action ran.

    Raises:
        ToolError: `ERR_TOOL_ACTION_FAILED` naming the origin that was refused.
    """
    blocked = ctx.services.browser.take_blocked()
    if blocked is not None:
        raise ToolError(blocked, code="ERR_TOOL_ACTION_FAILED")


async def _act(ctx: ActionContext, params: SelectorParams, op: str, **kwargs: Any) -> None:
    timeout = _timeout(params, ctx)
    locator = await _element(ctx, params.selector, timeout)
    await _guard(params.selector, timeout, getattr(locator, op)(timeout=timeout, **kwargs))
    check_navigation(ctx)


# --- actions --------------------------------------------------------------------------------


def _other_than(url: str) -> Callable[[str], bool]:
    """A URL test for `wait_for_url`: any URL but `url`."""
    return lambda other: other != url


@action("goto", params=GotoParams, registry=_DEFAULT)
async def goto(params: GotoParams, ctx: ActionContext) -> dict[str, Any]:
    """Open a URL in the page."""
    PlaywrightError = _playwright_api().Error

    session = ctx.services.browser
    refusal = session.navigation.refusal(params.url)
    if refusal is not None:
        raise ToolError(f"goto refused {origin_of(params.url)}: {refusal}", code="ERR_TOOL_ACTION_FAILED")
    page = await ctx.page()
    session.take_blocked()
    for attempt in range(3):
        before = page.url
        try:
            await page.goto(params.url, timeout=params.timeout)
            break
        except PlaywrightError as exc:
            # Each hop of a redirect is paused and checked against the allow list, and Chromium
            # may then report the next hop as a navigation of its own that "interrupted" this
            # one; a script may also move the page on at once. Either way the page goes on to a
            # new document: wait for it, and that is where this goto ended.
            interrupted = "interrupted by another navigation" in str(exc)
            if interrupted:
                with contextlib.suppress(PlaywrightError):
                    await page.wait_for_url(_other_than(before), timeout=params.timeout)
            # A failed navigation is followed by Chromium's error page, which may still be
            # committing: let it settle, so that it neither interrupts a retry nor the next goto.
            with contextlib.suppress(PlaywrightError):
                await page.wait_for_load_state("load", timeout=2000)
            blocked = session.take_blocked()
            if blocked is not None:
                raise ToolError(f"goto: {blocked}", code="ERR_TOOL_ACTION_FAILED") from None
            if interrupted and page.url != before and session.navigation.refusal(page.url) is None:
                break
            if attempt < 2 and interrupted:
                continue
            raise ToolError(
                f"could not open {origin_of(params.url)}: {_first_line(exc)}", code="ERR_TOOL_ACTION_FAILED"
            ) from None
    check_navigation(ctx)
    return {"url": page.url, "title": await page.title()}


@action("input", params=InputParams, registry=_DEFAULT)
async def input_(params: InputParams, ctx: ActionContext) -> None:
    """Type a value into a text field (replacing what was there); date fields take YYYY-MM-DD."""
    value = params.value
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    await _act(ctx, params, "fill", value=text)


@action("click", params=SelectorParams, registry=_DEFAULT)
async def click(params: SelectorParams, ctx: ActionContext) -> None:
    """Click an element."""
    await _act(ctx, params, "click")


@action("doubleClick", params=SelectorParams, registry=_DEFAULT)
async def double_click(params: SelectorParams, ctx: ActionContext) -> None:
    """Double-click an element."""
    await _act(ctx, params, "dblclick")


@action("rightClick", params=SelectorParams, registry=_DEFAULT)
async def right_click(params: SelectorParams, ctx: ActionContext) -> None:
    """Right-click an element."""
    await _act(ctx, params, "click", button="right")


@action("clickByText", params=ClickByTextParams, registry=_DEFAULT)
async def click_by_text(params: ClickByTextParams, ctx: ActionContext) -> None:
    """Click the element whose text is exactly `text` (whitespace normalized), inside `selector`."""
    timeout = _timeout(params, ctx)
    page = await ctx.page()
    scope = page.locator(params.selector).first if params.selector else page
    locator = scope.get_by_text(params.text, exact=True).first
    label = f"text={params.text!r}" + (f" inside {params.selector!r}" if params.selector else "")
    await _guard(label, timeout, locator.wait_for(state="visible", timeout=timeout))
    await _guard(label, timeout, locator.click(timeout=timeout))
    check_navigation(ctx)


@action("select", params=SelectParams, registry=_DEFAULT)
async def select(params: SelectParams, ctx: ActionContext) -> dict[str, Any]:
    """Choose an option of a `<select>` by value or label."""
    timeout = _timeout(params, ctx)
    locator = await _element(ctx, params.selector, timeout)
    selected = await _guard(params.selector, timeout, locator.select_option(params.value, timeout=timeout))
    if not selected:
        raise ToolError(
            f"select {params.selector!r} has no option {params.value!r}", code="ERR_TOOL_ACTION_FAILED"
        )
    return {"selected": list(selected)}


@action("checkbox", params=CheckboxParams, registry=_DEFAULT)
async def checkbox(params: CheckboxParams, ctx: ActionContext) -> None:
    """Check a checkbox (`checked: true`) or uncheck it (`checked: false`, the default as in TinyAgent)."""
    await _act(ctx, params, "set_checked", checked=params.checked)


@action("radio", params=SelectorParams, registry=_DEFAULT)
async def radio(params: SelectorParams, ctx: ActionContext) -> None:
    """Choose a radio button."""
    await _act(ctx, params, "check")


_SUBMIT_JS = """el => {
  const form = el.tagName === 'FORM' ? el : el.form;
  if (!form) { return false; }
  form.requestSubmit();
  return true;
}"""


@action("submit", params=SelectorParams, registry=_DEFAULT)
async def submit(params: SelectorParams, ctx: ActionContext) -> None:
    """Submit a form (the element itself, or the form of a field), as pressing Enter would."""
    timeout = _timeout(params, ctx)
    locator = await _element(ctx, params.selector, timeout, state="attached")
    ok = await _guard(params.selector, timeout, locator.evaluate(_SUBMIT_JS))
    if not ok:
        raise ToolError(
            f"{params.selector!r} is neither a form nor inside one", code="ERR_TOOL_ACTION_FAILED"
        )
    with contextlib.suppress(Exception):  # let a navigation the submission started be checked
        await page_settled(await ctx.page())
    check_navigation(ctx)


@action("scrollTo", params=SelectorParams, registry=_DEFAULT)
async def scroll_to(params: SelectorParams, ctx: ActionContext) -> None:
    """Scroll an element into view."""
    await _act(ctx, params, "scroll_into_view_if_needed")


@action("highlight", params=HighlightParams, registry=_DEFAULT)
async def highlight(params: HighlightParams, ctx: ActionContext) -> None:
    """Outline an element, to show a person watching what the task is about to use."""
    timeout = _timeout(params, ctx)
    locator = await _element(ctx, params.selector, timeout)
    await _guard(
        params.selector,
        timeout,
        locator.evaluate("(el, c) => { el.style.outline = '3px solid ' + c; }", params.color),
    )


@action("waitFor", params=WaitForParams, registry=_DEFAULT)
async def wait_for(params: WaitForParams, ctx: ActionContext) -> None:
    """Wait until an element is in `state` (visible by default)."""
    await _element(ctx, params.selector, _timeout(params, ctx), state=params.state)


@action("getText", params=SelectorParams, registry=_DEFAULT)
async def get_text(params: SelectorParams, ctx: ActionContext) -> dict[str, Any]:
    """Read an element's visible text."""
    timeout = _timeout(params, ctx)
    locator = await _element(ctx, params.selector, timeout, state="attached")
    text = await _guard(params.selector, timeout, locator.inner_text(timeout=timeout))
    return {"text": text}


@action("screenshot", params=ScreenshotParams, registry=_DEFAULT)
async def screenshot(params: ScreenshotParams, ctx: ActionContext) -> ActionResult:
    """Take a PNG screenshot of the page (or of one element); it is returned as an image block."""
    timeout = _timeout(params, ctx)
    if params.selector:
        locator = await _element(ctx, params.selector, timeout)
        png = await _guard(params.selector, timeout, locator.screenshot(type="png", timeout=timeout))
    else:
        page = await ctx.page()
        png = await _guard("page", timeout, page.screenshot(type="png", full_page=params.full_page))
    data = base64.b64encode(png).decode("ascii")
    return ActionResult(
        value={"mimeType": "image/png", "size": len(png)}, parts=(ImagePart(data, "image/png"),)
    )


@action("goBack", params=HistoryParams, registry=_DEFAULT)
async def go_back(params: HistoryParams, ctx: ActionContext) -> dict[str, Any]:
    """Go back one page in the history."""
    page = await ctx.page()
    await _guard("history", params.timeout, page.go_back(timeout=params.timeout))
    check_navigation(ctx)
    return {"url": page.url}


@action("goForward", params=HistoryParams, registry=_DEFAULT)
async def go_forward(params: HistoryParams, ctx: ActionContext) -> dict[str, Any]:
    """Go forward one page in the history."""
    page = await ctx.page()
    await _guard("history", params.timeout, page.go_forward(timeout=params.timeout))
    check_navigation(ctx)
    return {"url": page.url}
