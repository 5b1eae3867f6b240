"""The ``claude`` agent runner: the Claude Agent SDK (``claude-agent-sdk``) drives Claude Code.

- the agent's tools are exactly what the session offers: every MCP server of the run
  (``mcp__<server>__<tool>``), the ``Skill`` tool for the skills (handed over as a Claude Code
  plugin folder the run writes), and, only for a local session, Claude Code's own Bash, Read,
  Write, Edit, Glob and Grep in its directory. No other built-in tool (web, tasks, ...) is offered;
- no settings are read from the user's or the project's Claude Code configuration
  (``setting_sources=[]``, ``strict_mcp_config``), so a run does what its setup says;
- the model API is Anthropic's, as Claude Code reaches it (``ANTHROPIC_API_KEY``,
  ``ANTHROPIC_BASE_URL``, or a logged-in Claude Code).

The SDK is imported in :meth:`ClaudeAgentRunner.run` only. Its wheel bundles the Claude Code
binary; without it, a ``claude`` on ``PATH`` is used.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, ClassVar

from seer.harness import AgentMessage, AgentRunner, AgentSetup, Availability, Emit, max_turns_final

__all__ = ["LOCAL_TOOLS", "PLUGIN_NAME", "ClaudeAgentRunner", "bundled_cli"]

#: Claude Code's own tools a local session's agent may use in its directory.
LOCAL_TOOLS = ("Bash", "Read", "Write", "Edit", "Glob", "Grep")
#: The name of the plugin folder that carries the run's skills (``seer:<skill>``).
PLUGIN_NAME = "seer"


def bundled_cli() -> Path | None:
    """The Claude Code binary the SDK's wheel bundles, or ``claude`` on ``PATH``; None if neither."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is not None and spec.origin:
        bundled = Path(spec.origin).parent / "_bundled" / "claude"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return bundled
    found = shutil.which("claude")
    return Path(found) if found else None


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                parts.append(
                    block.get("text", "") if block.get("type") == "text" else f"[{block.get('type')}]"
                )
        return "\n".join(parts)
    return "" if content is None else str(content)


def _plugin(setup: AgentSetup) -> Path:
    """A Claude Code plugin folder whose ``skills/`` are the run's skills."""
    root = setup.skills_dir.parent / "claude-plugin"
    (root / ".claude-plugin").mkdir(parents=True, exist_ok=True)
    manifest = {"name": PLUGIN_NAME, "description": "the skills seer hands this run", "version": "0.0.0"}
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    link = root / "skills"
    if not link.exists():
        link.symlink_to(setup.skills_dir, target_is_directory=True)
    return root


class ClaudeAgentRunner(AgentRunner):
    """Runs the agent with the Claude Agent SDK and Claude Code."""

    name: ClassVar[str] = "claude"
    description: ClassVar[str] = "the Claude Agent SDK (claude-agent-sdk) driving Claude Code"

    @classmethod
    def availability(cls) -> Availability:
        if importlib.util.find_spec("claude_agent_sdk") is None:
            return Availability(False, 'claude-agent-sdk is not installed: pip install "seer[claude]"')
        if bundled_cli() is None:
            return Availability(
                False,
                "Claude Code was not found: the SDK's wheel bundles none for this platform and no "
                "`claude` is on PATH (npm install -g @anthropic-ai/claude-code)",
            )
        return Availability(True)

    async def run(self, setup: AgentSetup, emit: Emit) -> None:
        from claude_agent_sdk import (
            AssistantMessage,
            ClaudeAgentOptions,
            ResultMessage,
            TextBlock,
            ToolResultBlock,
            ToolUseBlock,
            UserMessage,
            query,
        )

        servers: dict[str, Any] = {}
        for name, config in setup.mcp_servers.items():
            if "command" in config:
                servers[name] = {
                    "type": "stdio",
                    "command": config["command"],
                    "args": list(config.get("args") or []),
                    "env": {str(k): str(v) for k, v in (config.get("env") or {}).items()},
                }
            else:
                servers[name] = {
                    "type": config.get("type") if config.get("type") in ("http", "sse") else "http",
                    "url": config["url"],
                    "headers": dict(config.get("headers") or {}),
                }
        tools = [*(LOCAL_TOOLS if setup.local_tools else ()), *(["Skill"] if setup.skills else [])]
        allowed = [*tools, *(f"mcp__{name}" for name in servers)]
        stderr: list[str] = []
        cli = bundled_cli()
        options = ClaudeAgentOptions(
            system_prompt=setup.system_prompt or None,
            model=setup.model,
            max_turns=setup.max_turns,
            cwd=str(setup.cwd),
            tools=tools,
            allowed_tools=allowed,
            setting_sources=[],
            mcp_servers=servers,
            strict_mcp_config=True,
            plugins=[{"type": "local", "path": str(_plugin(setup))}] if setup.skills else [],
            skills=[f"{PLUGIN_NAME}:{name}" for name in setup.skills] if setup.skills else None,
            cli_path=str(cli) if cli else None,
            stderr=lambda line: stderr.append(line),
        )

        names: dict[str, str] = {}
        started: dict[str, float] = {}
        pending: list[AgentMessage] = []  # one response's assistant message and tool calls
        pending_id: str | None = None

        def flush() -> None:
            nonlocal pending_id
            for message in pending:
                emit(message)
            pending.clear()
            pending_id = None

        async for message in query(prompt=setup.task, options=options):
            if isinstance(message, AssistantMessage):
                message_id = getattr(message, "message_id", None) or id(message)
                if pending_id is not None and message_id != pending_id:
                    flush()
                if not pending:
                    pending.append(AgentMessage("assistant", ""))
                    pending_id = message_id  # type: ignore[assignment]
                for block in message.content:
                    if isinstance(block, TextBlock) and block.text:
                        head = pending[0]
                        head.text = f"{head.text}\n{block.text}" if head.text else block.text
                    elif isinstance(block, ToolUseBlock):
                        names[block.id] = block.name
                        started[block.id] = time.monotonic()
                        pending.append(
                            AgentMessage(
                                "tool_call", tool=block.name, arguments=dict(block.input), call_id=block.id
                            )
                        )
            elif isinstance(message, UserMessage):
                flush()
                content = message.content if isinstance(message.content, list) else []
                for block in content:
                    if isinstance(block, ToolResultBlock):
                        began = started.pop(block.tool_use_id, None)
                        emit(
                            AgentMessage(
                                "tool_result",
                                _result_text(block.content),
                                tool=names.get(block.tool_use_id),
                                call_id=block.tool_use_id,
                                is_error=bool(block.is_error),
                                duration=None if began is None else time.monotonic() - began,
                            )
                        )
            elif isinstance(message, ResultMessage):
                flush()
                if message.subtype == "success" and not message.is_error:
                    emit(AgentMessage("final", message.result or "", stop_reason="answered"))
                elif message.subtype == "error_max_turns":
                    emit(max_turns_final(setup.max_turns))
                else:
                    detail = message.result or "; ".join(stderr[-5:]) or "no detail"
                    raise RuntimeError(f"Claude Code ended with {message.subtype}: {detail}")
        flush()
