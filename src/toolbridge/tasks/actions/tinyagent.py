"""The rest of TinyAgent's action library, with its names and parameter names, on Playwright.

TinyAgent's actions run inside the page (its scheduler is a script of the app); here they drive
the page from outside through Playwright, with the same params and the same observable effect:

- `selectDate {selector, date, timeout?}` (`YYYY-MM-DD`; the lookup waits 10000 ms): picks the
  date in a TinyVue date picker panel as a person would (the header label opens the year table,
  which pages by 12 years; then the month table; then the `td.available` day); on an
  `<input type=date>` it fills the date. Result `{date}`.
- `insertBefore {content, selector, timeout?}`: inserts a `<div>` holding the HTML `content`
  before the element.
- `findDom {selector, timeout?}`: `{dom: [outerHTML]}`.
- `userGuide {selector, title, text, tip?, timeout?}`: shows a person the element and waits until
  they say they are done, through MCP elicitation; fails with a clear message when the client
  cannot be asked. Result `{action}`.
- `apiConfirmStart {url, method?, query?, timeout?}`: starts watching the page's requests for one
  matching `url`; `apiConfirmEnd` (same params) waits (20000 ms by default) for its response: a
  2xx status gives the response body as the result, anything else fails.
- `vueRouterPush` / `vueRouterReplace {to}` (a path or a location object), `vueRouterGo {steps}`,
  `vueRouterGoBack`, `vueRouterGoForward`: drive the page's own Vue Router (3 or 4). Result
  `{path, message}`: the route reached.

`url` of the apiConfirm pair is matched as TinyAgent matches it: against the request's path,
segment by segment, where `:name` matches any one segment and `*` anything; a `url` with a scheme
also fixes the origin; `method` (any case) and every `query` key must match too. The pair is
keyed by `url` within one run of a task, and the watch ends with the task.

The page's router is found as Vue exposes it: the `$router` of a Vue 3 app (`__vue_app__` on its
root element) or of a Vue 2 root instance (`__vue__`).
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import anyio
from pydantic import Field

from ...errors import ToolError, bounded
from ._context import ActionContext
from ._registry import _DEFAULT, ActionParams, NoParams, action
from .browser import _element, _guard, _Timeout, _timeout, check_navigation

if TYPE_CHECKING:
    from playwright.async_api import Locator, Request, Response

__all__ = [
    "ApiConfirmParams",
    "FindDomParams",
    "InsertBeforeParams",
    "SelectDateParams",
    "UserGuideParams",
    "VueRouterGoParams",
    "VueRouterToParams",
]

_MAX_DOM = 200_000
_MAX_BODY = 1_000_000


def _fail(message: str) -> ToolError:
    return ToolError(message, code="ERR_TOOL_ACTION_FAILED")


# --- selectDate ------------------------------------------------------------------------------------


class SelectDateParams(ActionParams):
    """`{selector, date, timeout?}`: `date` is `YYYY-MM-DD`; the lookup waits 10000 ms by default."""

    selector: str = Field(min_length=1)
    date: str
    timeout: int = Field(default=10_000, ge=0, le=600_000)


_DATE = re.compile(r"^\s*(\d{1,4})-(\d{1,2})-(\d{1,2})")


def _parse_date(text: str) -> tuple[int, int, int]:
    m = _DATE.match(text)
    if m is None:
        raise _fail(f"selectDate: {text[:40]!r} is not a date written YYYY-MM-DD")
    year, month, day = (int(g) for g in m.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31 and year >= 1):
        raise _fail(f"selectDate: {text[:40]!r} is not a date (month 1-12, day 1-31)")
    return year, month, day


async def _click(label: str, limit_ms: int, locator: Locator) -> None:
    await _guard(label, limit_ms, locator.wait_for(state="visible", timeout=limit_ms))
    await _guard(label, limit_ms, locator.click(timeout=limit_ms))


async def _cell_number(label: str, limit_ms: int, locator: Locator) -> int:
    text = await _guard(label, limit_ms, locator.inner_text(timeout=limit_ms))
    try:
        return int(str(text).strip())
    except ValueError:
        raise _fail(f"selectDate: {label} reads {bounded(str(text), 40)!r}, not a year") from None


@action("selectDate", params=SelectDateParams, registry=_DEFAULT)
async def select_date(params: SelectDateParams, ctx: ActionContext) -> dict[str, Any]:
    """Pick a date in a TinyVue date picker panel (or fill an `<input type=date>`)."""
    year, month, day = _parse_date(params.date)
    timeout = params.timeout
    panel = await _element(ctx, params.selector, timeout)
    kind = await _guard(params.selector, timeout, panel.evaluate("el => el.tagName + ':' + (el.type || '')"))
    if kind == "INPUT:date":
        await _guard(
            params.selector, timeout, panel.fill(f"{year:04d}-{month:02d}-{day:02d}", timeout=timeout)
        )
        return {"date": f"{year:04d}-{month:02d}-{day:02d}"}
    where = f"{params.selector!r}"
    await _click(
        f"{where} .tiny-date-picker__header-label",
        timeout,
        panel.locator(".tiny-date-picker__header-label").first,
    )
    first_label = f"{where} .tiny-year-table (first year)"
    first = await _cell_number(first_label, timeout, panel.locator(".tiny-year-table td").first)
    last = await _cell_number(
        f"{where} .tiny-year-table (last year)", timeout, panel.locator(".tiny-year-table td").last
    )
    if not first <= year <= last:
        button = ".tiny-date-picker__next-btn" if year > last else ".tiny-date-picker__prev-btn"
        pages = -(-(year - last) // 12) if year > last else -(-(first - year) // 12)
        if pages > 200:
            raise _fail(f"selectDate: {year} is more than 2400 years from the years shown")
        for _ in range(pages):
            await _click(f"{where} {button}", timeout, panel.locator(button).first)
    year_cell = panel.locator(f"xpath=.//*[normalize-space(text())='{year}']").first
    await _click(f"{where} year {year}", timeout, year_cell)
    await _click(
        f"{where} .tiny-month-table month {month}",
        timeout,
        panel.locator(".tiny-month-table td").nth(month - 1),
    )
    days = panel.locator(".tiny-date-table td.available")
    await _guard(f"{where} .tiny-date-table", timeout, days.first.wait_for(state="visible", timeout=timeout))
    if day > await days.count():
        raise _fail(f"selectDate: {year:04d}-{month:02d} has no day {day}")
    await _click(f"{where} .tiny-date-table day {day}", timeout, days.nth(day - 1))
    check_navigation(ctx)
    return {"date": f"{year:04d}-{month:02d}-{day:02d}"}


# --- insertBefore, findDom ------------------------------------------------------------------------------


class InsertBeforeParams(_Timeout):
    """`{content, selector, timeout?}`: `content` is HTML (it is not sanitised: the tool's author
    writes it, as in TinyAgent)."""

    content: str = ""
    selector: str = Field(min_length=1)


class FindDomParams(_Timeout):
    """`{selector, timeout?}`."""

    selector: str = Field(min_length=1)


@action("insertBefore", params=InsertBeforeParams, registry=_DEFAULT)
async def insert_before(params: InsertBeforeParams, ctx: ActionContext) -> None:
    """Insert a `<div>` holding `content` (HTML) before the element."""
    if not params.content:
        raise _fail("insertBefore needs a non-empty content (the HTML to insert)")
    timeout = _timeout(params, ctx)
    locator = await _element(ctx, params.selector, timeout, state="attached")
    inserted = await _guard(
        params.selector,
        timeout,
        locator.evaluate(
            """(el, html) => {
                if (!el.parentNode) { return false; }
                const div = document.createElement('div');
                div.innerHTML = html;
                el.parentNode.insertBefore(div, el);
                return true;
            }""",
            params.content,
        ),
    )
    if not inserted:
        raise _fail(f"insertBefore: {params.selector!r} has no parent to insert into")


@action("findDom", params=FindDomParams, registry=_DEFAULT)
async def find_dom(params: FindDomParams, ctx: ActionContext) -> dict[str, Any]:
    """Read the element's HTML (`outerHTML`, at most 200000 characters)."""
    timeout = _timeout(params, ctx)
    locator = await _element(ctx, params.selector, timeout, state="attached")
    html = await _guard(params.selector, timeout, locator.evaluate("el => el.outerHTML"))
    text = str(html)
    return {"dom": [text if len(text) <= _MAX_DOM else text[:_MAX_DOM] + "…"]}


