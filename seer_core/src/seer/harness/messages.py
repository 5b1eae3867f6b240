"""What an agent run yields: one :class:`AgentMessage` per step, the same objects the transcript
records.

Kinds, in the order a run makes them:

``system``
    the system prompt the agent was given (once, first)
``user``
    the task (once)
``assistant``
    one model response (a *turn*): its text, possibly empty when it only calls tools
``tool_call``
    a tool the agent called: ``tool`` (``<server>__<tool>`` for an MCP tool), ``arguments``
``tool_result``
    what the call answered: ``text``, ``is_error``, ``duration`` (seconds)
``final``
    the end of the run: the answer (or why there is none) and ``stop_reason``
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["KINDS", "STOP_REASONS", "AgentMessage"]

Kind = Literal["system", "user", "assistant", "tool_call", "tool_result", "final"]
KINDS: tuple[str, ...] = ("system", "user", "assistant", "tool_call", "tool_result", "final")

#: Why a run ended (``final`` messages): the agent answered; it used ``max_turns`` model responses;
#: the wall-clock limit passed; it was cancelled (``cancel()``, Ctrl-C, the loop left early); the
#: agent client failed.
STOP_REASONS: tuple[str, ...] = ("answered", "max_turns", "timeout", "cancelled", "error")


@dataclass
class AgentMessage:
    """One step of an agent run."""

    kind: Kind
    #: the text: the prompt, the task, the model's words, a tool's answer, the final answer
    text: str = ""
    #: the tool called (``tool_call``, ``tool_result``)
    tool: str | None = None
    #: the arguments of a ``tool_call``
    arguments: dict[str, Any] | None = None
    #: pairs a ``tool_result`` with its ``tool_call``
    call_id: str | None = None
    #: a ``tool_result`` that is an error, or a ``final`` that is not an answer
    is_error: bool = False
    #: seconds a tool call took (``tool_result``)
    duration: float | None = None
    #: why the run ended (``final`` only): one of :data:`STOP_REASONS`
    stop_reason: str | None = None
    #: the model response this step belongs to (0 before the first)
    turn: int = 0
    #: when it happened (seconds since the epoch)
    time: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """The message as a JSON-serialisable dict, fields left empty omitted."""
        return {k: v for k, v in asdict(self).items() if v not in (None, "", False) or k == "kind"}

    def __str__(self) -> str:
        if self.kind == "tool_call":
            return f"[tool_call] {self.tool}({_short(self.arguments)})"
        if self.kind == "tool_result":
            took = f" {self.duration:.1f}s" if self.duration is not None else ""
            flag = " error" if self.is_error else ""
            return f"[tool_result{flag}{took}] {self.tool}: {_clip_line(self.text)}"
        if self.kind == "final":
            return f"[final: {self.stop_reason}] {self.text}"
        return f"[{self.kind}] {_clip_line(self.text)}"


def _short(arguments: dict[str, Any] | None) -> str:
    if not arguments:
        return ""
    return ", ".join(f"{k}={_clip_line(repr(v), 60)}" for k, v in arguments.items())


def _clip_line(text: str, limit: int = 200) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"
