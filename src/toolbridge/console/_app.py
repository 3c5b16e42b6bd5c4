"""The console as an ASGI app (Starlette): server-rendered pages under `/console/`.

| path | what it reads or does |
|---|---|
| `GET /console/login`, `POST /console/login` | the sign-in form; a right token starts a session |
| `GET /console/approvals` | pending approvals, every argument in full, **Approve** / **Deny** |
| `POST /console/approvals/{id}` | decide one (`decision=approve|deny`, optional `reason`; CSRF token) |
| `GET /console/journal` | calls of the latest runs, filtered by identity, tool, outcome, time |
| `GET /console/journal/{run}` and `/console/journal/{run}/{call}` | one run's, one call's evidence |
| `GET /console/calls` and `/console/calls/events` | live calls (server-sent events), then their outcome |
| `POST /console/logout` | end the session |

Every page needs a signed-in operator (`_auth`): anyone else gets 401 and the sign-in form, a form
without its CSRF token or from another origin 403. Reading works without JavaScript (the live
table is the only script). Responses are never cached, never framed, and run no inline script
(`Content-Security-Policy`). A console made `readonly` (`toolbridge console JOURNAL`) shows the
approvals without their buttons and refuses every decision.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import ToolbridgeError, bounded
from ..runtime import Journal, JournalBackend, PostgresJournal, RunRecord, is_postgres_url
from . import _pages as pages
from ._approvals import MAX_REASON, ApprovalStore
from ._auth import COOKIE, SESSION_S, OAuthOperators, Operators, Refusal, Session, place_problem, same_origin
from ._live import LiveCalls
from ._pins import KINDS, PinBoard

__all__ = ["ConsoleSettings", "console_app"]

log = logging.getLogger("toolbridge.console")

RUNS_READ = 200
"""The journal page reads the latest this many runs (then filters their calls)."""
MAX_FORM = 16 * 1024
STREAM_S = 3600.0
"""A live stream ends after this long (the browser reconnects)."""
_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
}
_ASSETS = {"console.css": "text/css; charset=utf-8", "live.js": "text/javascript; charset=utf-8"}


@dataclass
class ConsoleSettings:
    """What one console serves.

    Attributes:
        operators: sign-in token -> operator name.
        approvals: the approval rows (None: no approval route).
        journal: the journal's SQLite path or PostgreSQL URL (None: a journal in memory, unread).
        readonly: never decide anything (`toolbridge console JOURNAL`).
        loopback_only: served on a loopback address (Host and Origin must be loopback).
        where: what the console is of (a gateway's name, a journal), shown in the header.
        identities: names offered in the journal page's identity filter.
        live: live calls (None: the Calls page reads the journal).
        on_decided: told each decision's approval id (wakes the call waiting here at once).
        pins: the gateway's pinned upstreams (None: no Pins page to act on).
        oauth: operators known by OAuth access tokens with the console's scopes (None: none).
    """

    operators: Mapping[str, str]
    approvals: ApprovalStore | None = None
    journal: str | None = None
    readonly: bool = False
    loopback_only: bool = True
    where: str = ""
    identities: Sequence[str] = ()
    live: LiveCalls | None = None
    on_decided: Callable[[str], None] | None = None
    pins: PinBoard | None = None
    oauth: OAuthOperators | None = None
    _operators: Operators = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._operators = Operators(self.operators)


def _html(text: str, status: int = 200, headers: Mapping[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers={**_HEADERS, **(headers or {})})


def _plain(text: str, status: int) -> Response:
    return Response(text, status_code=status, media_type="text/plain", headers=_HEADERS)


Handler = Callable[[Request, Session | None, str], Awaitable[Response]]


def console_app(settings: ConsoleSettings) -> Starlette:
    """The console's ASGI app (see the module docstring); its paths start with `/console/`."""
    ops = settings._operators

    async def who(request: Request) -> tuple[Session | None, str | Refusal | None]:
        """The browser's session, or the operator named by a bearer token (no session): an
        operator's own token, else an OAuth access token with the console's scopes."""
        session = ops.session(request.cookies.get(COOKIE))
        if session is not None:
            return session, session.operator
        header = request.headers.get("authorization", "")
        if header[:7].lower() != "bearer " or not header[7:].strip():
            return None, None
        token = header[7:].strip()
        name = ops.who(token)
        if name is not None or settings.oauth is None:
            return None, name
        found = await settings.oauth.who(token)
        return None, found if isinstance(found, Refusal) else found[0]

    def sign_in_page(problem: str | None = None, status: int = 401) -> Response:
        form = pages.login_form(problem, oauth_scopes=settings.oauth.scopes if settings.oauth else ())
        return _html(
            pages.layout("Sign in", form, where=settings.where),
            status,
            {"WWW-Authenticate": 'Bearer realm="toolbridge console"'} if status == 401 else None,
        )

    def guarded(handler: Handler, *, form: bool = False) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            problem = place_problem(
                request.headers.get("host"),
                request.headers.get("origin"),
                loopback_only=settings.loopback_only,
            )
            if problem is not None:
                return _plain(problem[1], problem[0])
            session, operator = await who(request)
            if isinstance(operator, Refusal):
                log.info("console: a bearer token was refused: %s", operator.reason)
                if operator.status == 503:
                    return _unavailable(operator)
                return sign_in_page(operator.reason, operator.status)
            if operator is None:
                return sign_in_page()
            if form:
                if session is None or not _same_origin(request):
                    return _plain("forbidden: this form must come from the console's own page", 403)
                fields = await _form(request)
                if fields is None:
                    return _plain("the form is too large", 413)
                if not Operators.csrf_ok(session, fields.get("csrf")):
                    return _plain("forbidden: the form's token is missing or stale; reload the page", 403)
                request.state.fields = fields
            return await handler(request, session, operator)

        return endpoint

    def page(title: str, body: str, here: str, session: Session | None, operator: str, **kw: Any) -> Response:
        csrf = session.csrf if session is not None else None
        return _html(
            pages.layout(title, body, here=here, operator=operator, csrf=csrf, where=settings.where, **kw)
        )

    async def login_page(request: Request) -> Response:
        problem = place_problem(
            request.headers.get("host"), request.headers.get("origin"), loopback_only=settings.loopback_only
        )
        if problem is not None:
            return _plain(problem[1], problem[0])
        if request.method == "GET":
            return sign_in_page(status=200)
        if not _same_origin(request):
            return _plain("forbidden: sign in from the console's own page", 403)
        fields = await _form(request)
        token = (fields or {}).get("token") or ""
        operator, until = ops.who(token), None
        if operator is None and settings.oauth is not None and token.strip():
            found = await settings.oauth.who(token.strip())
            if isinstance(found, Refusal):
                log.info("console: a sign-in was refused: %s", found.reason)
                if found.status == 503:
                    return _unavailable(found)
                return sign_in_page(found.reason, found.status)
            operator, until = found
        if operator is None:
            return sign_in_page("That token is not an operator's.")
        log.info("console: operator %s signed in", operator)
        response = RedirectResponse("/console/approvals", status_code=303, headers=_HEADERS)
        response.set_cookie(
            COOKIE,
            ops.sign_in(operator, until=until),
            max_age=int(SESSION_S),
            path="/console/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(request: Request, session: Session | None, operator: str) -> Response:
        ops.sign_out(request.cookies.get(COOKIE))
        response = RedirectResponse("/console/login", status_code=303, headers=_HEADERS)
        response.delete_cookie(COOKIE, path="/console/")
        return response

    async def home(request: Request) -> Response:
        return RedirectResponse("/console/approvals", status_code=303, headers=_HEADERS)

    async def approvals(request: Request, session: Session | None, operator: str) -> Response:
        store = settings.approvals
        if store is None:
            body = '<p class="muted">This console has no approval route (no journal beside it).</p>'
            return page("Approvals", body, "approvals", session, operator)
        try:
            pending, recent = await store.pending(), await store.recent(20)
        except ToolbridgeError as exc:
            return page("Approvals", _unreadable(exc), "approvals", session, operator)
        csrf = None if settings.readonly or session is None else session.csrf
        done = request.query_params.get("done", "")
        notice = {
            "approved": "Approved: the call goes on.",
            "denied": "Denied: the call is refused.",
            "late": "Already decided (by another operator, or timed out): nothing changed.",
        }.get(done)
        body = pages.approvals_page(pending, recent, csrf=csrf, now=time.time())
        return page("Approvals", body, "approvals", session, operator, notice=notice)

    async def decide(request: Request, session: Session | None, operator: str) -> Response:
        store = settings.approvals
        if store is None or settings.readonly:
            return _plain("forbidden: this console only reads", 403)
        fields: dict[str, str] = request.state.fields
        decision = fields.get("decision")
        if decision not in ("approve", "deny"):
            return _plain("the decision must be approve or deny", 400)
        approval_id = request.path_params["approval_id"]
        reason = fields.get("reason", "")[:MAX_REASON]
        try:
            won = await store.decide(approval_id, by=operator, approve=decision == "approve", reason=reason)
        except ToolbridgeError as exc:
            return _plain(f"the decision could not be stored: {bounded(str(exc), 200)}", 503)
        if won:
            log.info("console: approval %s %s by %s", approval_id, decision + "d", operator)
            if settings.on_decided is not None:
                settings.on_decided(approval_id)
        done = ("approved" if decision == "approve" else "denied") if won else "late"
        return RedirectResponse(f"/console/approvals?done={done}", status_code=303, headers=_HEADERS)

    async def journal(request: Request, session: Session | None, operator: str) -> Response:
        if settings.journal is None:
            body = '<p class="muted">The journal is in memory: nothing to read here.</p>'
            return page("Journal", body, "journal", session, operator)
        f = pages.CallFilter.of(request.query_params)
        try:
            runs = await _read(settings.journal, _latest_runs)
        except ToolbridgeError as exc:
            return page("Journal", _unreadable(exc), "journal", session, operator)
        body = pages.journal_page(runs, f, identities=settings.identities)
        return page("Journal", body, "journal", session, operator)

    async def run_or_call(request: Request, session: Session | None, operator: str) -> Response:
        run_id = request.path_params["run_id"]
        call_id = request.path_params.get("call_id")
        if settings.journal is None:
            return _html(pages.layout("Not found", "", where=settings.where), 404)
        try:
            run = await _read(settings.journal, lambda j: j.get_run(run_id))
        except ToolbridgeError as exc:
            return page("Journal", _unreadable(exc), "journal", session, operator)
        call = None if run is None else next((c for c in run.calls if c.call_id == call_id), None)
        if run is None or (call_id is not None and call is None):
            return _html(pages.layout("Not found", '<p class="muted">No such run or call.</p>'), 404)
        if call is None:
            return page(f"Run {run.run_id}", pages.run_page(run), "journal", session, operator)
        return page(
            f"Call {call.call_id} of {call.tool_id}", pages.call_page(run, call), "journal", session, operator
        )

    async def calls(request: Request, session: Session | None, operator: str) -> Response:
        live = settings.live
        if live is not None:
            body = pages.calls_page(live.recent(), live=True)
            return page("Calls", body, "calls", session, operator, scripts=["live.js"])
        recent: list[dict[str, object]] = []
        if settings.journal is not None:
            try:
                runs = await _read(settings.journal, _latest_runs)
            except ToolbridgeError as exc:
                return page("Calls", _unreadable(exc), "calls", session, operator)
            recent = [_call_row(r, c) for r in reversed(runs) for c in r.calls][-pages_keep() :]
        return page("Calls", pages.calls_page(recent, live=False), "calls", session, operator)

    async def events(request: Request, session: Session | None, operator: str) -> Response:
        live = settings.live
        if live is None:
            return _plain("no live calls here", 404)
        try:
            stream_cm = live.stream()
            stream = stream_cm.__enter__()
        except LookupError:
            return _plain("too many live streams", 503)

        async def body() -> AsyncIterator[bytes]:
            try:
                yield b": live calls\n\n"
                with anyio.move_on_after(STREAM_S):
                    while True:
                        with anyio.move_on_after(15):
                            row = await stream.receive()
                            yield f"event: call\ndata: {json.dumps(row)}\n\n".encode()
                            continue
                        yield b": keep-alive\n\n"
            finally:
                stream_cm.__exit__(None, None, None)

        return StreamingResponse(body(), media_type="text/event-stream", headers=_HEADERS)

    async def pins(request: Request, session: Session | None, operator: str) -> Response:
        board = settings.pins
        if board is None:
            body = (
                '<p class="muted">No pinned server here (a gateway with a <code>lock:</code> has them).</p>'
            )
            return page("Pins", body, "pins", session, operator)
        try:
            reviews = await board.reviews()
        except ToolbridgeError as exc:
            return page("Pins", _unreadable(exc), "pins", session, operator)
        csrf = None if settings.readonly or session is None else session.csrf
        notice = {
            "accepted": "Accepted: the lock file pins it now; the gateway serves it within a second.",
            "kept": "Kept withheld: nothing written.",
            "again": "It changed again since you read it: review it anew.",
        }.get(request.query_params.get("done", ""))
        return page("Pins", pages.pins_page(reviews, csrf=csrf), "pins", session, operator, notice=notice)

    async def pin_decision(request: Request, session: Session | None, operator: str) -> Response:
        board = settings.pins
        if board is None or settings.readonly:
            return _plain("forbidden: no pins to decide here", 403)
        fields: dict[str, str] = request.state.fields
        decision = fields.get("decision")
        server, name, digest = fields.get("server", ""), fields.get("name", ""), fields.get("digest", "")
        kind = fields.get("kind", "tool")
        if decision == "keep":
            log.info("console: %s kept %r of %r withheld", operator, bounded(name, 100), bounded(server, 100))
            return RedirectResponse("/console/pins?done=kept", status_code=303, headers=_HEADERS)
        if decision != "accept" or not (server and name and digest) or kind not in KINDS:
            return _plain(
                "the decision must be accept or keep, for a server, a kind, a name and its hash", 400
            )
        try:
            written = await board.accept(server, name, digest, kind)
        except ToolbridgeError as exc:
            return _plain(f"the lock could not be written: {bounded(str(exc), 200)}", 503)
        if written:
            log.info(
                "console: %s accepted %s %r of %r (%s)",
                operator,
                kind,
                bounded(name, 100),
                bounded(server, 100),
                digest,
            )
        done = "accepted" if written else "again"
        return RedirectResponse(f"/console/pins?done={done}", status_code=303, headers=_HEADERS)

    async def assets(request: Request) -> Response:
        name = request.path_params["name"]
        kind = _ASSETS.get(name)
        if kind is None:
            return _plain("not found", 404)
        return Response(
            pages.asset(name), media_type=kind, headers={**_HEADERS, "Cache-Control": "max-age=300"}
        )

    routes = [
        Route("/console", home),
        Route("/console/", home),
        Route("/console/login", login_page, methods=["GET", "POST"]),
        Route("/console/logout", guarded(logout, form=True), methods=["POST"]),
        Route("/console/assets/{name}", assets),
        Route("/console/approvals", guarded(approvals)),
        Route("/console/approvals/{approval_id}", guarded(decide, form=True), methods=["POST"]),
        Route("/console/journal", guarded(journal)),
        Route("/console/journal/{run_id}", guarded(run_or_call)),
        Route("/console/journal/{run_id}/{call_id}", guarded(run_or_call)),
        Route("/console/calls", guarded(calls)),
        Route("/console/calls/events", guarded(events)),
        Route("/console/pins", guarded(pins)),
        Route("/console/pins", guarded(pin_decision, form=True), methods=["POST"]),
    ]
    return Starlette(routes=routes)


def pages_keep() -> int:
    from ._live import KEEP

    return KEEP


def _unavailable(refusal: Refusal) -> Response:
    return Response(
        refusal.reason,
        status_code=503,
        media_type="text/plain",
        headers={**_HEADERS, "Retry-After": str(refusal.retry_after_s or 5)},
    )


def _same_origin(request: Request) -> bool:
    headers = request.headers
    return same_origin(headers.get("host"), headers.get("origin"), headers.get("sec-fetch-site"))


def _call_row(run: RunRecord, call: Any) -> dict[str, object]:
    return {
        "runId": run.run_id,
        "callId": call.call_id,
        "time": time.strftime("%H:%M:%S", time.gmtime(call.planned_at)),
        "principal": run.principal or "-",
        "tool": call.tool_id,
        "effects": call.effects,
        "outcome": call.outcome,
        "code": call.error_code,
    }


def _unreadable(exc: ToolbridgeError) -> str:
    why = pages.esc(bounded(str(exc), 300))
    return f'<p class="notice" role="alert">The journal could not be read: {why}</p>'


async def _form(request: Request) -> dict[str, str] | None:
    """The request's urlencoded form (None past `MAX_FORM` bytes)."""
    from urllib.parse import parse_qsl

    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return None
    pairs = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=20)
    return {k: v for k, v in pairs}


def _latest_runs(journal: JournalBackend) -> list[RunRecord]:
    runs = journal.list_runs(RUNS_READ)
    return [journal.get_run(r.run_id) or r for r in runs]


async def _read(location: str, work: Callable[[JournalBackend], Any]) -> Any:
    """`work(reader)` on a read-only reader of the journal, in a worker thread.

    Raises:
        ToolbridgeError: the journal cannot be opened or read.
    """

    def run() -> Any:
        reader: JournalBackend = (
            PostgresJournal.open_existing(location)
            if is_postgres_url(location)
            else Journal.open_existing(location)
        )
        try:
            return work(reader)
        finally:
            reader.close()

    with anyio.fail_after(30):
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
