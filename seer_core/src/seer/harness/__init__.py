"""The agent harness: run an agent on what seer prepared, keep its transcript, stop it within a
budget.

::

    from seer.harness import run_agent

    async for msg in run_agent(session=session, mcp_servers=[tools], task="Analyze model activations"):
        print(msg)

Agent runners (the agent clients: the Claude Agent SDK from ``seer[claude]``, the OpenAI Agents
SDK from ``seer[openai]``, or a plugin's) register through the ``seer_register_agent_runners``
hook. See docs/harness.md.
"""

from seer.harness.messages import STOP_REASONS, AgentMessage
from seer.harness.run import (
    AgentRun,
    AgentRunError,
    choose_runner,
    max_turns_final,
    run_agent,
    run_agent_sync,
)
from seer.harness.runner import AgentRunner, AgentSetup, Availability, Emit, SkillInfo
from seer.harness.setup import DEFAULT_MAX_TURNS, DEFAULT_TIMEOUT
from seer.harness.transcript import Redactor

__all__ = [
    "DEFAULT_MAX_TURNS",
    "DEFAULT_TIMEOUT",
    "STOP_REASONS",
    "AgentMessage",
    "AgentRun",
    "AgentRunError",
    "AgentRunner",
    "AgentSetup",
    "Availability",
    "Emit",
    "Redactor",
    "SkillInfo",
    "choose_runner",
    "max_turns_final",
    "run_agent",
    "run_agent_sync",
]
