"""Live calls for the console's Calls page: the runtimes' `tool.started` / `tool.completed`
events, and `tool.refused` for calls refused before anything was sent (a grant, an approval
denied or timed out, a budget or limit: outcome `not_started` with the refusal's code); metadata
only, no arguments, no results; kept for the latest `KEEP` calls and handed to each open stream.

Publishing never waits: a stream whose reader is slow loses events (its queue holds
`QUEUE` of them), the runs never do. At most `MAX_STREAMS` streams at once.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["KEEP", "MAX_STREAMS", "LiveCalls"]

KEEP = 200
QUEUE = 256
MAX_STREAMS = 32


class LiveCalls:
    """The latest calls of the runtimes it watches (see the module docstring)."""

    def __init__(self) -> None:
        self._calls: OrderedDict[tuple[str, str], dict[str, object]] = OrderedDict()
        self._streams: list[MemoryObjectSendStream[dict[str, object]]] = []
        self._unsubscribe: list[Callable[[], None]] = []

    def watch(self, runtime: Any, principal: str) -> None:
        """Hear `runtime`'s tool events as calls of `principal`."""

        def on_event(event: Any) -> None:
            if event.type in ("tool.started", "tool.completed", "tool.refused"):
                self._heard(event, principal)

        self._unsubscribe.append(runtime.subscribe(on_event))

    def close(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        for stream in self._streams:
            stream.close()

    def _heard(self, event: Any, principal: str) -> None:
        data = event.data
        key = (str(event.run_id), str(data.get("call_id", "")))
        done = event.type != "tool.started"
        row = {
            "runId": key[0],
            "callId": key[1],
            "time": time.strftime("%H:%M:%S", time.gmtime(event.timestamp)),
            "principal": principal,
            "tool": str(data.get("tool_id", "")),
            "effects": str(data.get("effects", "")),
            "outcome": str(data.get("outcome", "")) if done else "running",
            "code": data.get("code") if done else None,
        }
        self._calls[key] = row
        self._calls.move_to_end(key)
        while len(self._calls) > KEEP:
            self._calls.popitem(last=False)
        for stream in list(self._streams):
            try:
                stream.send_nowait(row)
            except anyio.WouldBlock:
                pass  # a slow reader loses events, the run never waits
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._streams.remove(stream)

    def recent(self) -> list[dict[str, object]]:
        """The latest calls, oldest first."""
        return list(self._calls.values())

    @contextmanager
    def stream(self) -> Iterator[MemoryObjectReceiveStream[dict[str, object]]]:
        """A new stream of calls (LookupError past `MAX_STREAMS`)."""
        if len(self._streams) >= MAX_STREAMS:
            raise LookupError("too many live streams")
        send, receive = anyio.create_memory_object_stream[dict[str, object]](QUEUE)
        self._streams.append(send)
        try:
            yield receive
        finally:
            if send in self._streams:
                self._streams.remove(send)
            send.close()
            receive.close()
