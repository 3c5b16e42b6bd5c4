"""A tiny MCP server for the examples: an in-memory notebook, built with the official SDK's MCPServer.

Run it over stdio (what `StdioClient` does): `python examples/servers/notes_server.py`.

Tools:
- `add_note(title, text)`: store a note (a plain text result);
- `get_note(title)`: one note as structured content (the tool declares an output schema);
- `search_notes(query)`: the titles of the notes whose title or text contains `query`;
- `word_count(title)`: a number, as structured content.

Asking for a note that does not exist is a tool error (`isError: true`) with a message.
Depends only on `mcp`.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer(
    "notes",
    version="1.0.0",
    instructions="A small notebook. Add notes, look them up by title, search them.",
)

_notes: dict[str, str] = {
    "welcome": "This notebook lives in memory; notes are gone when the server stops.",
    "tea": "Green tea: 80 degrees, two minutes.",
}


class Note(BaseModel):
    """One note."""

    title: str
    text: str


class WordCount(BaseModel):
    """How many words a note has."""

    title: str
    words: int


@server.tool(structured_output=False)
def add_note(title: str, text: str) -> str:
    """Store a note under a title (replacing any note with that title)."""
    _notes[title] = text
    return f"Saved note {title!r} ({len(text)} characters)."


def _find(title: str) -> str:
    if title not in _notes:
        raise ToolError(f"no note titled {title!r}; known titles: {', '.join(sorted(_notes))}")
    return _notes[title]


@server.tool()
def get_note(title: str) -> Note:
    """Read the note with this exact title."""
    return Note(title=title, text=_find(title))


@server.tool()
def search_notes(query: str) -> list[str]:
    """Titles of the notes whose title or text contains the query (case-insensitive)."""
    needle = query.lower()
    return sorted(t for t, text in _notes.items() if needle in t.lower() or needle in text.lower())


@server.tool()
def word_count(title: str) -> WordCount:
    """Count the words of a note."""
    return WordCount(title=title, words=len(_find(title).split()))


if __name__ == "__main__":
    server.run()
