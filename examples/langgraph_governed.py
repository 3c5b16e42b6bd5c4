"""A LangGraph agent using server-filesystem and a LangChain tool, both governed by one session.

Run from the repository root (after `npm ci` in tests/servers, with the `langchain` extra and
langgraph installed):

    python examples/langgraph_governed.py [FOLDER]

The chat model is langchain-core's fake chat model, scripted so the example runs offline: in one
turn it reads notes.txt (an MCP tool) and counts its words (a LangChain tool brought in with
`from_tools`), then answers. Both calls are granted, governed and journaled; the model call is
governed through the `governor` callback.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import warnings
from pathlib import Path

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import create_react_agent

from toolbridge import McpToolProvider, StdioClient, create_runtime
from toolbridge.integrations.langchain import as_tools, from_tools, governor

SERVER = os.environ.get(
    "TOOLBRIDGE_FILESYSTEM_SERVER",
    str(
        Path(__file__).resolve().parent.parent
        / "tests/servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
    ),
)


@tool
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


def scripted_model(folder: Path) -> GenericFakeChatModel:
    """Stands in for a real chat model (`ChatOpenAI(model="gpt-4o")` works the same way)."""
    read = {"name": "fs_read_text_file", "args": {"path": str(folder / "notes.txt")}, "id": "c1"}
    count = {"name": "lc_word_count", "args": {"text": "buy milk"}, "id": "c2"}
    return GenericFakeChatModel(
        messages=iter(
            [AIMessage("", tool_calls=[read, count]), AIMessage("Your notes say 'buy milk' (2 words).")]
        )
    )


async def main(folder: Path) -> None:
    (folder / "notes.txt").write_text("buy milk")
    files = McpToolProvider(StdioClient("node", [SERVER, str(folder)]))
    runtime = create_runtime(
        permissions={
            "allow": ["model:scripted", "tool:fs_read_text_file", "tool:lc_word_count", "effect:read"]
        },
        limits={"max_tool_calls": 8, "max_model_calls": 8, "max_duration_ms": 30_000},
    )
    bindings = [
        {"provider": files, "prefix": "fs_", "include": ["read_text_file", "write_file"], "effects": "read"},
        {"provider": from_tools([word_count]), "prefix": "lc_", "effects": "none"},
    ]
    async with files, runtime.session(tool_providers=bindings, principal="alice") as session:
        tools = await as_tools(session)
        print("tools:", [t.name for t in tools])
        # The fake model has no bind_tools(): bind the tools' schemas as a real model's would be.
        model = scripted_model(folder).bind(tools=[convert_to_openai_tool(t) for t in tools])
        with warnings.catch_warnings():  # LangGraph 1.x also offers langchain.agents.create_agent
            warnings.simplefilter("ignore", DeprecationWarning)
            agent = create_react_agent(model, tools)
        state = await agent.ainvoke(
            {"messages": [HumanMessage("What do my notes say, and how long are they?")]},
            config={"callbacks": [governor(session, model_id="scripted")]},
        )
        for message in state["messages"][2:-1]:
            print(f"{message.name} -> {message.content}")
        print("answer:", state["messages"][-1].content)
    outcome = session.result()
    print(f"session: {outcome.outcome}; model calls: {outcome.usage['model_calls']}")
    print("journal:", sorted((c.tool_id, c.outcome) for c in runtime.inspect(outcome.run_id).calls))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(Path(sys.argv[1]).resolve()))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(Path(tmp).resolve()))
