"""Turning what cells produced into MCP content (text, merged and clipped; images; tracebacks
without ANSI), progress messages, and the server's instructions to the agent."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import mcp.types as types
from seer.errors import (
    CellTimeoutError,
    JupyterServerDiedError,
    KernelDiedError,
)
from seer.notebook import (
    NotebookSession,
    strip_ansi,
)

from seer_mcp.cells import Cell, Entry
from seer_mcp.failures import redact, server_died_text

if TYPE_CHECKING:
    from seer_mcp.registry import SessionRegistry


#: Characters of a cell's outputs ``read_notebook`` shows (``read_cell`` shows them all).
OUTPUT_PREVIEW = 400
#: Longest text block a result carries; longer output keeps its head and tail.
MAX_TEXT = 40_000

#: How many of a running cell's latest output lines a progress notification carries.
PROGRESS_LINES = 5

#: ... and at most this many characters of them.
PROGRESS_CHARS = 1000

INSTRUCTIONS = """\
Drive Jupyter notebook sessions in seer sandboxes. Every cell you run is recorded in the session's
notebook.

For GPU work with models: write a setup script that starts a sandbox and creates a notebook session,
run it, and pass the session_id and jupyter_url it prints as JSON to attach_to_session. Then use
execute_code, add_markdown and edit_cell. Models the sandbox loaded are already in the kernel (see
the text attach_to_session returns): do not load them again.

start_new_session starts a LOCAL kernel on this machine, with no GPU and no models: use it only for
quick scratch work, never for GPU sandboxes.
"""

#: The instructions of a server whose configuration names a session (``session.mcp_config``).
CONFIGURED_INSTRUCTIONS = """\
Drive a Jupyter notebook session in a seer sandbox. Every cell you run is recorded in the session's
notebook.

This server is set up for session {session_id} (notebook {notebook}{sandbox}): execute_code,
add_markdown, edit_cell and the other tools use it when you leave session_id out; there is nothing
to set up and no need to call attach_to_session. Variables persist between cells.

{models}

