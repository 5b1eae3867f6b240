"""The entry-point module of seer-mcp: registers the ``mcp`` expose mode and ``seer mcp`` commands,
and sweeps the MCP servers' stale claim files when a sandbox is terminated.

Kept cheap to import: nothing here imports the ``mcp`` SDK.
"""

from __future__ import annotations

from typing import Any

import seer


@seer.hookimpl
def seer_register_commands(cli: Any) -> None:
    from seer_mcp.commands import app

    cli.add_typer(app, name="mcp", help="Run seer's MCP servers (stdio) for agents.")


@seer.hookimpl
def seer_register_expose_modes(register: Any) -> None:
    from seer_mcp.expose import McpMode

    register(McpMode)


@seer.hookimpl
def seer_sandbox_terminating(sandbox: Any) -> None:
    from seer_mcp.channels import sweep_claims

    sweep_claims()
