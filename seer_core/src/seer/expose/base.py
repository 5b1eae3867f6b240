"""The expose-mode plugin ABC: what turns a served interface into what the agent is handed.

``ScopedSandbox.serve("interface.py", expose_as=...)`` serves an interface file's ``@expose``
functions over RPC and hands the served interface to the expose mode registered under that name
(``seer_register_expose_modes``): seer's own ``library``, ``prompt`` and ``skill``
(:mod:`seer.expose.modes`), seer-mcp's ``mcp``, or a third party's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

__all__ = ["ExposeMode"]


class ExposeMode(ABC):
    """Turns a served interface into what the agent gets."""

    name: ClassVar[str]
    description: ClassVar[str] = ""

    @abstractmethod
    def expose(self, served: Any) -> Any:
        """What the agent is handed for ``served`` (the served interface: its name, the RPC
        endpoint and token, and the signatures and docstrings of its exposed functions)."""