# --- userGuide -------------------------------------------------------------------------------------------


class UserGuideParams(_Timeout):
    """`{selector, title, text, tip?, timeout?}`."""

    selector: str = Field(min_length=1)
    title: str = ""
    text: str = ""
    tip: str | None = None


_DEFAULT_TIP = "Continue after completing the operation"


@action("userGuide", params=UserGuideParams, registry=_DEFAULT)
async def user_guide(params: UserGuideParams, ctx: ActionContext) -> dict[str, Any]:
    """Show a person an element and wait until they say they are done (MCP elicitation)."""
    timeout = _timeout(params, ctx)
    locator = await _element(ctx, params.selector, timeout)
    if ctx.elicit is None:
        raise _fail(
            f"userGuide ({params.title or params.selector}) waits for a person, but the MCP client does "
            "not offer elicitation on this connection, so nobody can be asked: call the tool from a "
            "client with elicitation (protocol 2025-11-25 or earlier), or remove the step"
        )
    await _guard(params.selector, timeout, locator.scroll_into_view_if_needed(timeout=timeout))
    previous = await _guard(
        params.selector,
        timeout,
        locator.evaluate(
            "el => { const o = el.style.outline; el.style.outline = '3px solid #1476ff'; return o; }"
        ),
    )
    message = "\n".join(p for p in (params.title, params.text, params.tip or _DEFAULT_TIP) if p)
    schema = {
        "type": "object",
        "properties": {
            "done": {"type": "boolean", "title": "Done", "description": params.tip or _DEFAULT_TIP}
        },
    }
    try:
        answer = await ctx.elicit(message, schema)
    except ToolError:
        raise
    except Exception as exc:
        raise _fail(f"userGuide: asking the person failed: {type(exc).__name__}") from None
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(2), contextlib.suppress(Exception):
            await locator.evaluate("(el, o) => { el.style.outline = o; }", previous)
    choice = str(answer.get("action"))
    if choice != "accept" or answer.get("content", {}).get("done") is False:
        raise _fail(f"userGuide: the person did not continue (they answered {choice!r})")
    check_navigation(ctx)
    return {"action": choice}


