"""Ray mode: batch runs spread over Ray actors, each with the manifest's servers started once.

- `ray=True` starts a local Ray cluster (or uses the one this process already joined with
  `ray.init`); a string connects to that address (`ray start --head` on a real cluster).
- A local cluster is started with a scrubbed environment (`WORKER_ENV`: paths, locale, `RAY_*`),
  so Ray workers do not inherit the driver's secrets; the manifest's own secrets are resolved by
  the driver and handed to each actor explicitly (only those the manifest uses).
- A local cluster listens on the loopback address only: Ray 2.x turns `127.0.0.1` into the
  machine's routable address unless its "no cluster" switch is set
  (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`), which `start_local_cluster` sets for the cluster's
  processes and the start; a cluster whose node address is not loopback is shut down and refused
  (`ERR_BATCH_CONFIG`). Its processes are handed to a reaper (`_reaper`), which ends them when
  the driver ends, SIGKILL included. Starting one prints a line on stderr first (it takes 10 to
  20 s).
- Each `_BatchActor` opens the manifest once (one `Worker`) in a long-lived task, and serves up
  to `concurrency` runs at once over the same MCP sessions; it is restarted (once more than the
  number of actors) if its process dies, and calls that were in flight fail as `WorkerLost`,
  which the driver reconciles from the journal. Actors are placed with Ray's `SPREAD`
  scheduling strategy (over every node of the cluster, not packed on the first); an actor whose
  process died, or that Ray reports unavailable (its node lost, a restart under way), gets no
  more runs while another actor is alive.
- Runs reach an actor in chunks (`_Lane`): one Ray call (`run_many`) carries up to
  `ceil(concurrency / CALLS_PER_ACTOR)` runs, each claimed by the driver before it is sent; a
  call that fails fails each of its runs the same way.
- `server_limits` go through one `_Gate` actor: a batch-wide semaphore per server.
- Each actor asks Ray for `actor_cpus` CPUs (default 1: its manifest's servers and its runs'
  work take about one core at full load), so Ray places actors where cores are free and never
  packs more on a node than it has; `actors * actor_cpus` beyond the cluster's CPUs is refused
  at start (`ERR_BATCH_CONFIG`) rather than left waiting. `0` reserves nothing.
- Each actor holds its own writer lease in the journal (`lease_s`, `runtime._leases`) and reaps
  expired ones: the runs of an actor whose node died are settled once its lease expires (at
  once when its process is proven dead on the driver's machine), then decided by the driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

from .._extras import require
from ..errors import ConfigError
from ._driver import WorkerLost
from ._reaper import Reaper, descendants
from ._store import Item

__all__ = ["WORKER_ENV", "run_on_ray", "start_announced", "start_local_cluster", "stop_local_cluster"]

WORKER_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "LD_LIBRARY_PATH",
)
"""The environment variables a local Ray cluster keeps (besides `RAY_*`); everything else is dropped."""


def _ray() -> Any:
    return require("ray", "ray", "--ray")


_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_NO_CLUSTER = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch (read when `ray` is imported) that keeps a node on the loopback address."""
_reapers: list[Reaper] = []


@contextlib.contextmanager
def _node_on_loopback(loopback: bool) -> Iterator[Any]:
    """Ray, imported, with its "no cluster" switch set for what starts or joins in the block:
    on (`loopback`), a node of this process stays on 127.0.0.1 (Ray turns it into the routable
    address otherwise, and a driver joining a loopback cluster from that address waits forever);
    off, Ray's default. Ray reads the variable when imported: an earlier import is patched."""
    before = os.environ.get(_NO_CLUSTER)
    if loopback:
        os.environ[_NO_CLUSTER] = "0"
    try:
        ray = _ray()
        constants: Any = getattr(getattr(ray, "_private", None), "ray_constants", None)
        switch = getattr(constants, "ENABLE_RAY_CLUSTER", None)
        if switch is not None and loopback:
            constants.ENABLE_RAY_CLUSTER = False
        try:
            yield ray
        finally:
            if switch is not None:
                constants.ENABLE_RAY_CLUSTER = switch
    finally:
        if before is None:
            os.environ.pop(_NO_CLUSTER, None)
        else:
            os.environ[_NO_CLUSTER] = before


