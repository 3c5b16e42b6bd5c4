"""The console's pages as HTML: one layout (`assets/page.html`, a `string.Template`) and the
pieces that fill it. Every value read from the journal, an approval row or a request is escaped
here (`esc`) before it reaches a page: names, arguments and reasons are data, never markup."""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from string import Template
from typing import Any
from urllib.parse import quote, urlencode

from ..runtime import RunRecord
from ..sanitize import visible_text
from ._approvals import Approval

__all__ = ["CallFilter", "asset", "esc", "layout"]

PAGES = (("approvals", "Approvals"), ("journal", "Journal"), ("calls", "Calls"), ("pins", "Pins"))
OUTCOMES = ("succeeded", "failed", "blocked", "cancelled", "outcome_unknown", "not_started", "running")


def esc(value: object) -> str:
    """`value` as text in HTML: control and invisible characters shown as escapes, markup escaped."""
    return html.escape(visible_text(str(value)), quote=True)


def esc_lines(text: str) -> str:
    """`esc` of each line, the line breaks kept (for `<pre>` blocks)."""
    return "\n".join(esc(line) for line in text.split("\n"))


@lru_cache(maxsize=8)
def asset(name: str) -> bytes:
    """One of the console's files shipped in the package (`toolbridge/console/assets/`)."""
    return files("toolbridge.console").joinpath("assets", name).read_bytes()


def when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch))


def layout(
    title: str,
    body: str,
    *,
    here: str = "",
    operator: str | None = None,
    csrf: str | None = None,
    where: str = "",
    notice: str | None = None,
    scripts: Sequence[str] = (),
) -> str:
    """A whole page: `body` is HTML built here; every other value is escaped."""
    nav = "".join(
        f'<a href="/console/{key}"{" class=here" if key == here else ""}>{label}</a>' for key, label in PAGES
    )
    who = ""
    if operator is not None:
        who = f"signed in as <b>{esc(operator)}</b>"
        if csrf is not None:
            who += (
                ' <form method="post" action="/console/logout">'
                f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
                "<button>Sign out</button></form>"
            )
    page = Template(asset("page.html").decode("utf-8"))
    return page.substitute(
        title=esc(title),
        where=esc(where),
        nav=nav,
        who=who,
        notice=f'<p class="notice" role="status">{esc(notice)}</p>' if notice else "",
        body=body,
        scripts="".join(f'<script src="/console/assets/{esc(s)}"></script>' for s in scripts),
    )


def login_form(problem: str | None = None, *, oauth_scopes: Sequence[str] = ()) -> str:
    note = f'<p class="notice" role="alert">{esc(problem)}</p>' if problem else ""
    hint = (
        '<p class="muted">or an OAuth access token for this gateway with the scope '
        f"<code>{esc(' '.join(oauth_scopes))}</code></p>"
        if oauth_scopes
        else ""
    )
    return (
        f'{note}<form class="card login" method="post" action="/console/login">'
        f'<label for="token">Operator token</label>{hint}'
        '<input id="token" name="token" type="password" autocomplete="current-password" required>'
        "<button>Sign in</button></form>"
    )


def _args_table(arguments: Mapping[str, object] | None) -> str:
    if arguments is None:
        return '<p class="muted">(arguments cleared once decided)</p>'
    if not arguments:
        return '<p class="muted">(no arguments)</p>'
    rows = "".join(
        f"<tr><th><code>{esc(k)}</code></th>"
        f"<td><pre>{esc_lines(json.dumps(v, ensure_ascii=False, indent=2, sort_keys=True))}</pre></td></tr>"
        for k, v in arguments.items()
    )
    return f'<table class="args">{rows}</table>'