# --- apiConfirmStart / apiConfirmEnd -------------------------------------------------------------------


class ApiConfirmParams(ActionParams):
    """`{url, method?, query?, timeout?}` (timeout in ms, default 20000)."""

    url: str = Field(min_length=1)
    method: str | None = None
    query: dict[str, str] | None = None
    timeout: int | None = Field(default=None, ge=1, le=600_000)


def _path_pattern(path: str) -> re.Pattern[str]:
    parts = []
    for segment in (s for s in path.split("/") if s):
        if segment.startswith(":"):
            parts.append("([^/]+)")
        elif segment == "*":
            parts.append("(.*)")
        else:
            parts.append(re.escape(segment))
    return re.compile("^/" + "/".join(parts) + "/?$")


def _matches(params: ApiConfirmParams, method: str, url: str) -> bool:
    want = urlsplit(params.url)
    got = urlsplit(url)
    if want.scheme and (want.scheme, want.netloc) != (got.scheme, got.netloc):
        return False
    if params.method and params.method.lower() != method.lower():
        return False
    if not _path_pattern(want.path if want.scheme else params.url.split("?")[0]).match(got.path or "/"):
        return False
    if params.query:
        got_query = dict(parse_qsl(got.query, keep_blank_values=True))
        return all(got_query.get(k) == v for k, v in params.query.items())
    return True


