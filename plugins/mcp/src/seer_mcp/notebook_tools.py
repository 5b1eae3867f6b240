"""The notebook server's tools for reading and editing a session's notebook, as an agent expects
from a Jupyter MCP server: read the notebook or one cell, insert, delete, move, overwrite, re-run
and clear cells, list the notebooks on the server and open one to continue it.

Every edit goes through :class:`seer.notebook.NotebookSession`'s public methods, so the notebook
file in the sandbox (and its local copy) holds each edit as it is made; cells run exactly as
``execute_code``'s do (in the server's thread for the session, with progress notifications). An
edit is refused while a cell runs, since it would move the cell the run is recorded into.
:func:`register` adds the tools to the server :func:`seer_mcp.tools.build_server` builds.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BeforeValidator, Field
from seer.errors import KernelDiedError, NotebookError
from seer.notebook import NotebookSession, check_notebook_path, notebook_cells

from seer_mcp.cells import Entry
from seer_mcp.failures import ToolFailure, busy_text
from seer_mcp.registry import SessionRegistry
from seer_mcp.rendering import (
    MAX_TEXT,
    OUTPUT_PREVIEW,
    as_text,
    cell_heading,
    cell_result,
    output_content,
    outputs_preview,
    text_result,
)
from seer_mcp.server import SessionId, follow, in_thread, tool_errors

__all__ = ["MAX_CELLS", "OUTPUT_PREVIEW", "register"]

#: Most cells one ``read_notebook`` call shows.
MAX_CELLS = 50

T = TypeVar("T")


def _integer(value: Any) -> Any:
    """JSON ``true`` is not an index (pydantic would take it as 1)."""
    if isinstance(value, bool):
        raise ValueError("must be an integer, not a boolean")
    return value


CellIndex = Annotated[
    int,
    BeforeValidator(_integer),
    Field(description="The cell's index in the notebook, from 0 (read_notebook shows each cell's)."),
]
Timeout = Annotated[
    float | None, Field(description="Interrupt the cell after this many seconds (default: no limit).")
]


def _hint(session: NotebookSession) -> str:
    return f" read_notebook(session_id={session.session_id!r}) lists the cells with their indexes."


def _edit(entry: Entry, change: Callable[[], T]) -> T:
    """(A worker thread.) Make ``change`` to the session's notebook, unless a cell is running."""
    session = entry.session
    with entry.lock:
        if entry.busy:
            assert entry.cell is not None
            raise ToolFailure(busy_text(session.session_id, entry.cell))
        try:
            return change()
        except KernelDiedError:
            raise
        except NotebookError as exc:
            raise ToolFailure(f"{exc}.{_hint(session)}") from exc


def _read(session: NotebookSession, index: int) -> dict[str, Any]:
    try:
        return session.cell(index)
    except NotebookError as exc:
        raise ToolFailure(f"{exc}.{_hint(session)}") from exc


def _not_run(session: NotebookSession, index: int) -> str:
    return f" It has not run: execute_cell(session_id={session.session_id!r}, cell_index={index}) runs it."


def _saved(entry: Entry) -> str:
    writer = entry.writer
    if writer is not None and writer.error:
        return f"\nWarning: the notebook could not be saved: {writer.error}"
    return ""


async def _entry(reg: SessionRegistry, session_id: str) -> Entry:
    entry = reg.lookup(session_id)
    if entry is None:
        entry = await in_thread(lambda: reg.resolve(session_id))
    return entry


async def _run(
    reg: SessionRegistry, entry: Entry, ctx: Context, index: int, source: str, timeout: float | None
) -> types.CallToolResult:
    """Run code cell ``index`` (with ``source``) as execute_code runs a cell; answer its result."""
    cell = reg.begin(entry, source, replace=index, timeout=timeout)
    await follow(cell, ctx, None, entry.session)
    return cell_result(cell, entry)