def _is_loopback(address: str) -> bool:
    host = address.rpartition("://")[2].rpartition(":")[0].strip("[]") or address
    return host in _LOOPBACK or host.startswith("127.")


def start_local_cluster(num_cpus: int | None = None, **options: Any) -> Any:
    """Start a local Ray cluster whose workers see only `WORKER_ENV` (and `RAY_*`) of this process.

    It listens on the loopback address only (every process of it: GCS, raylet, agents, workers)
    and keeps Ray's token authentication (the token in `~/.ray/auth_token`; `RAY_AUTH_MODE=token`
    stays set in this process so that drivers it starts can join). Its processes end when this
    process ends, however it ends (a reaper process ends what Ray leaves behind).

    Returns what `ray.init` returns (its `address_info["address"]` lets other drivers join).

    Raises:
        ConfigError: `ERR_BATCH_CONFIG` when Ray is not installed, or its node would not be on
            the loopback address.
    """
    saved = dict(os.environ)
    try:
        with _node_on_loopback(True) as ray:
            kept = {k: v for k, v in os.environ.items() if k in WORKER_ENV or k.startswith("RAY_")}
            os.environ.clear()
            os.environ.update(kept)
            before = set(descendants([os.getpid()]))
            info = ray.init(
                num_cpus=num_cpus,
                _node_ip_address=options.pop("node_ip_address", "127.0.0.1"),
                include_dashboard=False,
                configure_logging=False,
                log_to_driver=False,
                object_store_memory=options.pop("object_store_memory", 256 * 1024 * 1024),
                **options,
            )
            cluster = {pid: start for pid, start in descendants([os.getpid()]).items() if pid not in before}
            _reapers.append(Reaper(cluster))
    finally:
        added = {k: v for k, v in os.environ.items() if k.startswith("RAY_") and k != _NO_CLUSTER}
        os.environ.clear()
        os.environ.update(saved)
        os.environ.update(added)  # e.g. RAY_AUTH_MODE=token
    address = getattr(info, "address_info", {}).get("node_ip_address")
    if address not in _LOOPBACK:
        stop_local_cluster()
        raise ConfigError(
            f"the local Ray cluster would listen on {address!r}, not on the loopback address",
            code="ERR_BATCH_CONFIG",
        )
    return info


def start_announced(num_cpus: int | None = None) -> Any:
    """`start_local_cluster`, with a line on stderr before (it takes 10 to 20 s) and after."""
    print("toolbridge: starting a local Ray cluster (loopback only; this takes 10 to 20 s)", file=sys.stderr)
    sys.stderr.flush()
    began = time.monotonic()
    info = start_local_cluster(num_cpus)
    print(f"toolbridge: the local Ray cluster is up ({time.monotonic() - began:.0f} s)", file=sys.stderr)
    sys.stderr.flush()
    return info


def stop_local_cluster() -> None:
    """`ray.shutdown()`, then the reapers of clusters this process started end what is left."""
    _ray().shutdown()
    while _reapers:
        _reapers.pop().release()


class _Gate:
    """A semaphore per server, shared by every actor of a batch."""

    def __init__(self, limits: Mapping[str, int]) -> None:
        self._sems = {name: asyncio.Semaphore(cap) for name, cap in limits.items()}

    async def acquire(self, name: str) -> None:
        await self._sems[name].acquire()

    async def release(self, name: str) -> None:
        self._sems[name].release()


