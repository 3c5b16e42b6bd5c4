"""Ray across nodes: a two-node Ray cluster on loopback (Ray's own cluster utilities: a real GCS and
two real raylets, each node with one CPU), started once for this module (20 to 40 s).

Each actor asks for one CPU, so the two actors land one per node and both nodes get work; the
second node is killed mid-batch (its raylet SIGKILLed, its worker processes gone with it): its
items are decided from the journal once their writer's lease is ended (the actor's process is
proven dead on this machine), re-run only when their effectful request never left (a second
attempt), `outcome_unknown` otherwise; no effect twice; a batch asking for more CPUs than the
cluster has is refused at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from batch_helpers import check_no_effect_twice, read_out, slow_sends, write_inputs, write_manifest

from toolbridge.batch import run_batch
from toolbridge.batch._ray import _node_on_loopback
from toolbridge.errors import ConfigError


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[tuple[Any, Any]]:
    """(the cluster, its second node); the cluster is shut down after the module."""
    with _node_on_loopback(True):
        from ray.cluster_utils import Cluster

        memory = 128 * 1024 * 1024
        head = {"num_cpus": 1, "include_dashboard": False, "object_store_memory": memory}
        cluster = Cluster(initialize_head=True, head_node_args=head)
        try:
            node = cluster.add_node(num_cpus=1, object_store_memory=memory)
            cluster.wait_for_nodes()
        except BaseException:
            cluster.shutdown()
            raise
    try:
        yield cluster, node
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def _started(tally: Path) -> list[int]:
    """The actor pids of the `ops.slow` calls that started (`started PID` lines)."""
    if not tally.exists():
        return []
    return [int(line.split()[1]) for line in tally.read_text().splitlines() if line.startswith("started")]


def _actor_nodes() -> dict[int, str]:
    """pid -> node id of every `_BatchActor` the cluster knows (alive or dead), from the GCS."""
    import ray

    out: dict[int, str] = {}
    for info in ray._private.state.actors().values():
        if info.get("ActorClassName", info.get("ClassName", "")).endswith("_BatchActor") and info.get("Pid"):
            out[int(info["Pid"])] = str(info["Address"]["NodeID"])
    return out


@pytest.mark.timeout(400)
async def test_both_nodes_get_work_and_a_killed_node_loses_and_repeats_nothing(
    two_nodes: tuple[Any, Any], tmp_path: Path
) -> None:
    cluster, node = two_nodes
    manifest, tally = write_manifest(tmp_path, slow_s=2.0)
    n = 12
    inputs = write_inputs(tmp_path / "in.jsonl", n)
    out = tmp_path / "out.jsonl"
    journal = str(tmp_path / "j.sqlite")
    common: dict[str, Any] = {"inputs": inputs, "out": out, "journal": journal, "ray": cluster.address}
    # more than the cluster's two CPUs: refused at once, nothing claimed
    with pytest.raises(ConfigError) as info:
        await run_batch(manifest, actors=3, **{**common, "journal": str(tmp_path / "big.sqlite")})
    assert info.value.code == "ERR_BATCH_CONFIG" and "the cluster has 2" in str(info.value)
    killed: list[str] = []
    nodes: dict[int, str] = {}

    async def kill_second_node() -> None:
        import ray

        with anyio.fail_after(240):
            while True:  # both actors (one per node) have an effectful call in flight
                await anyio.sleep(0.05)
                pids = set(_started(tally))
                if len(pids) < 2 or not ray.is_initialized():
                    continue
                nodes.update(_actor_nodes())
                if {nodes.get(p) for p in pids} >= {node.node_id}:
                    break
        cluster.remove_node(node, allow_graceful=False)  # its raylet SIGKILLed; its workers go
        killed.append(node.node_id)

    summary = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_second_node)
        summary = await run_batch(
            manifest, actors=2, concurrency=2, batch_id="two", new=True, lease_s=3, **common
        )
    assert killed == [node.node_id]
    started = _started(tally)
    used = {nodes[p] for p in started if p in nodes}
    assert len(used) == 2  # both nodes got work (one actor each: one CPU each)
    lines = read_out(out)
    check_no_effect_twice(lines, journal, tally, n)  # one line per item; no effectful call twice
    assert summary is not None and summary.in_doubt == 0 and summary.pending == 0
    assert summary.succeeded + summary.unknown == n and summary.unknown >= 1  # in flight on the node
    sends = slow_sends(journal)
    for x in lines:  # a second attempt only for an item whose first never sent its effectful call
        attempt = int(x["runId"].rsplit("-", 1)[1])
        assert x["outcome"] == ("outcome_unknown" if x.get("recovered") else "succeeded"), x
        if attempt > 1:
            assert sends[x["runId"].rsplit("-", 1)[0]] == 1  # the later attempt's send only