class _Watch:
    """One `apiConfirmStart`: the first matching request's response (or failure)."""

    def __init__(self, params: ApiConfirmParams) -> None:
        self.params = params
        self.response: Response | None = None
        self.failure: str | None = None
        self.done = anyio.Event()

    def on_response(self, response: Response) -> None:
        if not self.done.is_set() and _matches(self.params, response.request.method, response.url):
            self.response = response
            self.done.set()

    def on_failed(self, request: Request) -> None:
        if not self.done.is_set() and _matches(self.params, request.method, request.url):
            self.failure = request.failure or "failed"
            self.done.set()


def _watches(ctx: ActionContext) -> dict[str, _Watch]:
    found: dict[str, _Watch] = ctx.task_state.setdefault("apiConfirm", {})
    return found


@action("apiConfirmStart", params=ApiConfirmParams, registry=_DEFAULT)
async def api_confirm_start(params: ApiConfirmParams, ctx: ActionContext) -> None:
    """Start watching the page's requests for one matching `url` (`method`, `query`)."""
    page = await ctx.page()
    watch = _Watch(params)
    page.on("response", watch.on_response)
    page.on("requestfailed", watch.on_failed)

    async def stop() -> None:
        page.remove_listener("response", watch.on_response)
        page.remove_listener("requestfailed", watch.on_failed)

    ctx.cleanups.append(stop)
    _watches(ctx)[params.url] = watch


async def _body(response: Response) -> Any:
    raw = await response.body()
    text = raw[:_MAX_BODY].decode("utf-8", errors="replace")
    if "json" in (response.headers.get("content-type") or ""):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


@action("apiConfirmEnd", params=ApiConfirmParams, registry=_DEFAULT)
async def api_confirm_end(params: ApiConfirmParams, ctx: ActionContext) -> Any:
    """Wait for the response of the request `apiConfirmStart` watches: 2xx gives its body."""
    watch = _watches(ctx).get(params.url)
    if watch is None:
        raise _fail(
            f"apiConfirmEnd {params.url!r}: no apiConfirmStart with this url ran earlier in this task"
        )
    timeout = params.timeout or watch.params.timeout or 20_000
    with anyio.move_on_after(timeout / 1000):
        await watch.done.wait()
    del _watches(ctx)[params.url]
    if watch.failure is not None:
        raise _fail(f"apiConfirmEnd {params.url!r}: the request failed ({bounded(watch.failure, 200)})")
    if watch.response is None:
        raise _fail(f"apiConfirmEnd {params.url!r}: no matching request was answered within {timeout} ms")
    status = watch.response.status
    try:
        body = await _body(watch.response)
    except Exception:  # the page navigated away and the body is gone
        body = None
    if not 200 <= status < 300:
        shown = bounded(body if isinstance(body, str) else json.dumps(body, ensure_ascii=False), 300)
        raise _fail(f"apiConfirmEnd {params.url!r}: the request answered {status}: {shown}")
    return body


# --- Vue Router ------------------------------------------------------------------------------------------


class VueRouterToParams(ActionParams):
    """`{to}`: a path, or a location object (`{name, params, query}`, `{path}`)."""

    to: str | dict[str, Any]


class VueRouterGoParams(ActionParams):
    """`{steps}`: how far to go in the history (negative goes back); a number or its text."""

    steps: int


_ROUTER_JS = """async ([op, arg]) => {
  const routerOf = (el) => {
    if (el.__vue_app__ && el.__vue_app__.config && el.__vue_app__.config.globalProperties.$router) {
      return el.__vue_app__.config.globalProperties.$router;
    }
    const vm = el.__vue__;
    if (vm) { return (vm.$root && vm.$root.$router) || vm.$router || null; }
    return null;
  };
  let router = null;
  const all = document.querySelectorAll('*');
  for (let i = 0; i < all.length && i < 20000 && !router; i++) { router = routerOf(all[i]); }
  if (!router) {
    return {error: 'no Vue Router found on the page (no Vue 3 app or Vue 2 root with a $router)'};
  }
  const current = () => {
    const cr = router.currentRoute;
    const route = cr && 'value' in cr ? cr.value : cr;
    return route ? (route.fullPath || route.path || '') : '';
  };
  const before = current();
  try {
    if (op === 'push' || op === 'replace') {
      const failure = await router[op](arg);
      if (failure && failure instanceof Error && failure.type !== 16) {
        return {error: String(failure.message || failure)};
      }
    } else if (op === 'go') { router.go(arg); }
    else if (op === 'back') { router.back(); }
    else { router.forward(); }
  } catch (e) {
    return {error: String((e && (e.message || e.name)) || e)};
  }
  return {before: before, path: current()};
}"""

