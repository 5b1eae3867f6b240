"""Shared by the MCP tests and benchmark: a synchronous handle on a real MCP client session.

:class:`McpClient` spawns an MCP server as a subprocess and talks to it over stdio with the mcp
SDK's own client (``mcp.client.stdio.stdio_client`` + ``ClientSession``), run in an anyio blocking
portal (an event loop in a thread of its own), so that plain synchronous tests can call tools,
collect progress notifications and give up on a call after a read timeout, as an agent's client
does. The server's stderr goes to a file; :attr:`McpClient.stderr` shows it when a test fails.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
import mcp.types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

#: Variables a test server needs from the test run (its SEER_HOME, an offline Hugging Face cache,
#: the folder for research records outside the checkout).
PASSED_ENV = ("SEER_HOME", "HF_HOME", "HF_HUB_OFFLINE", "SEER_OUTPUTS_DIR")


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a server the tests start: the run's seer and Hugging Face settings."""
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env.update(extra or {})
    return env


@dataclass
class Progress:
    """The progress notifications one call received, with when each arrived (monotonic)."""

    started: float = field(default_factory=time.monotonic)
    seen: list[tuple[float, float, str | None]] = field(default_factory=list)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((time.monotonic(), progress, message))

    @property
    def gaps(self) -> list[float]:
        """Seconds between the call's start and each notification, and between notifications."""
        times = [self.started, *(t for t, _, _ in self.seen)]
        return [b - a for a, b in itertools.pairwise(times)]


class IdleTimeout(Exception):
    """A call that heard nothing (no result, no progress) for its idle timeout."""


class McpClient:
    """An MCP client session on a server started as ``command args`` (default: this Python)."""

    def __init__(
        self,
        args: list[str],
        env: Mapping[str, str] | None = None,
        *,
        command: str = sys.executable,
        read_timeout: float = 180.0,
    ):
        self.read_timeout = read_timeout
        self._errlog = tempfile.NamedTemporaryFile("w+", prefix="seer-mcp-server-", suffix=".log")  # noqa: SIM115
        params = StdioServerParameters(command=command, args=args, env=dict(env or {}))
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        try:
            self._session_cm = self.portal.wrap_async_context_manager(self._connect(params))
            self.session: ClientSession = self._session_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            self._errlog.close()
            raise
        self._closed = False

    @contextlib.asynccontextmanager
    async def _connect(self, params: StdioServerParameters) -> AsyncIterator[ClientSession]:
        async with (
            stdio_client(params, errlog=self._errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(60):
                await session.initialize()
            yield session

    @property
    def stderr(self) -> str:
        """What the server wrote to stderr so far."""
        self._errlog.flush()
        with open(self._errlog.name) as fh:
            return fh.read()

    def tools(self) -> list[types.Tool]:
        return list(self.portal.call(self.session.list_tools).tools)

    def call(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: Progress | None = None,
    ) -> types.CallToolResult:
        """Call ``tool``; ``timeout`` is the client's read timeout (an ``MCPError`` past it)."""
        return self.portal.call(
            self.session.call_tool, tool, arguments or {}, timeout or self.read_timeout, progress
        )

    def call_with_idle_timeout(
        self, tool: str, arguments: dict[str, Any], *, idle: float, progress: Progress
    ) -> types.CallToolResult:
        """Call ``tool`` the way clients whose request timeout resets on progress do: give up only
        after ``idle`` seconds without a result or a progress notification."""

        async def run() -> types.CallToolResult:
            outcome: list[types.CallToolResult] = []
            async with anyio.create_task_group() as tg:

                async def watchdog() -> None:
                    while True:
                        await anyio.sleep(0.1)
                        last = progress.seen[-1][0] if progress.seen else progress.started
                        if time.monotonic() - last > idle:
                            tg.cancel_scope.cancel()
                            return

                tg.start_soon(watchdog)
                outcome.append(await self.session.call_tool(tool, arguments, None, progress))
                tg.cancel_scope.cancel()
            if not outcome:
                raise IdleTimeout(f"{tool}: nothing heard for {idle}s")
            return outcome[0]

        return self.portal.call(run)

    def close(self) -> None:
        """End the session: the server's stdin closes and it exits (the SDK stops it if not)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._session_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)
            self._errlog.close()

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def texts(result: types.CallToolResult) -> list[str]:
    """The text blocks of a tool result."""
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


def text(result: types.CallToolResult) -> str:
    """A tool result's text blocks, joined by newlines."""
    return "\n".join(texts(result))
