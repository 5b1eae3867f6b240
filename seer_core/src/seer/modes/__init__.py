"""Execution modes and expose modes: the plugin ABCs.

An *execution mode* prepares a started sandbox for one way of working (``notebook``, ``cli``,
``local``; see :class:`seer.config.ExecutionMode`). An *expose mode* turns an interface served
from a ``ScopedSandbox`` into what the agent is handed (a library, MCP tools, prompt text, a
skill). Both are registered through hooks (``seer_register_execution_modes``,
``seer_register_expose_modes``), the built-in ones exactly like third-party ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from seer.sandbox.execution_mode import ExecutionModePlugin

__all__ = ["ExecutionModePlugin", "ExposeMode"]


class ExposeMode(ABC):
    """Turns a served interface into what the agent gets."""

    name: ClassVar[str]
    description: ClassVar[str] = ""

    @abstractmethod
    def expose(self, served: Any) -> Any:
        """What the agent is handed for ``served`` (the served interface: its name, the RPC
        endpoint and token, and the signatures and docstrings of its exposed functions)."""