def approvals_page(
    pending: Sequence[Approval], recent: Sequence[Approval], *, csrf: str | None, now: float
) -> str:
    """Pending approvals (each with every argument, and Approve / Deny unless read-only), then
    the latest decisions."""
    parts: list[str] = []
    if not pending:
        parts.append('<p class="muted" id="no-pending">No approval is waiting.</p>')
    for a in pending:
        left = max(0, int(a.expires_at - now))
        facts = (
            f"<dt>identity</dt><dd>{esc(a.identity)}</dd><dt>server</dt><dd>{esc(a.server)}</dd>"
            f"<dt>tool</dt><dd><code>{esc(a.tool)}</code> ({esc(a.effects)})</dd>"
            f"<dt>asked</dt><dd>{when(a.asked_at)} UTC, {left} s left</dd>"
            f"<dt>arguments SHA-256</dt><dd><code>{esc(a.args_sha256)}</code></dd>"
        )
        form = '<p class="muted">Read-only console: decide at the gateway\'s <code>/console/</code>.</p>'
        if csrf is not None:
            form = (
                f'<form class="actions" method="post" action="/console/approvals/{quote(a.id)}">'
                f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
                f'<label>Reason (optional)<input type="text" name="reason" maxlength="500"></label>'
                '<button class="approve" name="decision" value="approve">Approve</button>'
                '<button class="deny" name="decision" value="deny">Deny</button></form>'
            )
        parts.append(
            f'<section class="card approval" id="approval-{esc(a.id)}" data-tool="{esc(a.tool)}">'
            f"<dl>{facts}</dl><h2>Arguments</h2>{_args_table(a.arguments)}{form}</section>"
        )
    parts.append("<h2>Decided lately</h2>")
    if not recent:
        parts.append('<p class="muted">Nothing decided yet.</p>')
    else:
        rows = "".join(
            f"<tr><td>{when(a.decided_at)}</td><td>{esc(a.identity)}</td><td><code>{esc(a.tool)}</code></td>"
            f'<td class="outcome-{esc(a.status)}">{esc(a.status)}</td><td>{esc(a.decided_by or "-")}</td>'
            f"<td>{esc(a.reason or '')}</td></tr>"
            for a in recent
        )
        parts.append(
            '<table id="decided"><tr><th>decided (UTC)</th><th>identity</th><th>tool</th><th>decision</th>'
            f"<th>by</th><th>reason</th></tr>{rows}</table>"
        )
    return "".join(parts)


@dataclass(frozen=True)
class CallFilter:
    """The journal page's filters (empty: any)."""

    identity: str = ""
    tool: str = ""
    outcome: str = ""
    since: float | None = None
    until: float | None = None

    @classmethod
    def of(cls, query: Mapping[str, str]) -> CallFilter:
        outcome = query.get("outcome", "")
        return cls(
            identity=query.get("identity", "")[:200],
            tool=query.get("tool", "")[:200],
            outcome=outcome if outcome in OUTCOMES else "",
            since=_epoch(query.get("since", "")),
            until=_epoch(query.get("until", "")),
        )

    def keeps(self, run: RunRecord, call: Any) -> bool:
        if self.identity and (run.principal or "") != self.identity:
            return False
        if self.tool and call.tool_id != self.tool:
            return False
        if self.outcome and call.outcome != self.outcome:
            return False
        if self.since is not None and call.planned_at < self.since:
            return False
        return self.until is None or call.planned_at <= self.until


def _epoch(text: str) -> float | None:
    """`YYYY-MM-DDTHH:MM` (an HTML `datetime-local`, read as UTC) as epoch seconds, else None."""
    import calendar

    for fmt in ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"):
        try:
            return float(calendar.timegm(time.strptime(text[:19], fmt)))
        except ValueError:
            continue
    return None


def _local(epoch: float | None) -> str:
    return "" if epoch is None else time.strftime("%Y-%m-%dT%H:%M", time.gmtime(epoch))


def _outcome_cell(outcome: str, code: str | None) -> str:
    return f'<td class="outcome-{esc(outcome)}">{esc(outcome)}</td><td>{esc(code or "")}</td>'


