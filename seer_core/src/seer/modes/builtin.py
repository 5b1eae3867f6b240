"""seer's built-in execution modes, registered through the same hook as any plugin."""

from __future__ import annotations

from typing import Any

from seer.hookspecs import hookimpl
from seer.modes import ExecutionModePlugin


class NotebookMode(ExecutionModePlugin):
    """A Jupyter kernel in the sandbox with the configured models pre-loaded."""

    name = "notebook"
    description = "Jupyter kernel in the sandbox, models pre-loaded"


class CliMode(ExecutionModePlugin):
    """A shell in the sandbox."""

    name = "cli"
    description = "shell in the sandbox"


class LocalMode(ExecutionModePlugin):
    """The agent runs on the client and calls functions exposed from the sandbox over RPC."""

    name = "local"
    description = "agent runs locally, calls exposed functions over RPC"


@hookimpl
def seer_register_execution_modes(register: Any) -> None:
    for mode in (NotebookMode, CliMode, LocalMode):
        register(mode)
