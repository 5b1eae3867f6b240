"""The ``mcp`` expose mode: an interface served from a ScopedSandbox, as MCP tools.

``ScopedSandbox.serve("interface.py", expose_as="mcp")`` returns an MCP server entry an agent's
client can put as it is in its MCP settings::

    {"type": "stdio", "command": sys.executable, "args": ["-m", "seer_mcp.interface"],
     "env": {"SEER_RPC_URL": ..., "SEER_RPC_TOKEN": ..., "SEER_RPC_NAME": ...}}

That server (:mod:`seer_mcp.interface`) offers one tool per ``@expose`` function. The entry
holds a credential (the RPC token): hand it only to the agent meant to use the interface.

Cheap to import: nothing here imports the ``mcp`` SDK.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

from seer.errors import ConfigError
from seer.expose import ExposeMode

__all__ = ["McpMode", "mcp_config"]


def mcp_config(served: Any) -> dict[str, Any]:
    """The MCP server entry for a served interface (anything with ``name``, ``url``, ``token``)."""
    missing = [attr for attr in ("name", "url", "token") if not getattr(served, attr, None)]
    if missing:
        raise ConfigError(
            f"expose_as='mcp' needs a served interface with {', '.join(missing)}; got {type(served).__name__}"
        )
    return {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "seer_mcp.interface"],
        "env": {
            "SEER_RPC_URL": str(served.url),
            "SEER_RPC_TOKEN": str(served.token),
            "SEER_RPC_NAME": str(served.name),
        },
    }


class McpMode(ExposeMode):
    """An MCP server config (stdio) whose tools are the interface's exposed functions: input schema
    from their type hints, description from their docstrings; tensors and arrays in results come
    back as a readable summary plus the data."""

    name: ClassVar[str] = "mcp"
    description: ClassVar[str] = "MCP server config (stdio): one tool per exposed function"

    def expose(self, served: Any) -> dict[str, Any]:
        return mcp_config(served)