def journal_page(runs: Iterable[RunRecord], f: CallFilter, *, identities: Sequence[str]) -> str:
    """The filters, then every call of the runs read that they keep, newest first."""
    options = "".join(
        f'<option value="{o}"{" selected" if o == f.outcome else ""}>{o}</option>' for o in OUTCOMES
    )
    known = "".join(f'<option value="{esc(i)}">' for i in identities)
    form = (
        '<form class="filters" method="get" action="/console/journal">'
        f'<label>identity<input name="identity" list="identities" value="{esc(f.identity)}"></label>'
        f'<datalist id="identities">{known}</datalist>'
        f'<label>tool<input name="tool" value="{esc(f.tool)}"></label>'
        f'<label>outcome<select name="outcome"><option value="">any</option>{options}</select></label>'
        f'<label>from (UTC)<input type="datetime-local" name="since" value="{_local(f.since)}"></label>'
        f'<label>to (UTC)<input type="datetime-local" name="until" value="{_local(f.until)}"></label>'
        "<button>Filter</button></form>"
    )
    rows: list[str] = []
    for run in runs:
        for call in reversed(run.calls):
            if not f.keeps(run, call):
                continue
            href = f"/console/journal/{quote(run.run_id, safe='')}/{quote(call.call_id, safe='')}"
            sent = "yes" if call.request_sent else "no"
            rows.append(
                f"<tr><td>{when(call.planned_at)}</td><td>{esc(run.principal or '-')}</td>"
                f'<td><a href="{esc(href)}"><code>{esc(call.tool_id)}</code></a></td>'
                f"<td>{esc(call.effects)}</td>{_outcome_cell(call.outcome, call.error_code)}<td>{sent}</td>"
                f'<td><a href="/console/journal/{quote(run.run_id, safe="")}">{esc(run.run_id)}</a></td></tr>'
            )
    if not rows:
        return form + '<p class="muted" id="no-calls">No call matches.</p>'
    return (
        form + '<table id="calls"><tr><th>planned (UTC)</th><th>identity</th><th>tool</th><th>effects</th>'
        "<th>outcome</th><th>code</th><th>sent</th><th>run</th></tr>" + "".join(rows[:1000]) + "</table>"
    )


def _facts(pairs: Iterable[tuple[str, object]]) -> str:
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs) + "</dl>"


def run_page(run: RunRecord) -> str:
    """One run: its evidence, and each of its calls."""
    outcome = run.outcome + (" (interrupted)" if run.interrupted else "")
    head = _facts(
        [
            ("run", run.run_id),
            ("identity", run.principal or "-"),
            ("by", run.agent or "-"),
            ("outcome", outcome),
            ("code", run.error_code or "-"),
            ("started (UTC)", when(run.started_at)),
            ("ended (UTC)", when(run.ended_at)),
            ("cost (micros)", run.cost_micros),
        ]
    )
    rows = "".join(
        f'<tr><td><a href="/console/journal/{quote(run.run_id, safe="")}/{quote(c.call_id, safe="")}">'
        f"{esc(c.call_id)}</a></td><td><code>{esc(c.tool_id)}</code></td><td>{esc(c.effects)}</td>"
        f"{_outcome_cell(c.outcome, c.error_code)}</tr>"
        for c in run.calls
    )
    table = (
        "<table><tr><th>call</th><th>tool</th><th>effects</th><th>outcome</th><th>code</th></tr>"
        f"{rows}</table>"
    )
    return f'<section class="card">{head}</section><h2>Calls</h2>{table}'


