"""YAML documents the Telo manifest tests share: server-everything over stdio with Telo's MCP steps.

The text is plain YAML (single braces), so templates take it through a `{everything}` field of
`str.format` or an f-string, where it is inserted as is.
"""

from __future__ import annotations


def everything_client(js: str, *, listing: bool = False) -> str:
    """`McpClient.StdioClient` Everything (server-everything's `js` over stdio) and a `McpClient.ToolsCall`
    named Call on it; with `listing`, a `McpClient.ToolsList` named List too."""
    text = (
        "kind: McpClient.StdioClient\n"
        "metadata: { name: Everything }\n"
        "command: node\n"
        f'args: ["{js}", "stdio"]\n'
        "---\n"
        "kind: McpClient.ToolsCall\n"
        "metadata: { name: Call }\n"
        "client: !ref Everything\n"
    )
    if listing:
        text += "---\nkind: McpClient.ToolsList\nmetadata: { name: List }\nclient: !ref Everything\n"
    return text
