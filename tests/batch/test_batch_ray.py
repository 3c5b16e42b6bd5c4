"""Ray mode on a real local Ray cluster (two CPUs), shared by the tests of this module.

Cases: the same results as local mode for a scripted model; workers that do not inherit the
driver's secrets; a batch budget shared by two actors; a worker SIGKILLed mid-batch; the driver
SIGKILLed and the batch resumed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from batch_helpers import (
    check_no_effect_twice,
    kill_when_started,
    read_out,
    tally_count,
    write_inputs,
    write_manifest,
)

from toolbridge.batch import run_batch
from toolbridge.batch._ray import start_local_cluster, stop_local_cluster

SECRET_ENV = "TOOLBRIDGE_TEST_DRIVER_ONLY_SECRET"


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """A local two-CPU Ray cluster for this module; its address for other drivers."""

    os.environ[SECRET_ENV] = "driver-only-value"
    try:
        info = start_local_cluster(num_cpus=2)
    finally:
        del os.environ[SECRET_ENV]
    try:
        yield str(info.address_info["address"])
    finally:
        stop_local_cluster()  # ray.shutdown(), then the cluster's reaper ends what is left


def _comparable(lines: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps({k: v for k, v in x.items() if k != "runId"}, sort_keys=True) for x in lines)


def _actor_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd.startswith(b"ray::_BatchActor"):
            pids.append(int(entry))
    return pids


@pytest.mark.timeout(300)
async def test_ray_and_local_give_the_same_results_and_workers_lack_driver_secrets(
    ray_cluster: str, tmp_path: Path
) -> None:
    import ray

    manifest, tally = write_manifest(tmp_path)
    inputs = write_inputs(tmp_path / "in.jsonl", 12)
    local = await run_batch(
        manifest, inputs=inputs, out=tmp_path / "local.jsonl", journal=str(tmp_path / "l.db")
    )
    remote = await run_batch(
        manifest,
        inputs=inputs,
        out=tmp_path / "ray.jsonl",
        journal=str(tmp_path / "r.db"),
        ray=True,
        actors=2,
    )
    assert (local.succeeded, remote.succeeded, remote.mode) == (12, 12, "ray")
    assert _comparable(read_out(tmp_path / "local.jsonl")) == _comparable(read_out(tmp_path / "ray.jsonl"))
    assert tally_count(tally) == 24

    @ray.remote(num_cpus=0)
    def worker_env() -> dict[str, str]:
        return dict(os.environ)

    env = ray.get(worker_env.remote(), timeout=60)
    assert SECRET_ENV not in env and "PATH" in env
    assert ray.is_initialized()  # run_batch left the cluster it did not start running


@pytest.mark.timeout(300)
async def test_a_batch_budget_is_shared_by_two_actors(
    ray_cluster: str, postgres_url: str, tmp_path: Path
) -> None:
    manifest, tally = write_manifest(tmp_path, cost=10)
    inputs = write_inputs(tmp_path / "in.jsonl", 10)
    out = tmp_path / "out.jsonl"
    summary = await run_batch(
        manifest,
        inputs=inputs,
        out=out,
        journal=postgres_url,
        ray=True,
        actors=2,
        budget_micros=45,
        batch_id="rb",
        new=True,
    )
    assert (summary.succeeded, summary.skipped, summary.cost_micros) == (4, 6, 40)
    assert tally_count(tally) == 4
    from toolbridge.batch._driver import open_journal
    from toolbridge.batch._store import open_store

    journal = open_journal(postgres_url)
    store = open_store(journal)
    assert store.budget("rb") == {"max_micros": 45, "spent_micros": 40, "reserved_micros": 0}
    pids = {journal.get_run(x["runId"]).pid for x in read_out(out) if x["runId"]}  # type: ignore[union-attr]
    journal.close()
    assert len(pids) == 2 and os.getpid() not in pids  # both actors ran, the driver ran nothing


@pytest.mark.timeout(300)
async def test_a_worker_killed_mid_batch(ray_cluster: str, tmp_path: Path) -> None:
    manifest, tally = write_manifest(tmp_path, slow_s=1.0)
    inputs = write_inputs(tmp_path / "in.jsonl", 8)
    out = tmp_path / "out.jsonl"
    killed: list[int] = []

    async def killer() -> None:
        with anyio.fail_after(120):
            while tally_count(tally) < 2 or len(_actor_pids()) < 2:  # noqa: ASYNC110 - polling files
                await anyio.sleep(0.05)
        pid = int(tally.read_text().splitlines()[0].split()[1])  # an actor with a slow call in flight
        assert pid in _actor_pids()
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    async with anyio.create_task_group() as tg:
        tg.start_soon(killer)
        summary = await run_batch(
            manifest,
            inputs=inputs,
            out=out,
            journal=str(tmp_path / "j.db"),
            ray=True,
            actors=2,
            concurrency=2,
        )
    assert killed
    lines = read_out(out)
    check_no_effect_twice(lines, str(tmp_path / "j.db"), tally, 8)
    unknown = [x for x in lines if x["outcome"] == "outcome_unknown"]
    assert 1 <= len(unknown) <= 2 and summary.unknown == len(unknown)  # the killed actor's calls in flight


@pytest.mark.timeout(300)
def test_the_driver_killed_and_the_batch_resumed_on_ray(ray_cluster: str, tmp_path: Path) -> None:
    # Each effectful call lasts 5 s while the driver is killed, so the call in flight is still in
    # flight when Ray ends the dead driver's actors (at 1 s, a loaded machine let the actor finish
    # it first); the resumed batch runs with 0.2 s calls (the manifest is read again on resume).
    manifest, tally = write_manifest(tmp_path, slow_s=5.0)
    inputs = write_inputs(tmp_path / "in.jsonl", 8)
    out = tmp_path / "out.jsonl"
    journal = str(tmp_path / "j.db")
    cmd = [
        sys.executable,
        "-m",
        "toolbridge.cli",
        "batch",
        str(manifest),
        "--inputs",
        str(inputs),
        "--out",
        str(out),
    ]
    cmd += ["--batch-id", "rk", "--new", "--journal", journal, "--ray", ray_cluster, "--concurrency", "1"]
    cmd += ["--json"]
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    kill_when_started(child, tally, 2)
    deadline = time.monotonic() + 60
    while _actor_pids():  # Ray ends the dead driver's actors
        assert time.monotonic() < deadline, "the dead driver's actors lived on"
        time.sleep(0.2)
    write_manifest(tmp_path, slow_s=0.2)
    summary = anyio.run(
        lambda: run_batch(
            manifest, inputs=inputs, out=out, batch_id="rk", journal=journal, ray=True, concurrency=1
        )
    )
    lines = read_out(out)
    check_no_effect_twice(lines, journal, tally, 8)
    unknown = [x for x in lines if x["outcome"] == "outcome_unknown"]
    assert len(unknown) >= 1 and summary.unknown == len(unknown) and summary.ran >= 1