A call without session_id goes to the session you last attached or started (attach_to_session,
start_new_session), else to this one. start_new_session starts a LOCAL kernel on this machine, with no
GPU and no models: use it only for quick scratch work.
"""


def instructions(registry: SessionRegistry) -> str:
    """What the server tells the agent at the start: the configured session and its models, or,
    with none configured, how to get a session."""
    if not (registry.default_session_id and registry.default_url):
        return INSTRUCTIONS
    models = registry.models_text or (
        "No models are pre-loaded in its kernel (attach_to_session's answer lists them if the "
        "configuration did not)."
    )
    return CONFIGURED_INSTRUCTIONS.format(
        session_id=registry.default_session_id,
        notebook=registry.notebook_path or "(named when attached)",
        sandbox=f", sandbox {registry.sandbox_id}" if registry.sandbox_id else "",
        models=models.strip() + "\nThese are already in the kernel: do not load them again.",
    )


def output_tail(outputs: Sequence[dict[str, Any]]) -> str:
    """The last lines a running cell printed (what a terminal would show: a line rewritten with
    ``\r``, as progress bars do, shows its last version), for a progress notification."""
    text = "".join(as_text(o.get("text", "")) for o in outputs if o.get("output_type") == "stream")
    lines = [strip_ansi(line.rsplit("\r", 1)[-1]) for line in text.replace("\r\n", "\n").split("\n")]
    tail = "\n".join(line for line in lines if line.strip())
    kept = "\n".join(tail.splitlines()[-PROGRESS_LINES:])
    return kept[-PROGRESS_CHARS:]


def progress_message(cell: Cell, session: NotebookSession | None) -> str:
    message = f"cell running for {cell.elapsed:.0f}s"
    tail = output_tail(session.partial_outputs()) if session is not None else ""
    return f"{message}; latest output:\n{tail}" if tail else message


# --- turning outputs into MCP content -------------------------------------------------------


def clip(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    half = MAX_TEXT // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n\n... [{cut} characters cut] ...\n\n{text[-half:]}"


def as_text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def output_content(outputs: Sequence[dict[str, Any]]) -> list[types.ContentBlock]:
    """nbformat outputs as MCP content: text (merged), images, tracebacks (no ANSI)."""
    blocks: list[types.ContentBlock] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            joined = "\n".join(t.rstrip("\n") for t in texts)
            blocks.append(types.TextContent(type="text", text=clip(joined)))
            texts.clear()

    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            texts.append(as_text(out.get("text", "")))
        elif kind in ("display_data", "execute_result"):
            data = out.get("data", {})
            image = next(
                (m for m in ("image/png", "image/jpeg", "image/gif", "image/webp") if m in data), None
            )
            if image is not None:
                flush()
                payload = as_text(data[image]).replace("\n", "")
                blocks.append(types.ImageContent(type="image", data=payload, mime_type=image))
                continue
            for mime in ("text/markdown", "text/plain", "text/html"):
                if mime in data:
                    texts.append(as_text(data[mime]))
                    break
            else:
                if "application/json" in data:
                    texts.append(json.dumps(data["application/json"], indent=1))
        elif kind == "error":
            raw = out.get("traceback") or []
            text = strip_ansi("\n".join(raw)) if raw else f"{out.get('ename', '')}: {out.get('evalue', '')}"
            texts.append(text)
    flush()
    return blocks


def cell_result(cell: Cell, entry: Entry) -> types.CallToolResult:
    session = entry.session
    result = cell.result
    cell.collected = True
    blocks = output_content(result.outputs if result is not None else [])
    is_error = result is not None and result.error is not None
    failure = cell.failure
    if isinstance(failure, JupyterServerDiedError):
        is_error = True
        blocks.append(types.TextContent(type="text", text=server_died_text(session)))
    elif isinstance(failure, KernelDiedError):
        is_error = True
        why = str(failure).split(";")[0]
        blocks.append(
            types.TextContent(
                type="text",
                text=f"{why[:1].upper()}{why[1:]}: the kernel's variables are gone. Call "
                f"restart_session(session_id={session.session_id!r}) to start it again (the sandbox's models "
                "are loaded again), then re-run what you need.",
            )
        )
    elif isinstance(failure, CellTimeoutError):
        is_error = True
        text = str(failure).replace("session.restart() resets it", "restart_session resets it")
        blocks.append(types.TextContent(type="text", text=f"{text[:1].upper()}{text[1:]}."))
    elif failure is not None:
        is_error = True
        message = str(failure) or type(failure).__name__
        blocks.append(types.TextContent(type="text", text=redact(f"the cell could not run: {message}")))
    if not blocks:
        blocks.append(types.TextContent(type="text", text="(no output)"))
    where = f"cell {cell.index}" if cell.index is not None else "not recorded"
    count = result.execution_count if result is not None else None
    status = f"[{where}" + (f", In [{count}]" if count is not None else "") + f", {cell.elapsed:.2f}s]"
    blocks.append(types.TextContent(type="text", text=status))
    if cell.note:
        blocks.insert(0, types.TextContent(type="text", text=cell.note))
    writer = entry.writer
    if writer is not None and writer.error:
        blocks.append(
            types.TextContent(type="text", text=f"Warning: the notebook could not be saved: {writer.error}")
        )
    return types.CallToolResult(content=blocks, is_error=is_error)


def text_result(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def still_running(session: NotebookSession, cell: Cell) -> types.CallToolResult:
    """A running cell's state, and its output so far."""
    sid = session.session_id
    so_far = output_content(session.partial_outputs())
    blocks: list[types.ContentBlock] = [
        types.TextContent(
            type="text",
            text=f"The cell is still running ({cell.elapsed:.0f}s so far)"
            + ("; its output so far:" if so_far else "; no output yet."),
        ),
        *so_far,
        types.TextContent(
            type="text",
            text=f"Call get_cell_result(session_id={sid!r}) to keep waiting for its output, or "
            f"interrupt_session(session_id={sid!r}) to stop it.",
        ),
    ]
    return types.CallToolResult(content=blocks, is_error=False)


def cell_heading(index: int, cell: dict[str, Any]) -> str:
    """The line above cell ``index`` in ``read_notebook`` and ``read_cell``: its kind and count."""
    kind = cell.get("cell_type", "?")
    count = cell.get("execution_count")
    if kind != "code":
        return f"--- cell {index}: {kind} ---"
    return f"--- cell {index}: code, " + (f"In [{count}]" if count else "not run") + " ---"


def outputs_preview(index: int, outputs: list[dict[str, Any]]) -> str:
    """A cell's outputs in short: text cut at :data:`OUTPUT_PREVIEW`, errors as their last line,
    then the images and other media it displayed, named."""
    parts: list[str] = []
    media: list[str] = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            parts.append(as_text(out.get("text", "")))
        elif kind == "error":
            parts.append(f"{out.get('ename', '')}: {out.get('evalue', '')}")
        elif kind in ("display_data", "execute_result"):
            data = out.get("data", {})
            image = next((m for m in data if m.startswith("image/")), None)
            if image is not None:
                media.append(image)
            elif "text/plain" in data:
                parts.append(as_text(data["text/plain"]))
            elif data:
                media.append(next(iter(data)))
    text = "\n".join(p.rstrip("\n") for p in parts if p)
    if len(text) > OUTPUT_PREVIEW:
        more = len(text) - OUTPUT_PREVIEW
        text = f"{text[:OUTPUT_PREVIEW]} ... [{more} more characters: read_cell(cell_index={index})]"
    if media:
        text += ("\n" if text else "") + f"[displayed: {', '.join(media)}; read_cell shows them]"
    return text
