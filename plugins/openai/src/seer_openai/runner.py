"""The ``openai`` agent runner: the OpenAI Agents SDK (``openai-agents``) drives the agent.

- the model: the Chat Completions API through ``openai.AsyncOpenAI`` (``OPENAI_API_KEY``,
  ``OPENAI_BASE_URL`` from the environment, as the SDK reads them), so any endpoint speaking that
  API works;
- tools: every MCP server of the run (stdio servers started by the SDK, HTTP ones reached by URL),
  ``load_skill`` for the skills, and for a local session ``run_shell`` in its directory;
- the SDK's own tracing is off: nothing leaves for a tracing service.

The SDK is imported in :meth:`OpenAIAgentsRunner.run` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import time
from typing import Any, ClassVar

from seer.harness import AgentMessage, AgentRunner, AgentSetup, Availability, Emit, max_turns_final

__all__ = ["OpenAIAgentsRunner", "server_env"]

#: Variables of this process not passed to MCP servers the SDK starts (credentials of other services).
_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|API_?KEY|ACCESS_?KEY|CREDENTIAL)", re.I)
#: Seconds ``run_shell`` lets a command run unless the call says otherwise.
SHELL_TIMEOUT = 600.0


def server_env(config_env: dict[str, str] | None) -> dict[str, str]:
    """An MCP server's environment: this process's (less its credentials), then the config's."""
    env = {k: v for k, v in os.environ.items() if not _SECRET_NAME.search(k)}
    env.update({str(k): str(v) for k, v in (config_env or {}).items()})
    return env


def _text_of(output: Any) -> str:
    """A tool's output as the model sees it."""
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, default=str)
    except (TypeError, ValueError):
        return str(output)


class OpenAIAgentsRunner(AgentRunner):
    """Runs the agent with the OpenAI Agents SDK."""

    name: ClassVar[str] = "openai"
    description: ClassVar[str] = "the OpenAI Agents SDK (openai-agents): MCP over stdio, Chat Completions API"
    default_model: ClassVar[str | None] = "gpt-4.1"

    @classmethod
    def availability(cls) -> Availability:
        for module, package in (("agents", "openai-agents"), ("openai", "openai")):
            if importlib.util.find_spec(module) is None:
                return Availability(False, f'{package} is not installed: pip install "seer[openai]"')
        return Availability(True)

    async def run(self, setup: AgentSetup, emit: Emit) -> None:
        from agents import (
            Agent,
            MaxTurnsExceeded,
            OpenAIChatCompletionsModel,
            RunConfig,
            Runner,
            function_tool,
        )
        from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
        from openai import AsyncOpenAI

        client = AsyncOpenAI()
        model_name = setup.model or "gpt-4.1"
        model = OpenAIChatCompletionsModel(model=model_name, openai_client=client)

        tools: list[Any] = []
        if setup.skills:

            @function_tool
            def load_skill(name: str) -> str:
                """Load a skill: its instructions (SKILL.md) and the files it comes with.

                Args:
                    name: the skill's name, as the system prompt lists it.
                """
                skill = setup.skills.get(name)
                if skill is None:
                    return f"no skill named {name!r}; the skills are: {', '.join(sorted(setup.skills))}"
                files = sorted(str(p.relative_to(skill.path)) for p in skill.path.rglob("*") if p.is_file())
                return f"{skill.body}\n\n(the skill's files are in {skill.path}: {', '.join(files)})"

            tools.append(load_skill)

        if setup.local_tools:
            cwd = setup.cwd

            @function_tool
            async def run_shell(command: str, timeout: float = SHELL_TIMEOUT) -> str:
                """Run a shell command (bash) in the working directory; returns its output and exit code.

                Args:
                    command: the command line.
                    timeout: seconds before it is killed.
                """
                proc = await asyncio.create_subprocess_exec(
                    "bash",
                    "-c",
                    command,
                    cwd=cwd,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                )
                try:
                    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
                except (TimeoutError, asyncio.CancelledError):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, 9)
                    await proc.wait()
                    raise
                return f"{out.decode(errors='replace')}[exit code {proc.returncode}]"

            tools.append(run_shell)

        servers: list[Any] = []
        for name, config in setup.mcp_servers.items():
            if "command" in config:
                params: dict[str, Any] = {
                    "command": config["command"],
                    "args": list(config.get("args") or []),
                    "env": server_env(config.get("env")),
                    "cwd": str(config.get("cwd") or setup.cwd),
                }
                servers.append(
                    MCPServerStdio(
                        params=params,  # type: ignore[arg-type]
                        name=name,
                        cache_tools_list=True,
                        client_session_timeout_seconds=setup.timeout,
                    )
                )
            else:
                http: dict[str, Any] = {"url": config["url"], "headers": dict(config.get("headers") or {})}
                servers.append(
                    MCPServerStreamableHttp(
                        params=http,  # type: ignore[arg-type]
                        name=name,
                        cache_tools_list=True,
                        client_session_timeout_seconds=setup.timeout,
                    )
                )

        async with contextlib.AsyncExitStack() as stack:
            owner: dict[str, str] = {}
            for server in servers:
                await stack.enter_async_context(server)
                for tool in await server.list_tools():
                    owner[tool.name] = server.name
            hooks = _Hooks(emit, owner)
            agent = Agent(
                name="seer-agent",
                instructions=setup.system_prompt or None,
                model=model,
                tools=tools,
                mcp_servers=servers,
            )
            try:
                result = await Runner.run(
                    agent,
                    input=setup.task,
                    max_turns=setup.max_turns,
                    hooks=hooks,
                    run_config=RunConfig(tracing_disabled=True, workflow_name="seer run_agent"),
                )
            except MaxTurnsExceeded:
                emit(max_turns_final(setup.max_turns))
                return
            emit(AgentMessage("final", _text_of(result.final_output), stop_reason="answered"))


