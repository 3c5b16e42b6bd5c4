"""Prompts and resources with PostgreSQL: their pins stored beside the tools' (and a table from
before they were pinned migrated in place), and reads/gets journaled through the async journal."""

from __future__ import annotations

import os

import anyio
import mcp_types as types
import psycopg
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from test_gateway_side import SECRETS, gateway_params, side_log, side_manifest

from toolbridge.gateway._pins_pg import PgPinStore
from toolbridge.pinning import ServerLock
from toolbridge.runtime import PostgresJournal

H = "sha256:" + "a" * 64


async def test_side_pins_round_trip_and_an_older_table_gains_them(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # the table as an older release made it
        conn.execute(
            """CREATE TABLE toolbridge_gateway_pin_servers (gateway TEXT NOT NULL, server TEXT NOT NULL,
            instructions TEXT, version BIGINT NOT NULL, written_by TEXT NOT NULL,
            written_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (gateway, server))"""
        )
        conn.execute("INSERT INTO toolbridge_gateway_pin_servers VALUES ('G', 'old', NULL, 3, 'h:1', 1.0)")
    store = PgPinStore(postgres_url, "G")
    try:
        with anyio.fail_after(60):
            await store.setup()
            old = await store.load("old")
            assert old is not None and old.version == 3
            assert (old.lock.prompts, old.lock.resources, old.lock.templates) == ({}, {}, {})  # none recorded
            lock = ServerLock(
                tools={"t": H},
                prompts={"story": H, "it's": H},
                resources={"side://doc": H},
                templates={"side://items/{id}": H},
            )
            await store.save("new", lock)
            stored = await store.load("new")
        assert stored is not None and stored.lock == lock
    finally:
        store.close()


async def test_reads_and_gets_are_journaled_in_postgres(
    tmp_path: os.PathLike[str], postgres_url: str
) -> None:
    from pathlib import Path

    manifest = side_manifest(Path(tmp_path))
    text = manifest.read_text(encoding="utf-8").replace(
        "journal: journal.db", 'journal: "${{ secrets.journalUrl }}"'
    )
    manifest.write_text(text, encoding="utf-8")
    SECRETS["JOURNAL_URL"] = postgres_url
    try:
        async with Client(gateway_params(manifest), mode="legacy") as client:
            await client.get_prompt("sd_story", {"genre": "x"})
            await client.read_resource("side://items/4")
            with pytest.raises(MCPError) as info:
                await client.read_resource("side://fail")
            assert info.value.error.code == -32002
            ref = types.ResourceTemplateReference(type="ref/resource", uri="side://items/{id}")
            await client.complete(ref, {"name": "id", "value": ""})
    finally:
        del SECRETS["JOURNAL_URL"]
    assert "get:story" in side_log(Path(tmp_path))
    journal = PostgresJournal(postgres_url)
    try:
        rows = []
        for run in journal.list_runs(100):
            record = journal.get_run(run.run_id)
            assert record is not None
            rows += [(record.principal, c.kind, c.tool_id, c.outcome, c.error_code) for c in record.calls]
    finally:
        journal.close()
    assert sorted(rows) == sorted(
        [
            ("me", "prompts/get", "sd_story", "succeeded", None),
            ("me", "resources/read", "side://items/4", "succeeded", None),
            ("me", "resources/read", "side://fail", "failed", "TOOL_FAILED"),
            ("me", "completion/complete", "side://items/{id}", "succeeded", None),
        ]
    )
