"""Adapters that put toolbridge tools under other agent frameworks (optional extras, imported lazily).

- `toolbridge.integrations.pydantic_ai`: `toolset(source)`, `governed(session)` (extra `pydantic-ai`);
- `toolbridge.integrations.langchain`: `as_tools(source)`, `from_tools(tools)`, `governor(session)`
  (extra `langchain`);
- `toolbridge.integrations.openai_agents`: `as_tools(source)`, `run_hooks(session)` (extra
  `openai-agents`).

Importing this package imports none of the frameworks. See docs/integrations/.
"""
