"""The agent runner contract: what a plugin implements to drive one agent client for
:func:`seer.harness.run_agent`.

A runner gets an :class:`AgentSetup` (everything seer prepared: the system prompt, the task, the
MCP servers by name, the skills, the working directory, whether the agent may use tools of its own
on this machine, the model and the turn limit) and an ``emit`` callable, and runs the agent to its
end, emitting one :class:`~seer.harness.messages.AgentMessage` per step. The harness does the rest
once for every runner: the transcript, secrets kept out of it, the wall-clock limit, cancelling.

A runner registers through the ``seer_register_agent_runners`` hook and imports its SDK only in
:meth:`AgentRunner.run`, so loading plugins stays cheap.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from seer.harness.messages import AgentMessage
from seer.providers.base import Availability

__all__ = ["AgentRunner", "AgentSetup", "Availability", "Emit", "SkillInfo"]

#: What a runner calls with each step of the run.
Emit = Callable[[AgentMessage], None]


@dataclass(frozen=True)
class SkillInfo:
    """A skill the agent may load: its folder on this machine holds ``SKILL.md``."""

    name: str
    description: str
    #: the skill's folder (``<path>/SKILL.md``)
    path: Path

    @property
    def body(self) -> str:
        """``SKILL.md`` as written (front matter and instructions)."""
        return (self.path / "SKILL.md").read_text(encoding="utf-8")


@dataclass(frozen=True)
class AgentSetup:
    """What seer hands a runner for one run."""

    #: the user message
    task: str
    #: the system prompt: the session's prompt, the prompts given, the skills listed
    system_prompt: str
    #: MCP servers by name, each in the ``mcpServers`` entry shape (``command``/``args``/``env``
    #: for stdio, ``url`` for HTTP). They may hold credentials: never log them.
    mcp_servers: dict[str, dict[str, Any]]
    #: skills the agent may load, by name
    skills: dict[str, SkillInfo]
    #: where the agent works on this machine (a local session's directory, else a private folder
    #: of the run's own, removed when it ends)
    cwd: Path
    #: the folder holding each skill's folder (``<skills_dir>/<name>/SKILL.md``)
    skills_dir: Path
    #: whether the agent may use its client's own tools on this machine (shell, files): only for a
    #: local session, whose working directory is this machine's; otherwise it has only the MCP
    #: servers' tools and the skills
    local_tools: bool
    #: the model to ask for (None: the runner's default)
    model: str | None
    #: the most model responses the agent may make
    max_turns: int
    #: seconds the whole run may take (the harness enforces it; a runner may use it for timeouts)
    timeout: float
    #: runner-specific options (``run_agent(..., options={...})``)
    options: dict[str, Any] = field(default_factory=dict)


class AgentRunner(abc.ABC):
    """Drives one agent client. Subclasses set ``name`` and ``description`` and implement
    :meth:`run`; :meth:`availability` says whether the client can run here."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: the model used when ``run_agent`` names none
    default_model: ClassVar[str | None] = None

    @classmethod
    def availability(cls) -> Availability:
        """Whether this runner can run here (its SDK installed, its client found), and if not,
        why and how to fix it. Must be cheap; the default says yes."""
        return Availability(True)

    @abc.abstractmethod
    async def run(self, setup: AgentSetup, emit: Emit) -> None:
        """Run the agent on ``setup`` to its end, calling ``emit`` with each step, and a
        ``final`` message last (stop reason ``answered``, ``max_turns`` or ``error``).

        Runs as one asyncio task; the harness cancels it (``asyncio.CancelledError`` at an
        ``await``) at the wall-clock limit or on ``cancel()``: let it propagate, closing the
        client and the MCP servers on the way out. Emit only from this task's thread."""