def _local_notebook(path: Path) -> dict[str, Any]:
    """The notebook in file ``path`` on this machine, or a failure saying why it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ToolFailure(f"There is no file {str(path)!r} on this machine.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolFailure(f"Cannot read {str(path)!r}: {exc}.") from exc
    try:
        notebook = json.loads(text)
    except ValueError as exc:
        raise ToolFailure(f"{str(path)!r} is not a notebook: it is not JSON ({exc}).") from exc
    return dict(notebook) if isinstance(notebook, dict) else {}


def register(server: MCPServer, reg: SessionRegistry) -> None:
    """Add the notebook reading and editing tools to ``server``, driving ``reg``'s sessions."""

    @server.tool(structured_output=False)
    @tool_errors
    async def read_notebook(
        session_id: SessionId,
        start_index: Annotated[
            int, BeforeValidator(_integer), Field(description="The first cell to show (default 0).")
        ] = 0,
        end_index: Annotated[
            int | None,
            BeforeValidator(_integer),
            Field(
                description="Show cells up to, not including, this index (default: the end, "
                f"{MAX_CELLS} cells at most per call)."
            ),
        ] = None,
    ) -> types.CallToolResult:
        """Read the session's notebook: each cell's index, type (code, markdown), execution count,
        full source and a short preview of its outputs. Use it to find a cell's index for read_cell,
        insert_cell, delete_cell, move_cell, overwrite_cell_source, execute_cell and clear_outputs.
        Shows at most 50 cells per call; the answer says how to read on."""
        entry = await _entry(reg, session_id)
        session = entry.session
        count = len(session.cells)
        if count == 0:
            return text_result(f"{session.notebook_path} has no cells yet.")
        for name, value in (("start_index", start_index), ("end_index", end_index)):
            if value is not None and value < 0:
                raise ToolFailure(
                    f"{name} {value} is negative: cells count from 0 (the notebook has {count})."
                )
        if start_index >= count:
            raise ToolFailure(
                f"start_index {start_index} is out of range: {session.notebook_path} has {count} cells "
                f"(0 to {count - 1})."
            )
        stop = count if end_index is None else min(end_index, count)
        if stop <= start_index:
            raise ToolFailure(f"end_index {end_index} must be greater than start_index {start_index}.")
        stop = min(stop, start_index + MAX_CELLS)
        blocks: list[str] = []
        size = 0
        shown = start_index
        for index in range(start_index, stop):
            cell = _read(session, index)
            block = cell_heading(index, cell) + "\n" + as_text(cell.get("source", ""))
            if cell.get("cell_type") == "code" and cell.get("outputs"):
                block += "\n>>> outputs:\n" + outputs_preview(index, cell["outputs"])
            if blocks and size + len(block) > MAX_TEXT:
                break
            blocks.append(block)
            size += len(block)
            shown = index + 1
        head = f"{session.notebook_path}: {count} cells; cells {start_index} to {shown - 1}:"
        tail = (
            f"\n(cells {shown} to {count - 1} not shown: read_notebook(session_id={session.session_id!r}, "
            f"start_index={shown}) reads on)"
            if shown < count
            else ""
        )
        return text_result(head + "\n\n" + "\n\n".join(blocks) + tail)

    @server.tool(structured_output=False)
    @tool_errors
    async def read_cell(session_id: SessionId, cell_index: CellIndex) -> types.CallToolResult:
        """Read one cell: its type, execution count, full source, and for a code cell all of its
        recorded outputs (text, images, tracebacks), as execute_code answers them. The cell is not
        run; a traceback in its outputs does not make this call an error."""
        entry = await _entry(reg, session_id)
        cell = _read(entry.session, cell_index)
        blocks: list[types.ContentBlock] = [
            types.TextContent(
                type="text", text=cell_heading(cell_index, cell) + "\n" + as_text(cell.get("source", ""))
            )
        ]
        if cell.get("cell_type") == "code":
            outputs = output_content(cell.get("outputs", []))
            blocks.append(types.TextContent(type="text", text=">>> outputs:" if outputs else "(no outputs)"))
            blocks.extend(outputs)
        return types.CallToolResult(content=blocks, is_error=False)

    @server.tool(structured_output=False)
    @tool_errors
    async def insert_cell(
        ctx: Context,
        session_id: SessionId,
        cell_index: Annotated[
            int,
            BeforeValidator(_integer),
            Field(
                description="Where the new cell goes, from 0; the cell there and those after it move "
                "down by one. The number of cells appends it at the end."
            ),
        ],
        source: Annotated[str, Field(description="The new cell's code, or its text for a markdown cell.")],
        cell_type: Annotated[
            Literal["code", "markdown"], Field(description="'code' (default) or 'markdown'.")
        ] = "code",
        run: Annotated[
            bool, Field(description="Run the new code cell at once and answer its output (default: no).")
        ] = False,
        timeout_seconds: Timeout = None,
    ) -> types.CallToolResult:
        """Insert a new code or markdown cell at a position in the session's notebook (later cells
        move down by one). A code cell is not run unless run=true; then the answer is what
        execute_code answers, and its outputs are recorded in the cell. Refused while a cell runs."""
        entry = await _entry(reg, session_id)
        session = entry.session
        if run and cell_type == "code" and not session.alive:
            raise ToolFailure(
                f"The kernel of session {session.session_id!r} is dead: call restart_session(session_id="
                f"{session.session_id!r}) first, then insert the cell."
            )
        await in_thread(lambda: _edit(entry, lambda: session.insert_cell(cell_index, source, cell_type)))
        where = f"Inserted a {cell_type} cell at index {cell_index} of {session.notebook_path}"
        count = len(session.cells)
        if run and cell_type == "code":
            result = await _run(reg, entry, ctx, cell_index, source, timeout_seconds)
            result.content.insert(0, types.TextContent(type="text", text=f"{where}; it ran:"))
            return result
        later = " (the cells after it moved down by one)" if cell_index < count - 1 else ""
        how = _not_run(session, cell_index) if cell_type == "code" else ""
        return text_result(f"{where}{later}; the notebook has {count} cells.{how}{_saved(entry)}")

    @server.tool(structured_output=False)
    @tool_errors
    async def delete_cell(session_id: SessionId, cell_index: CellIndex) -> types.CallToolResult:
        """Delete a cell from the session's notebook; the cells after it move up by one. Answers the
        deleted cell's source (insert_cell puts it back). The kernel's variables are not touched.
        Refused while a cell runs."""
        entry = await _entry(reg, session_id)
        session = entry.session
        removed = await in_thread(lambda: _edit(entry, lambda: session.delete_cell(cell_index)))
        return text_result(
            f"Deleted cell {cell_index} ({removed.get('cell_type')}) of {session.notebook_path}; it has "
            f"{len(session.cells)} cells now. Its source was:\n{as_text(removed.get('source', ''))}"
            f"{_saved(entry)}"
        )

    @server.tool(structured_output=False)
    @tool_errors
    async def move_cell(
        session_id: SessionId,
        cell_index: CellIndex,
        to_index: Annotated[
            int,
            BeforeValidator(_integer),
            Field(description="The index the cell has after the move, from 0 (the cells between shift)."),
        ],
    ) -> types.CallToolResult:
        """Move a cell to another position in the session's notebook: it ends up at to_index, and
        the cells between shift by one. Nothing runs. Refused while a cell runs."""
        entry = await _entry(reg, session_id)
        session = entry.session
        await in_thread(lambda: _edit(entry, lambda: session.move_cell(cell_index, to_index)))
        return text_result(
            f"Moved cell {cell_index} to index {to_index} of {session.notebook_path}.{_saved(entry)}"
        )

    @server.tool(structured_output=False)
    @tool_errors
    async def overwrite_cell_source(
        ctx: Context,
        session_id: SessionId,
        cell_index: CellIndex,
        source: Annotated[str, Field(description="The cell's new code (or text, for a markdown cell).")],
        run: Annotated[
            bool,
            Field(description="Run the code cell with its new source and answer its output (default: no)."),
        ] = False,
        timeout_seconds: Timeout = None,
    ) -> types.CallToolResult:
        """Replace a cell's source. Without run, nothing runs and a code cell's old outputs are
        cleared (they came from the old source); with run=true the code cell runs with its new
        source and the answer is what execute_code answers, its outputs recorded in the cell (like
        edit_cell). A markdown cell just gets the new text. Refused while a cell runs."""
        entry = await _entry(reg, session_id)
        session = entry.session
        kind = _read(session, cell_index).get("cell_type")
        if run and kind == "code":
            return await _run(reg, entry, ctx, cell_index, source, timeout_seconds)
        await in_thread(lambda: _edit(entry, lambda: session.set_source(cell_index, source)))
        how = _not_run(session, cell_index) if kind == "code" else ""
        return text_result(f"Replaced the source of {kind} cell {cell_index}.{how}{_saved(entry)}")

    @server.tool(structured_output=False)
    @tool_errors
    async def execute_cell(
        ctx: Context, session_id: SessionId, cell_index: CellIndex, timeout_seconds: Timeout = None
    ) -> types.CallToolResult:
        """Run an existing code cell again, as it is (e.g. after open_notebook, or to refresh its
        output). Answers what execute_code answers; the new outputs replace the cell's old ones in
        the notebook, where it is. Refused while another cell runs."""
        entry = await _entry(reg, session_id)
        session = entry.session
        cell = _read(session, cell_index)
        if cell.get("cell_type") != "code":
            raise ToolFailure(
                f"Cell {cell_index} is a {cell.get('cell_type')} cell: only code cells run. "
                "overwrite_cell_source changes its text."
            )
        return await _run(reg, entry, ctx, cell_index, as_text(cell.get("source", "")), timeout_seconds)

    @server.tool(structured_output=False)
    @tool_errors
    async def clear_outputs(
        session_id: SessionId,
        cell_index: Annotated[
            int | None,
            BeforeValidator(_integer),
            Field(description="The code cell whose outputs to clear. Omit to clear every cell's."),
        ] = None,
    ) -> types.CallToolResult:
        """Clear the recorded outputs (and execution counts) of one code cell, or of every cell of
        the session's notebook. Sources and the kernel's variables stay. Refused while a cell runs."""
        entry = await _entry(reg, session_id)
        session = entry.session
        await in_thread(lambda: _edit(entry, lambda: session.clear_outputs(cell_index)))
        what = "every cell" if cell_index is None else f"cell {cell_index}"
        return text_result(f"Cleared the outputs of {what} of {session.notebook_path}.{_saved(entry)}")

    @server.tool(structured_output=False)
    @tool_errors
    async def list_notebooks(
        session_id: SessionId,
        directory: Annotated[
            str, Field(description="A folder on the Jupyter server to list (default: all of it).")
        ] = "",
    ) -> types.CallToolResult:
        """List the notebook (.ipynb) files on the session's Jupyter server (paths relative to its
        root; four folders deep at most), saying which one is this session's and which are open in
        other sessions. open_notebook opens one to continue it."""
        entry = await _entry(reg, session_id)
        session = entry.session
        client = session.client

        def listing() -> tuple[list[dict[str, Any]], dict[str, str]]:
            found = client.list_notebooks(directory)
            owners = {str(s.get("path")): str(s.get("id")) for s in client.sessions()}
            return found, owners

        found, owners = await in_thread(listing)
        if not found:
            return text_result(f"No notebooks in {directory or 'the server root'!r}.")
        lines = []
        for item in found:
            path = str(item["path"])
            line = f"{path}  (modified {str(item.get('last_modified') or '?')[:19]})"
            owner = owners.get(path)
            if path == session.notebook_path:
                line += "  <- this session's notebook"
            elif owner:
                line += f"  <- open in session {owner}"
            lines.append(line)
        return text_result("\n".join(lines))

    @server.tool(structured_output=False)
    @tool_errors
    async def open_notebook(
        ctx: Context,
        session_id: SessionId,
        path: Annotated[
            str,
            Field(
                description="The notebook: a path on the Jupyter server relative to its root, as "
                "list_notebooks shows it (e.g. 'notebooks/old.ipynb'), or an ABSOLUTE path of a "
                ".ipynb file on this machine (e.g. a notebook saved from an earlier sandbox), which is "
                "copied into the sandbox's notebooks/ folder first."
            ),
        ],
        new_session: Annotated[
            bool,
            Field(
                description="false (default): the session switches to this notebook, its kernel and "
                "variables kept. true: start a new session for it on the same server, with a fresh "
                "kernel and the sandbox's models loaded."
            ),
        ] = False,
    ) -> types.CallToolResult:
        """Open an existing notebook to continue it: its cells (with their recorded outputs) become
        the session's notebook, and the cells you run or add from now on go into it. The kernel has
        not run the opened cells: execute_cell re-runs the ones whose variables you need. The
        session's previous notebook stays as it was. Answers the session id and what the notebook
        holds; read_notebook shows its cells."""
        entry = await _entry(reg, session_id)
        session = entry.session
        client = session.client
        local = os.path.isabs(os.path.expanduser(path))

        def prepare() -> tuple[str, dict[str, Any] | None]:
            """(target path on the server, the notebook to write there, if it comes from here)"""
            if not local:
                try:
                    return check_notebook_path(path), None
                except NotebookError as exc:
                    raise ToolFailure(
                        f"{exc}. A file on this machine needs an absolute path; list_notebooks lists the "
                        "server's."
                    ) from exc
            source = Path(os.path.expanduser(path))
            if source.suffix != ".ipynb":
                raise ToolFailure(f"{path!r} is not a .ipynb file.")
            notebook = _local_notebook(source)
            try:
                notebook_cells(notebook, where=path)
            except NotebookError as exc:
                raise ToolFailure(f"{exc}.") from exc
            from seer.execution import NOTEBOOK_DIR
            from seer.notebook import unique_notebook_path

            return unique_notebook_path(client, NOTEBOOK_DIR, source.stem)[0], notebook

        def switch() -> str:
            target, notebook = prepare()
            if entry.writer is not None:  # what is pending belongs to the notebook so far
                entry.writer.flush()
            try:
                session.open(target, notebook=notebook)
            except KernelDiedError:
                raise
            except NotebookError as exc:
                raise ToolFailure(f"{exc}. list_notebooks lists the server's notebooks.") from exc
            return target

        def start() -> tuple[Entry, str]:
            from seer.execution import open_notebook_session

            target, notebook = prepare()
            if notebook is None:
                owner = client.notebook_session(target)
                if owner is not None:
                    raise ToolFailure(
                        f"{target!r} is the notebook of session {owner}: continue it there "
                        f"(attach_to_session(session_id={owner!r}) if this server does not know it), or "
                        "open it with new_session=false in that session."
                    )
                try:
                    notebook = client.read_notebook(target)
                except NotebookError as exc:
                    raise ToolFailure(f"{exc}. list_notebooks lists the server's notebooks.") from exc
            cells, metadata = notebook_cells(notebook, where=path)
            name = posixpath.splitext(posixpath.basename(target))[0]
            mirror = session.local_path.with_name(f"{name}.ipynb") if session.local_path else None
            new = open_notebook_session(
                client,
                client.start_kernel(),
                target,
                name,
                sandbox=session.sandbox,
                mirror_path=mirror,
                cells=cells,
                metadata=metadata,
            )
            return reg.adopt(new), target

        if new_session:
            new_entry, target = await in_thread(start, ctx, "starting a kernel")
            opened = new_entry.session
            how = f"Started session {opened.session_id} (a fresh kernel) on notebook {target}"
            extra = f"\n\n{opened.model_info_text}"
        else:
            target = await in_thread(lambda: _edit(entry, switch))
            opened = session
            how = f"Session {session.session_id} now records in notebook {target}"
            extra = ""
        cells = opened.cells
        code = sum(1 for c in cells if c.get("cell_type") == "code")
        copied = f" (copied from {path} on this machine)" if local else ""
        return text_result(
            f"{how}{copied}: {len(cells)} cells ({code} code, {len(cells) - code} other), with their "
            "recorded outputs. The kernel has not run them: execute_cell(session_id="
            f"{opened.session_id!r}, cell_index=N) re-runs one; read_notebook(session_id="
            f"{opened.session_id!r}) shows them. New cells are added to this notebook.{extra}"
        )
