"""The MCP plumbing the notebook server's tools share: every failure as an error result
(:func:`tool_errors`), blocking work in a thread with progress notifications (:func:`in_thread`),
following a running cell (:func:`follow`), and the ``session_id`` argument types."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, ParamSpec

import anyio
import anyio.to_thread
import mcp.types as types
from mcp.server.mcpserver import Context
from pydantic import Field
from seer.errors import (
    KernelDiedError,
    SeerError,
)
from seer.notebook import (
    NotebookSession,
)

from seer_mcp._progress import with_progress
from seer_mcp.cells import Cell
from seer_mcp.failures import ToolFailure, redact
from seer_mcp.rendering import progress_message, text_result

#: Seconds between progress notifications while a cell (or a slow tool) runs.
PROGRESS_INTERVAL = float(os.environ.get("SEER_MCP_PROGRESS_INTERVAL") or 1.0)

# --- the MCP layer --------------------------------------------------------------------------

P = ParamSpec("P")


def tool_errors(
    fn: Callable[P, Awaitable[types.CallToolResult]],
) -> Callable[P, Awaitable[types.CallToolResult]]:
    """Every failure of a tool becomes an error result saying what went wrong (never a crash, never
    a token)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> types.CallToolResult:
        try:
            return await fn(*args, **kwargs)
        except ToolFailure as exc:
            return text_result(redact(str(exc)), error=True)
        except KernelDiedError as exc:
            why = str(exc).split(";")[0]
            return text_result(redact(f"{why}. Call restart_session to start the kernel again."), error=True)
        except SeerError as exc:
            return text_result(redact(f"{type(exc).__name__}: {exc}"), error=True)
        except Exception as exc:
            return text_result(redact(f"unexpected error: {type(exc).__name__}: {exc}"), error=True)

    return wrapper


async def _with_progress(fn: Callable[[], Any], ctx: Context | None, message: Callable[[float], str]) -> Any:
    """Run blocking ``fn`` in a worker thread; meanwhile send a progress notification every
    :data:`PROGRESS_INTERVAL` seconds (when the client asked for progress). A cancelled call
    abandons the thread, which runs on."""
    return await with_progress(fn, ctx, message, PROGRESS_INTERVAL)


async def in_thread(fn: Callable[[], Any], ctx: Context | None = None, what: str = "working") -> Any:
    """Run blocking ``fn`` in a worker thread, with progress notifications while it takes long."""
    return await _with_progress(fn, ctx, lambda elapsed: f"{what} ({elapsed:.0f}s)")


async def follow(
    cell: Cell, ctx: Context, limit: float | None, session: NotebookSession | None = None
) -> bool:
    """Wait (up to ``limit`` seconds) for ``cell``, sending a progress notification every
    :data:`PROGRESS_INTERVAL` seconds; True once it finished. A call cancelled meanwhile (the client
    gave up) leaves the cell running, marked detached."""
    finished = anyio.Event()
    loop = asyncio.get_running_loop()

    def wake() -> None:  # from the cell's thread
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            loop.call_soon_threadsafe(finished.set)

    if not cell.watch(wake):
        return True
    deadline = None if limit is None else time.monotonic() + limit
    try:
        while True:
            wait = (
                PROGRESS_INTERVAL if deadline is None else min(PROGRESS_INTERVAL, deadline - time.monotonic())
            )
            if wait <= 0:
                return cell.done.is_set()
            with anyio.move_on_after(wait):
                await finished.wait()
            if cell.done.is_set():
                return True
            with contextlib.suppress(Exception):
                await ctx.report_progress(cell.elapsed, None, progress_message(cell, session))
    except BaseException:
        if not cell.done.is_set():
            cell.detached = True
        raise
    finally:
        cell.unwatch(wake)


SessionId = Annotated[
    str, Field(description="The session's id (from attach_to_session or start_new_session).")
]

#: A session id a tool lets the agent leave out.
OptionalSessionId = Annotated[
    str,
    Field(
        description="The session's id (from attach_to_session or start_new_session). Left out: the "
        "session you last attached or started, else the one this server is configured with."
    ),
]