class _Hooks:
    """Turns the SDK's run hooks into messages (defined on first use: subclasses the SDK's)."""

    def __new__(cls, emit: Emit, owner: dict[str, str]) -> Any:
        from agents import RunHooks

        class Hooks(RunHooks):
            def __init__(self) -> None:
                self.started: dict[str, float] = {}

            def _name(self, tool: Any) -> str:
                name = getattr(tool, "name", str(tool))
                server = owner.get(name)
                return f"{server}__{name}" if server else name

            async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
                said: list[str] = []
                calls: list[AgentMessage] = []
                for item in response.output:
                    kind = getattr(item, "type", "")
                    if kind == "message":
                        said += [
                            getattr(part, "text", "") for part in item.content if getattr(part, "text", "")
                        ]
                    elif kind == "function_call":
                        try:
                            arguments = json.loads(item.arguments or "{}")
                        except ValueError:
                            arguments = {"(unparsed)": item.arguments}
                        server = owner.get(item.name)
                        calls.append(
                            AgentMessage(
                                "tool_call",
                                tool=f"{server}__{item.name}" if server else item.name,
                                arguments=arguments,
                                call_id=item.call_id,
                            )
                        )
                emit(AgentMessage("assistant", "\n".join(said)))
                for call in calls:
                    emit(call)

            async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
                self.started[getattr(context, "tool_call_id", "") or self._name(tool)] = time.monotonic()

            async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
                call_id = getattr(context, "tool_call_id", "") or None
                began = self.started.pop(call_id or self._name(tool), None)
                text = _text_of(result)
                emit(
                    AgentMessage(
                        "tool_result",
                        text,
                        tool=self._name(tool),
                        call_id=call_id,
                        is_error=_looks_like_error(text),
                        duration=None if began is None else time.monotonic() - began,
                    )
                )

        return Hooks()


def _looks_like_error(text: str) -> bool:
    """The SDK hands an MCP error result to the model as text; its error marker, if any."""
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and bool(data.get("isError") or data.get("is_error"))
