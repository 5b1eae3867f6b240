"""The entry point: registers the ``claude`` agent runner. Imports no SDK."""

from __future__ import annotations

from typing import Any

from seer import hookimpl


@hookimpl
def seer_register_agent_runners(register: Any) -> None:
    from seer_claude.runner import ClaudeAgentRunner

    register(ClaudeAgentRunner)