_CURRENT_JS = """() => {
  for (const el of document.querySelectorAll('*')) {
    const r = (el.__vue_app__ && el.__vue_app__.config.globalProperties.$router)
      || (el.__vue__ && ((el.__vue__.$root && el.__vue__.$root.$router) || el.__vue__.$router));
    if (r) {
      const route = r.currentRoute && 'value' in r.currentRoute ? r.currentRoute.value : r.currentRoute;
      return route ? (route.fullPath || route.path || '') : '';
    }
  }
  return null;
}"""


async def _drive(ctx: ActionContext, op: str, arg: Any, message: str) -> dict[str, Any]:
    page = await ctx.page()
    name = {"push": "vueRouterPush", "replace": "vueRouterReplace", "go": "vueRouterGo"}.get(
        op, "vueRouterGoBack" if op == "back" else "vueRouterGoForward"
    )
    try:
        with anyio.fail_after(30):
            outcome = await page.evaluate(_ROUTER_JS, [op, arg])
    except TimeoutError:
        raise _fail(f"{name}: the router did not settle within 30 s") from None
    except Exception as exc:
        raise _fail(
            f"{name}: {bounded(str(exc).strip().splitlines()[0] if str(exc).strip() else '', 300)}"
        ) from None
    if "error" in outcome:
        raise _fail(f"{name} failed: {bounded(str(outcome['error']), 300)}")
    path = outcome.get("path")
    if op in ("go", "back", "forward") and arg != 0:
        # history moves are asynchronous (popstate): wait a little for the route to change
        with anyio.move_on_after(2):
            while path == outcome.get("before"):
                await anyio.sleep(0.05)
                path = await page.evaluate(_CURRENT_JS)
    check_navigation(ctx)
    return {"path": path, "message": message}


@action("vueRouterPush", params=VueRouterToParams, registry=_DEFAULT)
async def vue_router_push(params: VueRouterToParams, ctx: ActionContext) -> dict[str, Any]:
    """`router.push(to)` on the page's Vue Router (3 or 4)."""
    return await _drive(ctx, "push", params.to, f"navigated to {json.dumps(params.to, ensure_ascii=False)}")


@action("vueRouterReplace", params=VueRouterToParams, registry=_DEFAULT)
async def vue_router_replace(params: VueRouterToParams, ctx: ActionContext) -> dict[str, Any]:
    """`router.replace(to)` on the page's Vue Router (3 or 4)."""
    return await _drive(
        ctx, "replace", params.to, f"replaced the route with {json.dumps(params.to, ensure_ascii=False)}"
    )


@action("vueRouterGo", params=VueRouterGoParams, registry=_DEFAULT)
async def vue_router_go(params: VueRouterGoParams, ctx: ActionContext) -> dict[str, Any]:
    """`router.go(steps)` on the page's Vue Router."""
    return await _drive(ctx, "go", params.steps, f"went {params.steps} steps in the history")


@action("vueRouterGoBack", params=NoParams, registry=_DEFAULT)
async def vue_router_go_back(params: NoParams, ctx: ActionContext) -> dict[str, Any]:
    """`router.back()` on the page's Vue Router."""
    return await _drive(ctx, "back", -1, "went back")


@action("vueRouterGoForward", params=NoParams, registry=_DEFAULT)
async def vue_router_go_forward(params: NoParams, ctx: ActionContext) -> dict[str, Any]:
    """`router.forward()` on the page's Vue Router."""
    return await _drive(ctx, "forward", 1, "went forward")
