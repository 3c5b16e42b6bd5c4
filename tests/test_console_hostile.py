"""Hostile input to the console's parsers and pages (hypothesis): Host/Origin headers, filters,
forms, tokens and every value a page shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.console import Approval, ApprovalStore, ConsoleSettings, console_app
from toolbridge.console._auth import Operators, place_problem, same_origin
from toolbridge.console._pages import OUTCOMES, CallFilter, approvals_page, esc

TOKEN = "operator-token-0123456789"
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "[::1]"}


@given(st.text(max_size=200), st.one_of(st.none(), st.text(max_size=200)), st.booleans())
def test_place_problem_never_fails_and_refuses_foreign_hosts(
    host: str, origin: str | None, loopback: bool
) -> None:
    problem = place_problem(host, origin, loopback_only=loopback)
    assert problem is None or problem[0] in (421, 403)
    name = (
        host[: host.find("]") + 1]
        if host.startswith("[")
        else host.rsplit(":", 1)[0]
        if host.count(":") == 1
        else host
    )
    if loopback and name not in LOOPBACK_NAMES:
        assert problem == (421, "Invalid Host header")


@given(st.text(max_size=100), st.text(max_size=100))
def test_a_form_from_another_origin_is_never_same_origin(host: str, other: str) -> None:
    if other != host:
        assert not same_origin(host, f"http://{other}")
    assert not same_origin(host, f"http://{host}", "cross-site")


@given(st.text(max_size=500))
def test_escaped_text_holds_no_markup(text: str) -> None:
    shown = esc(text)
    assert not set(shown) & set("<>\"'")


@given(st.dictionaries(st.text(max_size=30), st.text(max_size=100), max_size=10))
def test_the_journal_filters_take_anything(query: dict[str, str]) -> None:
    f = CallFilter.of(query)
    assert f.outcome in ("", *OUTCOMES) and len(f.identity) <= 200 and len(f.tool) <= 200


@settings(max_examples=50)
@given(st.dictionaries(st.text(max_size=20), st.text(max_size=80), max_size=6), st.text(max_size=60))
def test_every_argument_is_shown_in_full_and_none_is_markup(arguments: dict[str, str], who: str) -> None:
    row = Approval("a1", "g", who, "srv", "t<x>", "write", arguments, "0" * 64, 0.0, 60.0, "pending")
    page = approvals_page([row], [], csrf="c", now=1.0)
    assert page.count("<pre>") == len(arguments)
    for key, value in arguments.items():
        assert esc(key) in page
        assert esc(json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)) in page
    tags = set(re.findall(r"<([a-z0-9]+)", page))
    assert tags <= {
        "section",
        "dl",
        "dt",
        "dd",
        "code",
        "h2",
        "table",
        "tr",
        "th",
        "td",
        "pre",
        "p",
        "form",
        "input",
        "label",
        "button",
    }


@given(st.binary(max_size=64))
def test_only_an_operators_own_token_signs_in(given_token: bytes) -> None:
    ops = Operators({TOKEN: "olga"})
    assert (ops.who(given_token) == "olga") == (given_token == TOKEN.encode())


async def test_forms_are_bounded_and_decisions_need_a_session(tmp_path: Path) -> None:
    store = ApprovalStore(str(tmp_path / "j.db"))
    app = console_app(ConsoleSettings(operators={TOKEN: "olga"}, approvals=store))
    transport = httpx.ASGITransport(app=app)
    base = "http://127.0.0.1:8000"
    try:
        async with httpx.AsyncClient(transport=transport, base_url=base) as http:
            bearer = {"Authorization": f"Bearer {TOKEN}", "Origin": base}
            no_session = await http.post("/console/approvals/x", data={"decision": "approve"}, headers=bearer)
            assert no_session.status_code == 403  # a bearer token reads; it cannot decide
            signed = await http.post("/console/login", data={"token": TOKEN}, headers={"Origin": base})
            assert signed.status_code == 303
            page = (await http.get("/console/approvals")).text
            csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
            huge = await http.post(
                "/console/approvals/x",
                content=b"a=" + b"x" * 20_000,
                headers={"Origin": base, "Content-Type": "application/x-www-form-urlencoded"},
            )
            assert huge.status_code == 413
            odd = await http.post(
                "/console/approvals/x", data={"decision": "maybe", "csrf": csrf}, headers={"Origin": base}
            )
            assert odd.status_code == 400
            unknown = await http.post(
                "/console/approvals/nope",
                data={"decision": "approve", "csrf": csrf},
                headers={"Origin": base},
            )
            assert unknown.status_code == 303 and unknown.headers["location"].endswith("done=late")
            assert (await http.get("/console/assets/..%2f_app.py")).status_code == 404
            assert (await http.get("/console/journal/run_x")).status_code == 404
    finally:
        store.close()
