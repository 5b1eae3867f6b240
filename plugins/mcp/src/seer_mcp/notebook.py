"""The notebook MCP server: an agent drives seer notebook sessions through MCP tools (stdio).

Start it with ``python -m seer_mcp.notebook`` or ``seer mcp notebook``; ``session.mcp_config`` is
the client configuration for one session. The agent's usual path (seed 004): a setup script starts
a sandbox and prints ``{"session_id": ..., "jupyter_url": ...}``; the agent calls
``attach_to_session`` with those, then ``execute_code`` / ``add_markdown`` / ``edit_cell``. Every
visible cell lands in the session's notebook, as when the session is used from Python.

A cell runs in a thread of the server's, not in the tool call: while it runs the server sends MCP
progress notifications (to a client that gave a progress token), so a client with a request
timeout that resets on progress keeps waiting; a cell that outlives its call (the client gave up)
keeps running, and ``get_cell_result`` collects what it produced.

Tool failures (an unknown session, a server that does not answer, a wrong token, a dead kernel, a
busy session) come back as error results whose text says what to do next; the server keeps serving.

The research record is never lost: a cell is in the notebook before it runs (its outputs are
saved as they come, and when it ends), and every session's notebook is copied, as it is written, to
the sandbox's client-side folder: the one its record names (``$SEER_OUTPUTS_DIR/<sandbox_id>/`` or
``./seer-outputs/<sandbox_id>/``, fixed when the sandbox started). A server attaching to a session
again recovers what the kernel ran that the notebook misses, and a cell a previous server left
running, with its outputs (:meth:`seer.notebook.NotebookSession.sync`). A Jupyter server that died
is reported as such; ``restart_session`` starts it again, and the session, with the models.

Environment: ``SEER_SESSION_ID`` with ``SEER_JUPYTER_URL`` (or ``SEER_URL``) name a default session,
attached on first use; ``SEER_JUPYTER_URL`` alone is the server ``attach_to_session`` uses when given
none. ``SEER_OUTPUTS_DIR`` is the base of the client-side folders for sandboxes without a record here
(``session.mcp_config`` sets it). ``SEER_MCP_PROGRESS_INTERVAL`` sets the seconds between progress
notifications (default 1).

The server is split by concept: :mod:`seer_mcp.registry` (the sessions), :mod:`seer_mcp.cells` (a
cell run and its session), :mod:`seer_mcp.rendering` (outputs as MCP content, instructions),
:mod:`seer_mcp.server` (the MCP plumbing), :mod:`seer_mcp.tools` (the tools; the editing ones in
:mod:`seer_mcp.notebook_tools`) and :mod:`seer_mcp.failures`. This module serves it on stdio.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from seer_mcp.failures import MAX_CODE, ToolFailure
from seer_mcp.registry import SessionRegistry
from seer_mcp.rendering import instructions
from seer_mcp.server import PROGRESS_INTERVAL
from seer_mcp.tools import build_server

__all__ = [
    "MAX_CODE",
    "PROGRESS_INTERVAL",
    "SWITCH_INTERVAL",
    "SessionRegistry",
    "ToolFailure",
    "build_server",
    "instructions",
    "main",
]


#: The server's thread switch interval (seconds; Python's default is 0.005). A call hands off
#: between threads several times (the event loop, the cell's thread, the kernel websocket's and
#: the live document's readers): a thread woken by its message waits for the one holding the
#: interpreter until that one blocks or this interval passes. Under load, 0.5 ms took 0.1x-0.9x
#: off ``execute_code("1+1")`` against a raw kernel client (4 of 4 runs, load 7-12).
SWITCH_INTERVAL = 0.0005


async def _serve(server: MCPServer) -> None:
    """Serve on stdio (seer's pipe streams, :mod:`seer_mcp._stdio`) until stdin closes."""
    from seer_mcp._stdio import serve_stdio

    lowlevel = getattr(server, "_lowlevel_server", None)
    if lowlevel is None:  # an SDK without it: its own stdio transport
        await server.run_stdio_async()
        return
    async with serve_stdio() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the notebook tools on stdio until the client closes stdin (or SIGTERM)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return
    server, registry = build_server()
    sys.setswitchinterval(SWITCH_INTERVAL)  # this process is the server's alone

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        anyio.run(_serve, server)
    except KeyboardInterrupt:
        pass
    finally:
        # A client that stops waiting sends SIGTERM: let the clean-up finish regardless.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            registry.close()
        finally:
            signal.signal(signal.SIGTERM, previous)
    # Done: skip the interpreter's slow teardown (threads, modules), which a client waiting a
    # couple of seconds for the server to exit would otherwise cut short with a kill.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


if __name__ == "__main__":
    # Run as seer_mcp.notebook, not as a second copy named __main__ (its names are imported).
    from seer_mcp.notebook import main as _main

    _main()