def call_page(run: RunRecord, call: Any) -> str:
    """One call's whole evidence (the journal keeps no arguments: their digest and size)."""
    facts = _facts(
        [
            ("run", run.run_id),
            ("identity", run.principal or "-"),
            ("call", call.call_id),
            ("tool", call.tool_id),
            ("tool version", call.tool_version or "-"),
            ("kind", call.kind),
            ("effects", call.effects),
            ("outcome", call.outcome),
            ("code", call.error_code or "-"),
            ("request sent", "yes" if call.request_sent else "no"),
            ("response received", "yes" if call.response_received else "no"),
            ("planned (UTC)", when(call.planned_at)),
            ("sent (UTC)", when(call.sent_at)),
            ("ended (UTC)", when(call.ended_at)),
            ("cost (micros)", call.cost_micros),
            ("arguments SHA-256", call.args_sha256),
            ("arguments size (bytes)", call.args_bytes),
        ]
    )
    unknown = ""
    if call.outcome == "outcome_unknown":
        unknown = (
            '<p class="notice" role="alert">The request was sent and no answer says what happened: '
            "check the remote system before retrying.</p>"
        )
    back = f'<p><a href="/console/journal/{quote(run.run_id, safe="")}">the whole run</a></p>'
    return f'{unknown}<section class="card">{facts}</section>{back}'


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def calls_page(recent: Sequence[Mapping[str, object]], *, live: bool) -> str:
    """Calls as they happen (server-sent events update the table; without them, a reload does)."""
    rows = "".join(
        f'<tr id="call-{esc(c["runId"])}-{esc(c["callId"])}"><td>{esc(c["time"])}</td>'
        f"<td>{esc(c['principal'])}</td><td>{esc(c['tool'])}</td><td>{esc(c['effects'])}</td>"
        f"{_outcome_cell(str(c['outcome']), _text_or_none(c.get('code')))}</tr>"
        for c in reversed(recent)
    )
    state = "connecting…" if live else "not live: this console reads a journal (reload to see more)"
    return (
        f'<p class="muted">Stream: <span id="live-state">{state}</span></p>'
        "<table><thead><tr><th>time (UTC)</th><th>identity</th><th>tool</th><th>effects</th>"
        f'<th>outcome</th><th>code</th></tr></thead><tbody id="live-calls">{rows}</tbody></table>'
    )


def query_of(f: CallFilter) -> str:
    return urlencode({k: v for k, v in f.__dict__.items() if v not in ("", None)})


def pins_page(reviews: Sequence[Any], *, csrf: str | None) -> str:
    """Tools, prompts, resources and templates withheld by their pins: the state, the hashes, a
    diff (when known) or the whole current definition, and **Accept** / **Keep withheld**."""
    if not reviews:
        return '<p class="muted" id="no-pins">Every pinned tool, prompt and resource matches its pin.</p>'
    parts: list[str] = []
    for r in reviews:
        facts = (
            f"<dt>server</dt><dd>{esc(r.server)}</dd><dt>{esc(r.kind)}</dt><dd><code>{esc(r.name)}</code></dd>"
            f"<dt>state</dt><dd>{esc(r.state)}</dd>"
            f"<dt>pinned</dt><dd><code>{esc(r.pinned or '-')}</code></dd>"
            f"<dt>now</dt><dd><code>{esc(r.current)}</code></dd>"
        )
        if r.diff:
            shown = f'<h2>Diff</h2><pre class="diff">{esc_lines(r.diff)}</pre>'
        else:
            why = (
                "New: the lock has no pin for it."
                if r.state == "new"
                else "The definition it had while pinned is not known here: the lock keeps only its hash, "
                "and this console never saw a definition with that hash (it keeps each one it sees, "
                "by hash, beside the lock file)."
            )
            shown = f'<p class="muted">{why}</p><h2>Definition now</h2><pre>{esc_lines(r.definition)}</pre>'

        form = ""
        if csrf is not None and r.state != "blocked":
            form = (
                '<form class="actions" method="post" action="/console/pins">'
                f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
                f'<input type="hidden" name="server" value="{esc(r.server)}">'
                f'<input type="hidden" name="kind" value="{esc(r.kind)}">'
                f'<input type="hidden" name="name" value="{esc(r.name)}">'
                f'<input type="hidden" name="digest" value="{esc(r.current)}">'
                '<button class="approve" name="decision" value="accept">Accept</button>'
                '<button class="deny" name="decision" value="keep">Keep withheld</button></form>'
            )
        parts.append(
            f'<section class="card pin" data-kind="{esc(r.kind)}" data-{esc(r.kind)}="{esc(r.name)}">'
            f"<dl>{facts}</dl>{shown}{form}</section>"
        )
    return "".join(parts)