class _BatchActor:
    """One manifest, opened once; serves runs concurrently (see the module docs)."""

    def __init__(
        self,
        manifest: str,
        agent: str,
        journal: str,
        secrets: Mapping[str, str],
        server_limits: Mapping[str, int],
        gate: Any,
        lease_s: float | None = None,
    ) -> None:
        self._args = (manifest, agent, journal, dict(secrets), dict(server_limits), gate, lease_s)
        self._worker: Any = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    async def _host(self) -> None:
        from ._worker import Worker

        manifest, agent, journal, secrets, limits, gate_handle, lease_s = self._args
        gate = None
        if gate_handle is not None:

            async def gate_fn(name: str) -> Any:
                @contextlib.asynccontextmanager
                async def slot() -> AsyncIterator[None]:
                    await gate_handle.acquire.remote(name)
                    try:
                        yield
                    finally:
                        await gate_handle.release.remote(name)

                return slot()

            gate = gate_fn
        assert self._ready is not None and self._stop is not None
        try:
            worker = Worker(
                manifest,
                agent=agent,
                journal=journal,
                secrets=secrets,
                env={},
                server_limits=limits,
                gate=gate,
                lease_s=lease_s,
            )
            async with worker.open() as opened:
                self._worker = opened
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            raise

    async def start(self) -> int:
        """Open the manifest (once); returns this actor's pid."""
        if self._task is None:
            self._ready, self._stop = asyncio.Event(), asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._host())
        assert self._ready is not None
        await self._ready.wait()
        if self._error is not None:
            raise ConfigError(
                f"a Ray actor could not open the manifest: {self._error}", code="ERR_BATCH_CONFIG"
            )
        return os.getpid()

    async def run(self, item_id: str | int, line: int, text: str, run_id: str) -> dict[str, object]:
        await self.start()
        result: dict[str, object] = await self._worker.run(item_id, line, text, run_id)
        return result

    async def run_many(self, items: list[tuple[str | int, int, str, str]]) -> list[dict[str, object] | str]:
        """Run a chunk of items concurrently; each one's output line, or the name of the
        exception it raised (a failure toolbridge did not foresee: the driver leaves it for resume)."""
        await self.start()
        done = await asyncio.gather(*(self._worker.run(*it) for it in items), return_exceptions=True)
        out: list[dict[str, object] | str] = []
        for d in done:
            if isinstance(d, BaseException):
                if not isinstance(d, Exception):
                    raise d
                out.append(type(d).__name__)
            else:
                out.append(d)
        return out

    async def stop(self) -> None:
        if self._task is not None and self._stop is not None:
            self._stop.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._task, timeout=30)


CALLS_PER_ACTOR = 4
"""Ray calls in flight per actor; each carries up to `ceil(concurrency / CALLS_PER_ACTOR)` runs."""
GATHER_S = 0.003
"""How long a chunk waits to fill once a call slot is free (the driver claims runs one by one)."""


class _Lane:
    """The runs bound for one actor, sent in chunks: one Ray call runs several items at once.

    A Ray call has a fixed cost on the driver, in Ray's own processes and in the actor (about as
    much as a run's own work in the actor, on this machine); chunks spread it over `size` runs.
    At most `calls` calls are in flight; a free slot waits up to `GATHER_S` for a full chunk.
    """

    def __init__(self, handle: Any, size: int, calls: int) -> None:
        self.handle = handle
        self.size = size
        self._queue: list[tuple[tuple[str | int, int, str, str], asyncio.Future[Any]]] = []
        self._waiting = asyncio.Event()
        self._full = asyncio.Event()
        self._slots = asyncio.Semaphore(calls)
        self._sends: set[asyncio.Task[None]] = set()

    async def submit(self, args: tuple[str | int, int, str, str]) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((args, future))
        self._waiting.set()
        if len(self._queue) >= self.size:
            self._full.set()
        return await future

    async def pump(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._waiting.wait()
            await self._slots.acquire()
            if len(self._queue) < self.size:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), GATHER_S)
            chunk, self._queue = self._queue[: self.size], self._queue[self.size :]
            if len(self._queue) < self.size:
                self._full.clear()
            if not self._queue:
                self._waiting.clear()
            chunk = [(a, f) for a, f in chunk if not f.done()]  # a cancelled waiter sends nothing
            if not chunk:
                self._slots.release()
                continue
            task = loop.create_task(self._send(chunk))
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)

    async def _send(self, chunk: list[tuple[tuple[str | int, int, str, str], asyncio.Future[Any]]]) -> None:
        try:
            results = await self.handle.run_many.remote([a for a, _ in chunk])
        except BaseException as exc:
            for _, future in chunk:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            for (_, future), result in zip(chunk, results, strict=True):
                if not future.done():
                    future.set_result(result)
        finally:
            self._slots.release()

    async def close(self) -> None:
        for task in list(self._sends):
            task.cancel()
        if self._sends:
            await asyncio.wait(self._sends, timeout=10)


