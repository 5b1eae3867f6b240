"""MCP progress for a blocking call: one helper the notebook and shell servers share."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context


async def with_progress(
    fn: Callable[[], Any], ctx: Context | None, message: Callable[[float], str], interval: float
) -> Any:
    """Run blocking ``fn`` in a worker thread and return (or raise) what it does; meanwhile send a
    progress notification with ``message(elapsed)`` every ``interval`` seconds (a no-op for a
    client that sent no progress token), so a long call is visibly alive and a client whose
    request timeout resets on progress keeps waiting. A cancelled call abandons the thread, which
    runs on."""
    if ctx is None:
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
    started = time.monotonic()
    outcome: list[tuple[bool, Any]] = []

    def call() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # re-raised below, outside the task group
            outcome.append((False, exc))

    async def ticker() -> None:
        while True:
            await anyio.sleep(interval)
            elapsed = time.monotonic() - started
            with contextlib.suppress(Exception):
                await ctx.report_progress(elapsed, None, message(elapsed))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        tg.cancel_scope.cancel()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
