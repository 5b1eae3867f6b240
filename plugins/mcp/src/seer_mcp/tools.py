"""The notebook MCP server: :func:`build_server` makes it, with its tools for sessions and cells
(the notebook-editing tools are :mod:`seer_mcp.notebook_tools`'), driving a
:class:`~seer_mcp.registry.SessionRegistry`. :mod:`seer_mcp.notebook` serves it on stdio."""

from __future__ import annotations

import json
from typing import Annotated

import anyio
import anyio.to_thread
import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field
from seer.notebook import (
    NO_MODELS_TEXT,
)

from seer_mcp import notebook_tools
from seer_mcp.cells import Entry, describe, server_url
from seer_mcp.failures import check_index, check_timeout
from seer_mcp.mcpserver import SeerMCPServer
from seer_mcp.registry import SessionRegistry
from seer_mcp.rendering import (
    as_text,
    cell_result,
    instructions,
    output_content,
    still_running,
    text_result,
)
from seer_mcp.server import OptionalSessionId, follow, in_thread, tool_errors

#: How long ``get_cell_result`` waits for a running cell by default.
DEFAULT_WAIT = 60.0

#: How long ``interrupt_session`` waits for the interrupted cell to end.
INTERRUPT_WAIT = 10.0


def build_server(registry: SessionRegistry | None = None) -> tuple[MCPServer, SessionRegistry]:
    """The notebook MCP server and the registry of sessions its tools drive."""
    reg = registry if registry is not None else SessionRegistry.from_env()
    server: MCPServer = SeerMCPServer("seer-notebook", instructions=instructions(reg), log_level="WARNING")

    async def entry_for(session_id: str) -> Entry:
        entry = reg.lookup(session_id)
        if entry is None:
            entry = await in_thread(lambda: reg.resolve(session_id))
        return entry

    @server.tool(structured_output=False)
    @tool_errors
    async def start_new_session(
        ctx: Context,
        name: Annotated[str, Field(description="Optional notebook name.")] = "",
    ) -> types.CallToolResult:
        """Start a LOCAL Python kernel on this machine: no GPU, no models. Only for quick scratch work
        (trying out plain Python). DO NOT use it for GPU sandboxes or models: for those, write a setup
        script that starts a seer Sandbox and creates a notebook session, run it, and call
        attach_to_session with the session_id and jupyter_url it prints."""
        entry = await in_thread(lambda: reg.start_local(name), ctx, "starting a local kernel")
        session = entry.session
        return text_result(
            f"Started session {session.session_id}: a local kernel on this machine (no GPU, no models), "
            f"notebook {session.notebook_path}. Pass session_id={session.session_id!r} to execute_code."
        )

    @server.tool(structured_output=False)
    @tool_errors
    async def attach_to_session(
        ctx: Context,
        session_id: Annotated[
            str,
            Field(
                description="session_id from the JSON your setup script printed. Empty: start a new session."
            ),
        ] = "",
        jupyter_url: Annotated[
            str,
            Field(description="jupyter_url from the same JSON, exactly as printed (it carries the token)."),
        ] = "",
        sandbox_id: Annotated[
            str,
            Field(
                description="Only with no session_id: start a new session in this sandbox "
                "(`seer up` prints its id)."
            ),
        ] = "",
        name: Annotated[str, Field(description="Notebook name for a new session.")] = "",
    ) -> types.CallToolResult:
        """Connect to a notebook session in a (GPU) sandbox, using the JSON your setup script printed:
        attach_to_session(session_id=..., jupyter_url=...). Without session_id, a new session (a new
        notebook, with the sandbox's models loaded) is started on that Jupyter server, or in the
        sandbox named by sandbox_id. Returns the session id and the models already loaded in the
        kernel; only then can execute_code run in it."""
        entry, how = await in_thread(
            lambda: reg.attach(session_id, jupyter_url, sandbox_id, name), ctx, "connecting to the kernel"
        )
        session = entry.session
        verb = {
            "already attached": "Already attached to",
            "attached": "Attached to",
            "attached while a cell runs": "Attached to",
        }.get(how, "Started")
        text = (
            f"{verb} session {session.session_id}: notebook {session.notebook_path} on "
            f"{server_url(session)}. Every cell you run is recorded there"
            + (f" and copied to {session.local_path}" if session.local_path is not None else "")
            + f".\n\n{session.model_info_text}"
        )
        recovered = session.recovered
        if recovered and how == "attached":
            text += (
                f"\n\nRecorded {len(recovered)} cell(s) the kernel ran that the notebook was missing (a "
                "server before this one stopped before recording them)."
            )
        if how == "attached while a cell runs":
            sid = session.session_id
            text += (
                "\n\nThe kernel is still running a cell started before this server attached; its output is "
                f"recorded when it finishes. get_cell_result(session_id={sid!r}) waits for it; "
                f"interrupt_session(session_id={sid!r}) stops it."
            )
        return text_result(text)

    @server.tool(structured_output=False)
    @tool_errors
    async def execute_code(
        ctx: Context,
        code: Annotated[str, Field(description="Python code to run as one notebook cell.")],
        session_id: OptionalSessionId = "",
        timeout_seconds: Annotated[
            float | None,
            Field(description="Interrupt the cell after this many seconds (> 0; default: no limit)."),
        ] = None,
    ) -> types.CallToolResult:
        """Run Python code as a new cell in the session's kernel and return what it printed, its value,
        any images (plots) and, if it raised, the traceback. The cell is recorded in the notebook; the
        last line of the result names its index ('[cell N, In [k], 1.23s]') for edit_cell. Variables
        persist between cells; pre-loaded models are already in the namespace. A long cell sends
        progress notifications; if this call is abandoned, the cell keeps running and
        get_cell_result collects its output. Progress notifications carry its latest output lines."""
        timeout = check_timeout(timeout_seconds)
        entry = await entry_for(session_id)
        cell = reg.begin(entry, code, timeout=timeout)
        await follow(cell, ctx, None, entry.session)
        return cell_result(cell, entry)

    @server.tool(structured_output=False)
    @tool_errors
    async def add_markdown(
        markdown: Annotated[str, Field(description="Markdown text for a new notebook cell.")],
        session_id: OptionalSessionId = "",
    ) -> types.CallToolResult:
        """Append a markdown cell to the session's notebook: document hypotheses, methods and findings
        as you go."""
        entry = await entry_for(session_id)
        index = await in_thread(lambda: reg.add_markdown(entry, markdown))
        return text_result(f"Added markdown as cell {index} of {entry.session.notebook_path}.")

    @server.tool(structured_output=False)
    @tool_errors
    async def edit_cell(
        ctx: Context,
        cell_index: Annotated[int, Field(description="Index of the notebook cell to replace (0-based).")],
        code: Annotated[str, Field(description="The cell's new code (or text, for a markdown cell).")],
        session_id: OptionalSessionId = "",
        timeout_seconds: Annotated[
            float | None,
            Field(description="Interrupt the cell after this many seconds (> 0; default: no limit)."),
        ] = None,
    ) -> types.CallToolResult:
        """Replace a notebook cell's code and run it again; its outputs in the notebook are replaced by
        the new ones. A markdown cell gets the new text (nothing runs). Returns what execute_code
        returns."""
        timeout = check_timeout(timeout_seconds)
        entry = await entry_for(session_id)
        session = entry.session
        check_index(session, cell_index)
        if session.cells[cell_index].get("cell_type") == "markdown":
            await in_thread(lambda: reg.edit_markdown(entry, cell_index, code))
            return text_result(f"Replaced the text of markdown cell {cell_index}.")
        cell = reg.begin(entry, code, replace=cell_index, timeout=timeout)
        await follow(cell, ctx, None, session)
        return cell_result(cell, entry)

    @server.tool(structured_output=False)
    @tool_errors
    async def get_cell_result(
        ctx: Context,
        session_id: OptionalSessionId = "",
        cell_index: Annotated[
            int | None,
            Field(
                description="A notebook cell whose recorded outputs to return. Omit for the latest cell run "
                "through this server (e.g. one whose execute_code call timed out)."
            ),
        ] = None,
        wait_seconds: Annotated[
            float, Field(description="How long to wait for a cell that is still running.", ge=0)
        ] = DEFAULT_WAIT,
    ) -> types.CallToolResult:
        """Get the output of a cell that outlived its execute_code call (the call timed out or was
        cancelled while the cell kept running, or a server before this one started it): waits up to
        wait_seconds for it, with progress notifications; a cell still running after that comes back
        with its output so far. With cell_index, returns that notebook cell's recorded outputs
        instead."""
        entry = await entry_for(session_id)
        session = entry.session
        sid = session.session_id
        if cell_index is not None:
            running = entry.cell
            if running is not None and running.index == cell_index and not running.done.is_set():
                cell_index = None
            else:
                check_index(session, cell_index)
                nb_cell = session.cells[cell_index]
                if nb_cell.get("cell_type") != "code":
                    return text_result(as_text(nb_cell.get("source", "")))
                outputs = nb_cell.get("outputs", [])
                blocks = output_content(outputs) or [types.TextContent(type="text", text="(no output)")]
                count = nb_cell.get("execution_count")
                blocks.append(
                    types.TextContent(
                        type="text", text=f"[cell {cell_index}" + (f", In [{count}]]" if count else "]")
                    )
                )
                return types.CallToolResult(
                    content=blocks, is_error=any(o.get("output_type") == "error" for o in outputs)
                )
        cell = entry.cell
        if cell is None:
            return text_result(
                f"No cell has run in session {sid!r} through this server. Pass cell_index to read a notebook "
                "cell's recorded outputs.",
                error=True,
            )
        if not await follow(cell, ctx, wait_seconds, session):
            return still_running(session, cell)
        return cell_result(cell, entry)

    @server.tool(structured_output=False)
    @tool_errors
    async def list_sessions() -> types.CallToolResult:
        """List the sessions this server is attached to: id, notebook, server, kind (sandbox or local
        kernel), state (idle, running a cell, kernel dead) and number of cells."""
        rows = [describe(e) for e in reg.entries()]
        pending = reg.pending_default()
        if pending:
            rows.append({"session_id": pending, "state": "not attached yet (the default session)"})
        if not rows:
            return text_result(reg.known())
        return text_result(json.dumps(rows, indent=1))

    @server.tool(structured_output=False)
    @tool_errors
    async def interrupt_session(session_id: OptionalSessionId = "") -> types.CallToolResult:
        """Interrupt the cell running in the session (it ends with KeyboardInterrupt); the kernel and
        its variables stay. Use it on a cell that runs too long."""
        entry = await entry_for(session_id)
        session = entry.session
        await in_thread(session.interrupt)
        cell = entry.cell
        if cell is None or cell.done.is_set():
            return text_result(
                f"Sent an interrupt to session {session.session_id}; no cell of this server was running."
            )
        finished = await anyio.to_thread.run_sync(cell.done.wait, INTERRUPT_WAIT, abandon_on_cancel=True)
        if not finished:
            return text_result(
                f"Sent an interrupt, but the cell is still running after {INTERRUPT_WAIT:g}s (it may not "
                f"react to KeyboardInterrupt). restart_session(session_id={session.session_id!r}) stops it "
                "for sure (the kernel's variables are lost)."
            )
        result = cell_result(cell, entry)
        result.content.insert(0, types.TextContent(type="text", text="Interrupted. The cell's output:"))
        return result

    @server.tool(structured_output=False)
    @tool_errors
    async def restart_session(ctx: Context, session_id: OptionalSessionId = "") -> types.CallToolResult:
        """Restart the session's kernel: after it died, or to start afresh. Its variables are lost; the
        sandbox's models are loaded again and the notebook so far is kept. If the sandbox's Jupyter
        server died, it is started again first."""
        entry = await entry_for(session_id)
        session = entry.session
        had_models = session.model_info_text != NO_MODELS_TEXT
        what = await in_thread(lambda: reg.restart(entry), ctx, "restarting the kernel")
        if had_models and session.model_info_text == NO_MODELS_TEXT:
            return text_result(
                f"{what} The models did not come back (the kernel found no model manifest). Start a "
                "session that loads them: attach_to_session(jupyter_url=<the same jupyter_url>) with no "
                "session_id.",
                error=True,
            )
        return text_result(f"{what}\n\n{session.model_info_text}")

    @server.tool(structured_output=False)
    @tool_errors
    async def shutdown_session(session_id: OptionalSessionId = "") -> types.CallToolResult:
        """End the session: its kernel is shut down (a local session's sandbox too). The notebook
        stays. Other sessions on the same sandbox are not affected."""
        entry = await entry_for(session_id)
        session = entry.session
        await in_thread(lambda: reg.shutdown(entry))
        extra = " and its local sandbox" if entry.origin == "local" else ""
        return text_result(
            f"Shut down session {session.session_id}{extra}; its notebook {session.notebook_path} stays."
        )

    notebook_tools.register(server, reg)
    return server, reg