async def run_on_ray(
    address: bool | str,
    *,
    manifest: str,
    agent: str,
    journal: str,
    secrets: Mapping[str, str],
    server_limits: Mapping[str, int],
    actors: int,
    concurrency: int,
    actor_cpus: float = 1.0,
    lease_s: float | None = None,
    dispatch: Callable[[Callable[[Item, str], Awaitable[dict[str, object]]]], Awaitable[int]],
) -> int:
    """Run `dispatch(runner)` with a runner that sends each item to the least busy actor."""
    ray = _ray()
    started_here = False
    if not ray.is_initialized():
        try:
            if address is True:
                start_announced()
            else:
                with _node_on_loopback(_is_loopback(str(address))):
                    ray.init(address=str(address), configure_logging=False, log_to_driver=False)
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"Ray cannot start or connect: {str(exc)[:200]}", code="ERR_BATCH_CONFIG"
            ) from None
        started_here = True
    exceptions = ray.exceptions
    handles: list[Any] = []
    lost: list[int] = []
    gate = None
    try:
        cpus = float(ray.cluster_resources().get("CPU", 0))
        if actors * actor_cpus > cpus:
            raise ConfigError(
                f"{actors} Ray actors of {actor_cpus:g} CPU each need {actors * actor_cpus:g} CPUs; "
                f"the cluster has {cpus:g}: lower --actors or --actor-cpus (0.5 shares a core)",
                code="ERR_BATCH_CONFIG",
            )
        if server_limits:
            gate = ray.remote(num_cpus=0, max_concurrency=10_000)(_Gate).remote(dict(server_limits))
        actor_cls = ray.remote(
            num_cpus=actor_cpus,  # the actor's servers and runs: Ray places it where that is free
            max_restarts=actors + 1,
            max_task_retries=0,
            max_concurrency=concurrency + 2,
            scheduling_strategy="SPREAD",  # over every node, not packed on the first
        )(_BatchActor)
        manifest = os.path.abspath(manifest)  # noqa: ASYNC240 - no I/O: a path join
        handles = [
            actor_cls.remote(manifest, agent, journal, dict(secrets), dict(server_limits), gate, lease_s)
            for _ in range(actors)
        ]
        try:
            await asyncio.gather(*(h.start.remote() for h in handles))
        except exceptions.RayTaskError as exc:
            cause = exc.as_instanceof_cause()
            if isinstance(cause, ConfigError):
                raise ConfigError(str(cause).split(": ", 1)[-1], code=cause.code) from None
            raise
        busy = [0] * len(handles)
        lost[:] = [0] * len(handles)
        size = max(1, -(-concurrency // CALLS_PER_ACTOR))
        lanes = [_Lane(h, size, CALLS_PER_ACTOR) for h in handles]
        pumps = [asyncio.get_running_loop().create_task(lane.pump()) for lane in lanes]

        async def runner(item: Item, run_id: str) -> dict[str, object]:
            # an actor whose process died is left out at once (it would look least busy), while
            # another is alive; with none alive, each is tried again (Ray may have restarted it)
            usable = [i for i in range(len(handles)) if not lost[i]] or list(range(len(handles)))
            i = min(usable, key=lambda k: busy[k])
            busy[i] += 1
            try:
                result = await lanes[i].submit((item.id, item.line, item.input, run_id))
            except exceptions.ActorUnavailableError as exc:
                # the actor may still be running it: never run it again on a guess (the journal
                # and its writer's lease decide); no more runs for it while another is alive (its
                # node may be gone, Ray restarting it: it would fail at once and look least busy)
                lost[i] += 1
                raise WorkerLost(str(exc)[:200], dead=False) from None
            except exceptions.RayActorError as exc:  # the actor's process died
                lost[i] += 1
                raise WorkerLost(str(exc)[:200]) from None
            finally:
                busy[i] -= 1
            if isinstance(result, str):  # the run raised in the actor (see `_BatchActor.run_many`)
                raise RuntimeError(f"the run failed in a Ray actor: {result}")
            return dict(result)

        try:
            return await dispatch(runner)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for lane in lanes:
                await lane.close()
    finally:
        for i, h in enumerate(handles):
            if i < len(lost) and lost[i]:  # its process died: a restart may wait for room forever
                with contextlib.suppress(Exception):
                    ray.kill(h)
                continue
            with contextlib.suppress(Exception):
                await asyncio.wait_for(h.stop.remote(), timeout=40)
            with contextlib.suppress(Exception):
                ray.kill(h)
        if gate is not None:
            with contextlib.suppress(Exception):
                ray.kill(gate)
        if started_here:
            stop_local_cluster()
