"""``seer mcp ...``: start one of seer's MCP servers on stdio (each lives in its own module)."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False)
