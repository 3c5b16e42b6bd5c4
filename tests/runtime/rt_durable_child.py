"""Child process for the crash test: a durable run whose MCP tool (effects write) never answers.

Usage: python rt_durable_child.py JOURNAL RUN_ID. The parent kills this process with SIGKILL
while the call is in flight.
"""

from __future__ import annotations

import sys

import anyio
import pydantic
from mcp import Client
from rt_helpers import Message
from rt_server import server

from toolbridge.agent import Agent
from toolbridge.agent.models import ScriptedModel
from toolbridge.runtime import create_runtime, define_mcp_tool


class SlowIn(pydantic.BaseModel):
    seconds: float


async def main(journal: str, run_id: str) -> None:
    runtime = create_runtime(
        "durable",
        permissions={"allow": ["model:scripted", "tool:ops.slow", "ops:run", "effect:write"]},
        journal=journal,
    )
    async with Client(server) as client:
        tool = define_mcp_tool(
            id="ops.slow",
            version="3",
            description="A slow operation with effects.",
            input=SlowIn,
            output=Message,
            effects="write",
            capabilities=["ops:run"],
            remote_name="slow",
            client=client,
            timeout_ms=60_000,
        )
        model = ScriptedModel([{"tool_calls": [{"name": "ops_slow", "arguments": {"seconds": 60}}]}, "done"])
        await runtime.run(Agent(model, tools=[tool]), "go", run_id=run_id)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
