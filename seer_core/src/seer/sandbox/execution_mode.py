"""Execution modes: the plugin ABC for the last step of ``Sandbox.start()``.

An *execution mode* prepares a started sandbox for one way of working: ``notebook`` (a Jupyter
server, :mod:`seer.notebook.server`), ``cli`` (a shell, :mod:`seer.sessions.shell`), ``local``
(the agent works in a folder on the client, :mod:`seer.sessions.workdir`), or any mode a plugin
registers through ``seer_register_execution_modes``; ``SandboxConfig.execution_mode`` names it.
``Sandbox.start()`` adds its :attr:`~ExecutionModePlugin.required_packages` to the sandbox's
packages and calls :meth:`~ExecutionModePlugin.prepare` once the models are in place.
"""

from __future__ import annotations

from abc import ABC
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from seer.sandbox.sandbox import Sandbox

__all__ = ["ExecutionModePlugin"]


class ExecutionModePlugin(ABC):
    """One way for an agent to work with a sandbox."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: requirements this mode needs in the sandbox, added to ``python_packages`` unless named there
    required_packages: ClassVar[list[str]] = []

    def prepare(self, sandbox: Sandbox) -> None:
        """Called at the end of ``Sandbox.start()``: start what this mode needs in the sandbox.

        The default needs nothing.
        """

    def flush(self, sandbox: Sandbox) -> None:
        """Called by ``Sandbox.terminate()`` while the sandbox still runs, before its notebooks and
        outputs are copied to the client: write out what this mode holds only in memory (the
        notebook mode has the Jupyter server save every notebook's live document). It must not
        raise for what it cannot save: the copy goes on with what is on disk.

        The default holds nothing.
        """
