"""The same agent with a real model: OpenAI, or any OpenAI-compatible server.

    OPENAI_API_KEY=sk-... python examples/agent_openai.py [FOLDER] [--model gpt-4o-mini]

For a local server (vLLM, Ollama, llama.cpp) set `OPENAI_BASE_URL` (for example
`http://127.0.0.1:11434/v1`) and any non-empty key. The agent gets server-filesystem's read-only
tools for FOLDER (default: the current directory) and streams its answer as it is written.
Not run in CI: it needs a key and the network.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from toolbridge.agent import Agent, ModelPrices, OpenAIModel, estimate_cost_micros
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient

ROOT = Path(__file__).resolve().parent.parent
SERVER = os.environ.get(
    "TOOLBRIDGE_FILESYSTEM_SERVER",
    str(ROOT / "tests/servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"),
)


async def main(folder: Path, model_name: str) -> None:
    model = OpenAIModel(
        model_name,
        base_url=os.environ.get("OPENAI_BASE_URL"),
        options={"temperature": 0},
        prices=ModelPrices(input_per_million_micros=150_000, output_per_million_micros=600_000),
        strict_schemas=True,
    )
    files = McpToolProvider(StdioClient("node", [SERVER, str(folder)]))
    agent = Agent(
        model,
        tool_providers=[
            {
                "provider": files,
                "prefix": "fs_",
                "include": ["list_directory", "read_text_file", "search_files"],
            }
        ],
        system=f"You answer questions about the files in {folder}. Use the tools; be brief.",
        max_steps=10,
    )
    async with files, model:
        async for event in agent.stream("What is in this folder, and what is it for?"):
            if event.type == "text-delta":
                print(event.text, end="", flush=True)
            elif event.type == "tool-call-started":
                print(f"\n[calling {event.call.name} {dict(event.call.arguments)}]")
            elif event.type == "run-finished":
                usage = event.result.usage
                cost = estimate_cost_micros(model, usage)
                print(f"\n[{usage.requests} model calls, {usage.total_tokens} tokens, ~{cost} micro-USD]")
            elif event.type == "error":
                print(f"\n[error {event.code}: {event.error}]")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=".")
    parser.add_argument("--model", default="gpt-4o-mini")
    args = parser.parse_args()
    asyncio.run(main(Path(args.folder).resolve(), args.model))
