"""PostgreSQL-only parts of the journal: migrations, readers that never write, secrets, shared budgets."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolbridge.cli import main
from toolbridge.errors import ConfigError
from toolbridge.runtime import PostgresJournal, create_runtime
from toolbridge.runtime._journal_postgres import LATEST, MIGRATIONS, migrate, redact_url


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()
    return {str(r[0]) for r in rows}


def test_a_reader_never_writes_and_never_migrates(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match="not a toolbridge journal"):
        PostgresJournal.open_existing(postgres_url)
    assert main(["runs", "--journal", postgres_url]) == 1
    assert "not a toolbridge journal" in capsys.readouterr().err
    assert _tables(postgres_url) == set()  # nothing created by either
    PostgresJournal(postgres_url).close()  # a writer migrates
    r = PostgresJournal.open_existing(postgres_url)
    try:
        with r._pool.connection() as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("INSERT INTO toolbridge_budgets (budget_id, max_micros) VALUES ('x', 1)")
        with pytest.raises(Exception, match="could not be written"):
            r.start_run("run_x", agent=None, profile="durable")
    finally:
        r.close()


def test_migrations_are_versioned_and_run_once_by_concurrent_writers(postgres_url: str) -> None:
    assert [v for v, _ in MIGRATIONS] == list(range(1, LATEST + 1))
    errors: list[BaseException] = []

    def open_writer() -> None:
        try:
            PostgresJournal(postgres_url).close()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    with psycopg.connect(postgres_url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM toolbridge_schema ORDER BY version")]
    assert versions == list(range(1, LATEST + 1))
    assert migrate(postgres_url) == LATEST
    assert {"toolbridge_runs", "toolbridge_calls", "toolbridge_budgets", "toolbridge_batch_items"} <= _tables(
        postgres_url
    )


def test_unmigrated_and_too_new_databases_are_refused(postgres_url: str) -> None:
    with pytest.raises(ConfigError, match="needs migrating"):
        PostgresJournal(postgres_url, migrate=False)
    migrate(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO toolbridge_schema (version, applied_at) VALUES (%s, 0)", (LATEST + 1,))
    for opener in (PostgresJournal, PostgresJournal.open_existing):
        with pytest.raises(ConfigError, match="newer than this toolbridge"):
            opener(postgres_url)


def test_the_password_is_never_shown(postgres_server_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    secret = "Pa55-w0rd-never-shown"
    bad = f"postgresql://someone:{secret}@127.0.0.1:1/nodb"
    with pytest.raises(ConfigError) as info:
        create_runtime("durable", journal=bad)
    assert secret not in str(info.value) and "127.0.0.1:1/nodb" in str(info.value)
    assert redact_url(bad) == "postgresql://127.0.0.1:1/nodb"
    assert main(["runs", "--journal", bad]) == 1
    err = capsys.readouterr().err
    assert secret not in err and err.count("\n") == 1 and "Traceback" not in err
    # wrong password on the real server: trust auth ignores it, so use an unknown database instead
    parts = psycopg.conninfo.conninfo_to_dict(postgres_server_url)
    wrong = f"postgresql://postgres:{secret}@{parts['host']}:{parts['port']}/no_such_db_here"
    proc = subprocess.run(
        [sys.executable, "-m", "toolbridge.cli", "runs", "--journal", wrong],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and secret not in proc.stderr + proc.stdout
    assert "no_such_db_here" in proc.stderr and "Traceback" not in proc.stderr


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tail=st.text(max_size=80))
def test_hostile_url_text_is_parsed_or_refused_in_one_line(tail: str) -> None:
    url = "postgresql://" + tail
    shown = redact_url(url)  # never raises, never shows what was after the user name
    assert shown.startswith("postgresql://") and "\n" not in shown


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tail=st.text(max_size=60).map(lambda t: t.replace("?", "").replace("=", "")))
def test_hostile_urls_are_one_config_error(tail: str) -> None:
    # the host is always the loopback's closed port 1: hostile text reaches only the database part
    url = "postgresql://u:p@127.0.0.1:1/" + tail
    try:
        PostgresJournal(url, connect_timeout_s=1)
    except ConfigError as exc:
        assert exc.code == "ERR_CONFIG"
        assert "\n" not in str(exc) and ":p@" not in str(exc)
    else:  # pragma: no cover - nothing listens there
        pytest.fail(f"{url!r} opened a journal")


def test_a_shared_budget_is_never_spent_twice(postgres_url: str) -> None:
    journals = [PostgresJournal(postgres_url, pool_size=4) for _ in range(2)]
    journals[0].open_shared("batch_b", 1_000)
    granted: list[int] = []
    lock = threading.Lock()

    def worker(j: PostgresJournal) -> None:
        for _ in range(60):
            if j.reserve_shared("batch_b", 30):
                with lock:
                    granted.append(30)
                j.settle_shared("batch_b", 30, 25)

    threads = [threading.Thread(target=worker, args=(journals[i % 2],)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    state = journals[1].shared("batch_b")
    assert state is not None and state["reserved_micros"] == 0
    assert state["spent_micros"] == 25 * len(granted) <= 1_000
    assert 1_000 - state["spent_micros"] < 30  # it was used up, not refused early
    assert not journals[0].reserve_shared("batch_b", 30)
    journals[0].open_shared("batch_b", 2_000)  # raising the maximum keeps what was spent
    assert journals[0].reserve_shared("batch_b", 30)
    for j in journals:
        j.close()


def test_a_manifest_runtime_journal_on_postgresql_from_a_secret(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "kind: Runtime\nmetadata: { name: Policy }\nprofile: durable\n"
        'journal: "${{ secrets.journalUrl }}"\npermissions: { allow: [model:scripted] }\n---\n'
        "kind: Ai.ScriptedModel\nmetadata: { name: M }\nturns: [{ text: hi }]\n---\n"
        "kind: Ai.Agent\nmetadata: { name: A }\nmodel: !ref M\n"
    )
    assert (
        main(["run", str(manifest), "--input", "q", "--json", "--secret", f"journalUrl={postgres_url}"]) == 0
    )
    run_id = json.loads(capsys.readouterr().out)["runId"]
    assert main(["runs", "--journal", postgres_url, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["runId"], r["outcome"]) for r in listed] == [(run_id, "succeeded")]


async def test_a_locked_postgresql_journal_never_sends_unrecorded(postgres_url: str) -> None:
    """Another session holds the calls table: "request sent" cannot be recorded, so nothing is sent."""
    import pydantic

    from toolbridge.agent import Agent
    from toolbridge.agent.models import ScriptedModel
    from toolbridge.runtime import define_tool

    class Empty(pydantic.BaseModel):
        pass

    class Out(pydantic.BaseModel):
        content: str

    executed: list[int] = []

    async def write(inp: Empty, ctx: object) -> Out:
        executed.append(1)
        return Out(content="done")

    journal = PostgresJournal(postgres_url, statement_timeout_ms=300)
    runtime = create_runtime(
        "durable", {"allow": ["model:scripted", "tool:w", "effect:write"]}, journal=journal
    )
    tool = define_tool("w", "1", "", Empty, Out, "write", [], execute=write)
    holder = psycopg.connect(postgres_url)
    holder.execute("LOCK TABLE toolbridge_calls IN ACCESS EXCLUSIVE MODE")  # held until rollback
    try:
        model = ScriptedModel([{"tool_calls": [{"name": "w", "arguments": {}}]}, "done"])
        with anyio.fail_after(30):
            result = await runtime.run(Agent(model, tools=[tool]), "go")
    finally:
        holder.rollback()
        holder.close()
    assert (result.outcome, result.error_code) == ("failed", "JOURNAL_UNAVAILABLE")
    assert executed == []
    record = runtime.inspect(result.run_id)
    assert record.outcome == "failed" and record.calls == []
    runtime.close()
