"""What the notebook MCP server answers when a call cannot be done: :class:`ToolFailure` (its
message reaches the agent as an error result) and the texts and checks that build it: a busy or
dead session, a cell index out of range, a Jupyter URL that does not answer, code too big."""

from __future__ import annotations

import math
import re
import urllib.parse
from typing import TYPE_CHECKING

from seer.errors import (
    NotebookError,
)
from seer.notebook import (
    JupyterClient,
    NotebookSession,
)

if TYPE_CHECKING:
    from seer_mcp.cells import Cell

#: Timeout of the first request to a Jupyter server ``attach_to_session`` is given.
PROBE_TIMEOUT = 15.0

#: The most characters of code one cell may have: the kernel's websocket takes at most 10 MiB a
#: message, and a cell that big is data that belongs in a file.
MAX_CODE = 1_000_000

_TOKEN = re.compile(r"([?&]token=)[^&\s'\"]+")


def redact(text: str) -> str:
    """``text`` with every ``token=`` value in a URL hidden."""
    return _TOKEN.sub(r"\1***", text)


class ToolFailure(Exception):
    """A tool call that cannot be done; its message reaches the agent as an error result."""


def busy_text(session_id: str, cell: Cell) -> str:
    first = cell.code.strip().splitlines()[0][:80] if cell.code.strip() else ""
    return (
        f"Session {session_id!r} is still running a cell (for {cell.elapsed:.0f}s so far: {first!r}). "
        f"Call get_cell_result(session_id={session_id!r}) to wait for its output, or "
        f"interrupt_session(session_id={session_id!r}) to stop it."
    )


def server_died_text(session: NotebookSession) -> str:
    sid = session.session_id
    return (
        f"The Jupyter server of session {sid!r} died (nothing answers at {session.client.url}) and its "
        "kernel died with it: the kernel's variables are gone; the notebook is kept. Call "
        f"restart_session(session_id={sid!r}): it starts the Jupyter server again, then a new kernel "
        "with the sandbox's models loaded."
    )


def dead_text(session: NotebookSession) -> str:
    if session.server_died:
        return server_died_text(session)
    return (
        f"The kernel of session {session.session_id!r} is dead (or the session was shut down). Call "
        f"restart_session(session_id={session.session_id!r}) to start it again; its variables are lost."
    )


def check_index(session: NotebookSession, index: int) -> None:
    count = len(session.cells)
    if not 0 <= index < count:
        raise ToolFailure(
            f"cell_index {index} is out of range: the notebook of session {session.session_id!r} has "
            f"{count} cells (0 to {count - 1}). Results name each cell's index as '[cell N, ...]'."
            if count
            else f"cell_index {index} is out of range: session {session.session_id!r} has an empty notebook."
        )


def server_sessions(client: JupyterClient) -> str:
    try:
        sessions = client.sessions()
    except (NotebookError, OSError):
        return ""
    if not sessions:
        return "It has no sessions."
    listed = ", ".join(f"{s.get('id')} ({s.get('path')})" for s in sessions[:20])
    return f"Its sessions: {listed}."


def probe(url: str) -> JupyterClient:
    """A client for ``url`` whose server answered with the token; else an actionable failure."""
    shown = redact(url)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolFailure(
            f"jupyter_url {shown!r} is not an http(s) URL. Pass the jupyter_url exactly as your setup script "
            "printed it, e.g. 'http://127.0.0.1:8888/?token=...'."
        )
    try:
        client = JupyterClient.from_url(url)
    except NotebookError as exc:
        raise ToolFailure(
            f"jupyter_url {shown!r} carries no ?token=: pass it exactly as your setup script printed it "
            "(session.jupyter_url), token included."
        ) from exc
    client.timeout = PROBE_TIMEOUT
    try:
        status, _ = client.request("GET", "/api/status", timeout=PROBE_TIMEOUT)
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ToolFailure(
            f"Nothing answers at {client.url} ({reason}). Is the sandbox still running? `seer ls` lists "
            "running sandboxes; a sandbox lives until its timeout or `seer down`. If it ended, run the "
            "setup script again and attach with the JSON it prints. If `seer ls` shows it running, its "
            "Jupyter server died: attach_to_session(sandbox_id=...) starts the server again and a new "
            "session with the models."
        ) from exc
    finally:
        client.timeout = 60.0
    if status in (401, 403):
        raise ToolFailure(
            f"The Jupyter server at {client.url} refused the token in jupyter_url (HTTP {status}). Pass the "
            "jupyter_url exactly as your setup script printed it: its token changes with every sandbox."
        )
    if status != 200:
        raise ToolFailure(
            f"{client.url} answered HTTP {status} to GET /api/status: is jupyter_url the URL of the "
            "sandbox's Jupyter server?"
        )
    return client


def check_timeout(value: float | None) -> float | None:
    """A cell timeout from a tool call: None (no limit) or a positive, finite number of seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ToolFailure(
            f"timeout_seconds must be a positive number of seconds (got {value!r}); leave it out for "
            "no limit."
        )
    return float(value)
