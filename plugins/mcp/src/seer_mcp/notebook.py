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
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import os
import queue
import re
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec

import anyio
import anyio.to_thread
import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field
from seer.errors import (
    CellTimeoutError,
    JupyterServerDiedError,
    KernelDiedError,
    NotebookError,
    SeerError,
)
from seer.notebook import (
    NO_MODELS_TEXT,
    CellResult,
    JupyterClient,
    NotebookSession,
    strip_ansi,
    write_notebook,
)

from seer_mcp._progress import with_progress
from seer_mcp.mcpserver import SeerMCPServer

if TYPE_CHECKING:
    from seer.sandbox import Sandbox

__all__ = [
    "PROGRESS_INTERVAL",
    "SessionRegistry",
    "ToolFailure",
    "build_server",
    "main",
]

#: Seconds between progress notifications while a cell (or a slow tool) runs.
PROGRESS_INTERVAL = float(os.environ.get("SEER_MCP_PROGRESS_INTERVAL") or 1.0)
#: Longest text block a result carries; longer output keeps its head and tail.
MAX_TEXT = 40_000
#: How long ``get_cell_result`` waits for a running cell by default.
DEFAULT_WAIT = 60.0
#: How long ``interrupt_session`` waits for the interrupted cell to end.
INTERRUPT_WAIT = 10.0
#: Timeout of the first request to a Jupyter server ``attach_to_session`` is given.
PROBE_TIMEOUT = 15.0
#: A notebook save waits this long for the next one before it is written (see _NotebookWriter).
WRITE_DELAY = 0.25
#: Lifetime of a sandbox ``start_new_session`` starts (it ends earlier with its session or server).
LOCAL_SANDBOX_TIMEOUT = 4 * 3600
#: The most characters of code one cell may have: the kernel's websocket takes at most 10 MiB a
#: message, and a cell that big is data that belongs in a file.
MAX_CODE = 1_000_000
#: How many of a running cell's latest output lines a progress notification carries.
PROGRESS_LINES = 5
#: ... and at most this many characters of them.
PROGRESS_CHARS = 1000

_TOKEN = re.compile(r"([?&]token=)[^&\s'\"]+")

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


def _redact(text: str) -> str:
    """``text`` with every ``token=`` value in a URL hidden."""
    return _TOKEN.sub(r"\1***", text)


class ToolFailure(Exception):
    """A tool call that cannot be done; its message reaches the agent as an error result."""


# --- cells ----------------------------------------------------------------------------------


@dataclass
class _Cell:
    """One cell run through this server, and what it produced (filled in by the thread running it)."""

    code: str
    #: edit_cell: the notebook index the re-run cell replaces
    replace: int | None = None
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    result: CellResult | None = None
    failure: BaseException | None = None
    #: the cell's index in the notebook once recorded
    index: int | None = None
    #: True once the call that started it gave up before it finished
    detached: bool = False
    #: True once a tool result carried its output
    collected: bool = False
    #: a line to put before its output (about an earlier cell)
    note: str = ""
    #: a cell an earlier server started, which this one waits for (see SessionRegistry.attach)
    adopted: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    _watchers: list[Callable[[], None]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    def watch(self, callback: Callable[[], None]) -> bool:
        """Call ``callback`` (from the cell's thread) when the cell finishes; False if it already has."""
        with self._lock:
            if self.done.is_set():
                return False
            self._watchers.append(callback)
            return True

    def unwatch(self, callback: Callable[[], None]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._watchers.remove(callback)

    def finish(self) -> None:
        with self._lock:
            self.finished = time.monotonic()
            self.done.set()
            watchers, self._watchers = self._watchers, []
        for callback in watchers:
            with contextlib.suppress(Exception):
                callback()


class _Runner:
    """One daemon thread that runs a session's cells, one after the other (a cell outlives the tool
    call that started it; the thread is reused, not started per cell)."""

    def __init__(self, name: str):
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        self._queue.put(job)

    def stop(self) -> None:
        self._queue.put(None)

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            job()


class _NotebookWriter:
    """Writes a session's notebook from a thread of its own, so that no tool result waits for it.

    A NotebookSession rewrites its notebook (in the sandbox, or through the Jupyter contents API,
    and its local mirror) after every cell, on the caller's thread; through the contents API that
    costs more than running ``1+1``. The writer is installed as the session's
    :attr:`~seer.notebook.NotebookSession.writer`: the notebook is still rendered at once (under
    the session's lock, where the session saves), but written by the writer's thread with seer's
    own :func:`~seer.notebook.write_notebook`, one write at a time, :data:`WRITE_DELAY` after the
    save that asked for it; a save meanwhile replaces it (the newer one holds everything), so a
    burst of cells is written once. ``flush()`` writes what is pending now and waits for it.
    """

    def __init__(self, session: NotebookSession):
        self.session = session
        #: why the last write failed (None once one succeeds)
        self.error: str | None = None
        self._text: str | None = None
        self._writing = False
        self._stopped = False
        self._urgent = 0
        self._cond = threading.Condition()
        self._thread = threading.Thread(
            target=self._loop, name=f"seer-mcp-save-{session.session_id[:8]}", daemon=True
        )
        self._thread.start()
        session.writer = self.save

    def save(self, session: NotebookSession, text: str) -> None:
        """The session's writer: keep ``text`` (the rendered notebook) for the thread to write."""
        with self._cond:
            self._text = text
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._text is None and not self._stopped:
                    self._cond.wait()
                if self._text is None:
                    return
                deadline = time.monotonic() + WRITE_DELAY
                while not (self._urgent or self._stopped):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                text, self._text = self._text, None
                self._writing = True
            try:
                write_notebook(self.session, text)
                self.error = None
            except Exception as exc:
                self.error = _redact(f"{type(exc).__name__}: {exc}")
            finally:
                with self._cond:
                    self._writing = False
                    self._cond.notify_all()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every save so far is written; False if that took longer than ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._urgent += 1
            self._cond.notify_all()
            try:
                while self._text is not None or self._writing:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self._thread.is_alive():
                        return False
                    self._cond.wait(remaining)
            finally:
                self._urgent -= 1
        return True

    def close(self, timeout: float = 30.0) -> None:
        """Write what is pending, stop the thread, and give the session seer's own writer back."""
        self.flush(timeout)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout=5)
        self.session.writer = write_notebook


@dataclass
class _Entry:
    """A session this server knows."""

    session: NotebookSession
    #: "attached" (an existing session), "created" (a new session on a server) or "local"
    origin: str
    #: the sandbox this server started for the session (start_new_session); terminated with it
    sandbox: Sandbox | None = None
    #: the latest cell run through this server
    cell: _Cell | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    writer: _NotebookWriter | None = None
    runner: _Runner | None = None

    @property
    def busy(self) -> bool:
        return self.cell is not None and not self.cell.done.is_set()

    def state(self) -> str:
        cell = self.cell
        if cell is not None and not cell.done.is_set():
            return f"running a cell for {cell.elapsed:.0f}s"
        if not self.session.alive:
            return "kernel dead (restart_session starts it again)"
        return "idle"


def _server_url(session: NotebookSession) -> str:
    return session.client.url


def _describe(entry: _Entry) -> dict[str, Any]:
    session = entry.session
    return {
        "session_id": session.session_id,
        "notebook": session.notebook_path,
        "server": _server_url(session),
        "kind": "local kernel (no GPU)" if entry.origin == "local" else "sandbox",
        "state": entry.state(),
        "cells": len(session.cells),
        **({"notebook_error": entry.writer.error} if entry.writer is not None and entry.writer.error else {}),
    }


def _run_cell(entry: _Entry, cell: _Cell, timeout: float | None) -> None:
    """(The cell's thread.) Run it; keep whatever it produced, or why it failed."""
    session = entry.session
    try:
        before = len(session.cells)
        try:
            if cell.replace is None:
                cell.result = session.exec(cell.code, timeout=timeout)
            else:
                cell.result = session.run_cell(cell.replace, source=cell.code, timeout=timeout)
        finally:
            if cell.replace is not None:
                cell.index = cell.replace
            elif len(session.cells) > before:
                cell.index = len(session.cells) - 1
    except (CellTimeoutError, KernelDiedError) as exc:
        cell.failure = exc
        cell.result = exc.result if isinstance(exc.result, CellResult) else None
    except BaseException as exc:
        cell.failure = exc
    finally:
        cell.finish()


def _adopt(entry: _Entry, cell: _Cell, on_synced: Callable[[], None]) -> None:
    """(The cell's thread.) Wait for the cell an earlier server left running in the kernel; its
    outputs are recorded in its notebook cell (NotebookSession.sync)."""
    session = entry.session
    try:
        recovered = session.sync()
        cell.result = recovered[-1] if recovered else None
        if cell.result is not None:
            cell.index = _index_of(session, cell.result)
    except (CellTimeoutError, KernelDiedError) as exc:
        cell.failure = exc
    except BaseException as exc:
        cell.failure = exc
    finally:
        with contextlib.suppress(Exception):
            on_synced()
        cell.finish()


def _index_of(session: NotebookSession, result: CellResult) -> int | None:
    """The notebook index of the latest code cell holding ``result``'s code and count."""
    for i in range(len(session.cells) - 1, -1, -1):
        cell = session.cells[i]
        if cell.get("cell_type") == "code" and cell.get("execution_count") == result.execution_count:
            return i
    return None


def _output_tail(outputs: Sequence[dict[str, Any]]) -> str:
    """The last lines a running cell printed (what a terminal would show: a line rewritten with
    ``\r``, as progress bars do, shows its last version), for a progress notification."""
    text = "".join(_as_text(o.get("text", "")) for o in outputs if o.get("output_type") == "stream")
    lines = [strip_ansi(line.rsplit("\r", 1)[-1]) for line in text.replace("\r\n", "\n").split("\n")]
    tail = "\n".join(line for line in lines if line.strip())
    kept = "\n".join(tail.splitlines()[-PROGRESS_LINES:])
    return kept[-PROGRESS_CHARS:]


def _progress_message(cell: _Cell, session: NotebookSession | None) -> str:
    message = f"cell running for {cell.elapsed:.0f}s"
    tail = _output_tail(session.partial_outputs()) if session is not None else ""
    return f"{message}; latest output:\n{tail}" if tail else message


# --- turning outputs into MCP content -------------------------------------------------------


def _clip(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    half = MAX_TEXT // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n\n... [{cut} characters cut] ...\n\n{text[-half:]}"


def _as_text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _output_content(outputs: Sequence[dict[str, Any]]) -> list[types.ContentBlock]:
    """nbformat outputs as MCP content: text (merged), images, tracebacks (no ANSI)."""
    blocks: list[types.ContentBlock] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            joined = "\n".join(t.rstrip("\n") for t in texts)
            blocks.append(types.TextContent(type="text", text=_clip(joined)))
            texts.clear()

    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            texts.append(_as_text(out.get("text", "")))
        elif kind in ("display_data", "execute_result"):
            data = out.get("data", {})
            image = next(
                (m for m in ("image/png", "image/jpeg", "image/gif", "image/webp") if m in data), None
            )
            if image is not None:
                flush()
                payload = _as_text(data[image]).replace("\n", "")
                blocks.append(types.ImageContent(type="image", data=payload, mime_type=image))
                continue
            for mime in ("text/markdown", "text/plain", "text/html"):
                if mime in data:
                    texts.append(_as_text(data[mime]))
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


def _cell_result(cell: _Cell, entry: _Entry) -> types.CallToolResult:
    session = entry.session
    result = cell.result
    cell.collected = True
    blocks = _output_content(result.outputs if result is not None else [])
    is_error = result is not None and result.error is not None
    failure = cell.failure
    if isinstance(failure, JupyterServerDiedError):
        is_error = True
        blocks.append(types.TextContent(type="text", text=_server_died(session)))
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
        blocks.append(types.TextContent(type="text", text=_redact(f"the cell could not run: {message}")))
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


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


# --- the sessions this server knows ---------------------------------------------------------


class SessionRegistry:
    """The sessions one server drives, by id. Thread-safe; every method may block (HTTP)."""

    def __init__(
        self,
        *,
        default_session_id: str | None = None,
        default_url: str | None = None,
        outputs_dir: str | None = None,
        sandbox_id: str | None = None,
        notebook_path: str | None = None,
        models_text: str | None = None,
    ):
        self.default_session_id = default_session_id or None
        self.default_url = default_url or None
        self.outputs_dir = outputs_dir or None
        #: the default session's sandbox and notebook: how to find the session again after its
        #: Jupyter server was started again (the configured id and URL are stale then)
        self.sandbox_id = sandbox_id or None
        self.notebook_path = notebook_path or None
        #: the default session's models, as the config describes them (for the instructions)
        self.models_text = models_text or None
        #: the session the agent last attached or started: where a call without session_id goes
        self.current: str | None = None
        self._entries: dict[str, _Entry] = {}
        #: attaching (or starting) a session happens once at a time: parallel first calls wait
        #: for the one attach, then find its session
        self._attach_lock = threading.RLock()
        #: old session id -> new, for sessions that got a new id (their Jupyter server was restarted)
        self._aliases: dict[str, str] = {}
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> SessionRegistry:
        env = os.environ if environ is None else environ
        return cls(
            default_session_id=env.get("SEER_SESSION_ID"),
            default_url=env.get("SEER_JUPYTER_URL") or env.get("SEER_URL"),
            outputs_dir=env.get("SEER_OUTPUTS_DIR"),
            sandbox_id=env.get("SEER_SANDBOX_ID"),
            notebook_path=env.get("SEER_NOTEBOOK_PATH"),
            models_text=env.get("SEER_SESSION_MODELS"),
        )

    # --- finding sessions --------------------------------------------------------------------
    def entries(self) -> list[_Entry]:
        with self._lock:
            return list(self._entries.values())

    def known(self) -> str:
        """The sessions this server knows, for an error message."""
        entries = self.entries()
        pending = self._pending_default()
        if not entries and not pending:
            return (
                "No session is attached yet: call attach_to_session(session_id, jupyter_url) with the JSON "
                "your setup script printed (or start_new_session() for a local scratch kernel, no GPU)."
            )
        lines = [f"- {e.session.session_id} (notebook {e.session.notebook_path})" for e in entries]
        if pending:
            lines.append(f"- {pending} (the default session, attached on first use)")
        return (
            "Known sessions:\n"
            + "\n".join(lines)
            + "\nFor another session, call attach_to_session(session_id, jupyter_url) with the JSON "
            "its setup script printed."
        )

    def _pending_default(self) -> str | None:
        sid = self.default_session_id
        if sid and self.default_url:
            with self._lock:
                if sid not in self._entries:
                    return sid
        return None

    def lookup(self, session_id: str) -> _Entry | None:
        """The entry for ``session_id`` ("" for the only or default one), if it needs no I/O."""
        session_id = (session_id or "").strip()
        with self._lock:
            if self._closed:
                raise ToolFailure("the server is shutting down")
            session_id = self._aliases.get(session_id, session_id)
            if session_id:
                return self._entries.get(session_id)
            if self.current is not None:  # the agent's choice (None once it shut that session down)
                return self._entries.get(self.current)
            if self.default_session_id and self.default_session_id in self._entries:
                return self._entries[self.default_session_id]
            if len(self._entries) == 1 and not self._pending_default_locked():
                return next(iter(self._entries.values()))
        return None

    def _make_current(self, entry: _Entry) -> _Entry:
        with self._lock:
            self.current = entry.session.session_id
        return entry

    def _pending_default_locked(self) -> bool:
        return bool(
            self.default_session_id and self.default_url and self.default_session_id not in self._entries
        )

    def resolve(self, session_id: str) -> _Entry:
        """The entry for ``session_id`` ("": the default or only one), attaching the default session
        configured in the environment on first use."""
        entry = self.lookup(session_id)
        if entry is not None:
            return entry
        with self._attach_lock:  # parallel first calls: one attaches, the others find its session
            entry = self.lookup(session_id)
            if entry is not None:
                return entry
            session_id = (session_id or "").strip()
            default = self.default_session_id
            if not session_id and self.current is not None:
                raise ToolFailure(
                    f"Session {self.current!r}, the one you last attached or started, is shut down: pass "
                    f"session_id. {self.known()}"
                )
            if default and self.default_url and session_id in ("", default):
                return self._attach_default()
            if not session_id:
                count = len(self.entries())
                raise ToolFailure(
                    self.known()
                    if count == 0
                    else f"{count} sessions and none chosen: pass session_id. {self.known()}"
                )
            raise ToolFailure(f"Unknown session_id {session_id!r}. {self.known()}")

    def _attach_default(self) -> _Entry:
        """(Under the attach lock.) The configured default session; when its Jupyter server was
        started again since the config was made (the id or URL is stale), the session on the
        sandbox's current server that holds the configured notebook."""
        default, url = self.default_session_id, self.default_url
        assert default and url
        try:
            return self.attach(default, url)[0]
        except ToolFailure as failure:
            if not (self.sandbox_id and self.notebook_path):
                raise
            found = self._session_on_record(self.notebook_path)
            if found is None:
                raise ToolFailure(
                    f"{failure}\nThe sandbox {self.sandbox_id} has no session for the notebook "
                    f"{self.notebook_path} either: attach_to_session(sandbox_id={self.sandbox_id!r}) "
                    "starts a new one (and the Jupyter server, if it died)."
                ) from failure
        new_id, new_url = found
        entry = self.attach(new_id, new_url)[0]
        with self._lock:
            self._aliases[default] = entry.session.session_id
            self.default_session_id, self.default_url = entry.session.session_id, new_url
        return entry

    def _session_on_record(self, notebook_path: str) -> tuple[str, str] | None:
        """``(session id, jupyter_url)`` of the session for ``notebook_path`` on the Jupyter server
        the sandbox's record names now, if any."""
        from seer import Sandbox

        try:
            url = Sandbox.attach(self.sandbox_id or "").jupyter_url
            if not url:
                return None
            sessions = JupyterClient.from_url(url).sessions()
        except (SeerError, OSError, ValueError):
            return None
        for model in sessions:
            if model.get("path") == notebook_path and model.get("id"):
                return str(model["id"]), url
        return None

    def adopt(self, session: NotebookSession, origin: str = "created") -> _Entry:
        """Drive ``session``, made elsewhere (e.g. by a tool of :mod:`seer_mcp.notebook_tools`); it
        is the current session from now on."""
        return self._make_current(self._add(_Entry(session, origin)))

    def _add(self, entry: _Entry) -> _Entry:
        self._place_copy(entry.session)
        entry.writer = _NotebookWriter(entry.session)
        entry.session.save()  # the client-side copy holds the whole notebook from now on
        with self._lock:
            closed = self._closed
            if not closed:
                self._entries[entry.session.session_id] = entry
        if closed:
            _close_entry(entry, shutdown=entry.origin != "attached")
            raise ToolFailure("the server is shutting down")
        return entry

    # --- getting sessions --------------------------------------------------------------------
    def attach(
        self, session_id: str = "", jupyter_url: str = "", sandbox_id: str = "", name: str = ""
    ) -> tuple[_Entry, str]:
        """Attach to a session (``session_id``), or start a new one on a sandbox's Jupyter server
        (``sandbox_id``, or just ``jupyter_url``); ``(entry, what happened)``. The session is the
        current one from now on: calls without ``session_id`` go to it."""
        with self._attach_lock:
            entry, how = self._attach(session_id, jupyter_url, sandbox_id, name)
        return self._make_current(entry), how

    def _attach(self, session_id: str, jupyter_url: str, sandbox_id: str, name: str) -> tuple[_Entry, str]:
        session_id, jupyter_url, sandbox_id = (
            (session_id or "").strip(),
            (jupyter_url or "").strip(),
            (sandbox_id or "").strip(),
        )
        if sandbox_id:  # an id is never a path: checked before anything looks it up
            from seer.ids import sandbox_id_providers

            sandbox_id_providers(sandbox_id)
        if session_id:
            with self._lock:
                existing = self._entries.get(self._aliases.get(session_id, session_id))
            if existing is not None:
                return existing, "already attached"
        if not session_id and sandbox_id:
            return self._from_sandbox(sandbox_id, name), "started a new session in the sandbox"
        url = jupyter_url or self.default_url or ""
        if not url:
            raise ToolFailure(
                "Pass jupyter_url (with its ?token=): the JSON your setup script printed has it, next to "
                "session_id. `seer up` prints it too (then pass sandbox_id instead of session_id)."
            )
        client = _probe(url)
        if not session_id:
            return self._add(self._create_on(client, name)), "started a new session on the server"
        status, model = client.request("GET", f"/api/sessions/{urllib.parse.quote(session_id)}")
        if status == 404:
            raise ToolFailure(
                f"The Jupyter server at {client.url} has no session {session_id!r}. "
                f"{_server_sessions(client)} Use the session_id your setup script printed "
                "(session.session_id), or leave session_id empty to start a new session on this server."
            )
        if status != 200:
            raise ToolFailure(
                f"GET /api/sessions/{session_id} on {client.url} answered HTTP {status}: {model}"
            )
        try:
            # The same websocket key as any server before this one: the kernel's output while none
            # was connected is replayed to it (a cell a previous server left running).
            session = NotebookSession.attach(client.jupyter_url, session_id, channel=f"seer-mcp-{session_id}")
        except KernelDiedError as exc:
            raise ToolFailure(
                f"Session {session_id!r} exists but its kernel is dead ({exc}). Start a new session "
                "(leave session_id empty) or re-run the setup script."
            ) from exc
        entry = self._add(_Entry(session, "attached"))
        if session.busy_at_attach:
            self._adopt_running(entry)
            return entry, "attached while a cell runs"
        return entry, "attached"

    def _adopt_running(self, entry: _Entry) -> None:
        """The kernel runs a cell started before this server attached: follow it as this server's
        latest cell (get_cell_result waits for it; execute_code says the session is busy)."""
        session = entry.session
        running = next(
            (c for c in reversed(session.cells) if "seer_running" in (c.get("metadata") or {})), None
        )
        code = _as_text(running.get("source", "")) if running is not None else ""
        cell = _Cell(code=code or "(a cell started before this server attached)", adopted=True, detached=True)
        if running is not None:
            cell.index = next(i for i, c in enumerate(session.cells) if c is running)
        with entry.lock:
            entry.cell = cell
            if entry.runner is None:
                entry.runner = _Runner(f"seer-mcp-cells-{session.session_id[:8]}")
            entry.runner.submit(functools.partial(_adopt, entry, cell, lambda: self._refresh_copy(entry)))

    def _refresh_copy(self, entry: _Entry) -> None:
        """(After sync) the sandbox is known now: move the client-side copy where it belongs."""
        before = entry.session.local_path
        self._place_copy(entry.session)
        if entry.session.local_path != before and entry.writer is not None:
            entry.session.save()

    # --- where the research record goes -------------------------------------------------------
    def sandbox_of(self, session: NotebookSession) -> Sandbox | None:
        """The sandbox whose Jupyter server ``session`` is on, if this machine has its record.

        The kernel says which sandbox it is in (``session.sandbox_id``); that sandbox's recorded
        Jupyter server must be the session's, so a kernel cannot point anywhere else.
        """
        if session.sandbox is not None:
            return session.sandbox
        sandbox_id = session.sandbox_id
        if not sandbox_id:
            return None
        from seer import Sandbox

        try:
            sandbox = Sandbox.attach(sandbox_id)
            url = sandbox.jupyter_url
            if not url:
                return None
            theirs = JupyterClient.from_url(url)
        except (SeerError, OSError, ValueError):
            return None
        ours = session.client
        if (theirs.url, theirs.token) != (ours.url, ours.token):
            return None
        return sandbox

    def _place_copy(self, session: NotebookSession) -> None:
        """Give ``session`` its client-side copy: ``<sandbox's record folder>/<name>.ipynb``, or,
        for a sandbox without a record here, ``<SEER_OUTPUTS_DIR or ./seer-outputs>/<server>/``."""
        sandbox = self.sandbox_of(session)
        if sandbox is not None:
            folder = sandbox.outputs_dir
        else:
            from seer.execution import DEFAULT_OUTPUTS_DIR

            parts = urllib.parse.urlsplit(session.client.url)
            server = re.sub(r"[^A-Za-z0-9_-]", "-", f"jupyter-{parts.hostname}-{parts.port or 80}")
            folder = Path(self.outputs_dir or DEFAULT_OUTPUTS_DIR).expanduser().absolute() / server
        if session.local_path is None or session.local_path.parent != folder:
            session.local_path = folder / f"{session.name}.ipynb"

    def _from_sandbox(self, sandbox_id: str, name: str) -> _Entry:
        from seer import Sandbox
        from seer.errors import SandboxNotFoundError
        from seer.execution import create_notebook_session

        try:
            sandbox = Sandbox.attach(sandbox_id)
        except SandboxNotFoundError as exc:
            raise ToolFailure(
                f"{exc}. `seer ls` lists running sandboxes; pass session_id and jupyter_url instead if a "
                "setup script printed them."
            ) from exc
        if not sandbox.jupyter_url:
            raise ToolFailure(
                f"Sandbox {sandbox_id} runs no Jupyter server (its execution_mode is not 'notebook')."
            )
        try:
            JupyterClient.from_url(sandbox.jupyter_url).request("GET", "/api/status", timeout=PROBE_TIMEOUT)
        except OSError:  # the server died: start it again (its kernels died with it)
            from seer.execution import restart_jupyter

            restart_jupyter(sandbox)
        session = create_notebook_session(sandbox, name=name or None)
        return self._add(_Entry(session, "created"))

    def _create_on(self, client: JupyterClient, name: str) -> _Entry:
        """A new session (kernel with the sandbox's models, new notebook) on ``client``'s server.

        Mirrors :func:`seer.execution.create_notebook_session` for a server known only by its URL.
        """
        from seer.execution import NOTEBOOK_DIR, open_notebook_session
        from seer.notebook import unique_notebook_path

        path, name = unique_notebook_path(client, NOTEBOOK_DIR, name or time.strftime("agent-%Y%m%d-%H%M%S"))
        session = open_notebook_session(client, client.start_kernel(), path, name)
        session.sync()  # learns the sandbox it runs in (for the client-side copy)
        return _Entry(session, "created")

    def start_local(self, name: str = "") -> _Entry:
        """A local sandbox (this machine, no GPU, no models) and a notebook session in it."""
        from seer import Sandbox, SandboxConfig
        from seer.execution import create_notebook_session

        sandbox = Sandbox(
            SandboxConfig(provider="local", execution_mode="notebook", timeout=LOCAL_SANDBOX_TIMEOUT)
        ).start()
        try:
            session = create_notebook_session(sandbox, name=name or None)
        except BaseException:
            sandbox.terminate()
            raise
        return self._make_current(self._add(_Entry(session, "local", sandbox=sandbox)))

    # --- running cells -----------------------------------------------------------------------
    def begin(
        self, entry: _Entry, code: str, *, replace: int | None = None, timeout: float | None = None
    ) -> _Cell:
        """Start ``code`` in a thread of its own; refuse while another cell runs, and code over
        :data:`MAX_CODE` characters."""
        session = entry.session
        sid = session.session_id
        if len(code) > MAX_CODE:
            raise ToolFailure(
                f"The code is {len(code):,} characters long; a cell takes at most {MAX_CODE:,}. Nothing ran. "
                "Put big data in a file in the sandbox (write it in smaller pieces, or upload it with your "
                "setup script) and read it from a short cell."
            )
        with entry.lock:
            running = entry.cell
            if running is not None and not running.done.is_set():
                raise ToolFailure(_busy(sid, running))
            if not session.alive:
                raise ToolFailure(_dead(session))
            if replace is not None:
                _check_index(session, replace)
            cell = _Cell(code=code, replace=replace)
            if running is not None and running.detached and not running.collected:
                where = f"cell {running.index}" if running.index is not None else "a cell"
                index = "" if running.index is None else f", cell_index={running.index}"
                cell.note = (
                    f"Note: {where}, whose call was abandoned while it ran, has finished; "
                    f"get_cell_result(session_id={sid!r}{index}) shows its output."
                )
            entry.cell = cell
            if entry.runner is None:
                entry.runner = _Runner(f"seer-mcp-cells-{sid[:8]}")
            entry.runner.submit(functools.partial(_run_cell, entry, cell, timeout))
        return cell

    def add_markdown(self, entry: _Entry, text: str) -> int:
        session = entry.session
        with entry.lock:
            if entry.busy:
                assert entry.cell is not None
                raise ToolFailure(_busy(session.session_id, entry.cell))
            session.add_markdown(text)
            return len(session.cells) - 1

    def edit_markdown(self, entry: _Entry, index: int, text: str) -> None:
        session = entry.session
        with entry.lock:
            if entry.busy:
                assert entry.cell is not None
                raise ToolFailure(_busy(session.session_id, entry.cell))
            session.set_source(index, text)

    def shutdown(self, entry: _Entry) -> None:
        with self._lock:
            self._entries.pop(entry.session.session_id, None)
            for old in [k for k, v in self._aliases.items() if v == entry.session.session_id]:
                del self._aliases[old]
        _close_entry(entry, shutdown=True)

    def restart(self, entry: _Entry) -> str:
        """Restart the session's kernel with the models; if its Jupyter server died, start the
        server again first (the session gets a new id; the old one still names it here). Returns
        what happened, for the agent."""
        session = entry.session
        try:
            session.restart()
            return f"Restarted the kernel of session {session.session_id}."
        except JupyterServerDiedError as exc:
            sandbox = self.sandbox_of(session)
            if sandbox is None:
                raise ToolFailure(
                    f"{exc}. This server cannot tell which sandbox the session ran in, so it cannot start "
                    "the server again: run `seer ls` to find the sandbox, then start a new session with "
                    "attach_to_session(sandbox_id=...) (it starts the Jupyter server again if need be)."
                ) from exc
        from seer.execution import restart_jupyter

        old = session.session_id
        restart_jupyter(sandbox)
        session.reopen(sandbox)
        with self._lock:
            self._entries.pop(old, None)
            self._entries[session.session_id] = entry
            for key, value in list(self._aliases.items()):
                if value == old:
                    self._aliases[key] = session.session_id
            self._aliases[old] = session.session_id
            if self.default_session_id == old:
                self.default_session_id = session.session_id
            if self.current == old:
                self.current = session.session_id
        return (
            f"The Jupyter server had died; started it again in sandbox {sandbox.sandbox_id} "
            f"({_redact(sandbox.jupyter_url or '')}) and a new session {session.session_id} for the same "
            f"notebook (session_id {old!r} still works with this server)."
        )

    def close(self) -> None:
        """(Server exit.) Shut down what this server started; leave attached sessions running."""
        with self._lock:
            self._closed = True
            entries = list(self._entries.values())
            self._entries.clear()
        # In parallel: a client stops a server that has not exited a few seconds after it closed
        # its stdin.
        closers = [
            threading.Thread(target=_close_entry, args=(e,), kwargs={"shutdown": False}, daemon=True)
            for e in entries
        ]
        for closer in closers:
            closer.start()
        deadline = time.monotonic() + 60
        for closer in closers:
            closer.join(timeout=max(0.0, deadline - time.monotonic()))


def _close_entry(entry: _Entry, *, shutdown: bool) -> None:
    """Stop driving ``entry``: its pending notebook write is finished first. ``shutdown`` ends the
    session's kernel; a sandbox this server started is terminated either way (with its kernels)."""
    session = entry.session
    if entry.runner is not None:
        entry.runner.stop()
    if entry.writer is not None:
        if entry.busy:  # a cell still runs: its outputs so far go in the notebook now
            session.save(refresh=True)
        entry.writer.close()
    if shutdown:
        with contextlib.suppress(Exception):
            session.shutdown()
    elif entry.sandbox is None:  # let go of the kernel, leaving it and its session running
        with contextlib.suppress(Exception):
            session.detach()
    if entry.sandbox is not None:
        with contextlib.suppress(Exception):
            entry.sandbox.terminate()


def _busy(session_id: str, cell: _Cell) -> str:
    first = cell.code.strip().splitlines()[0][:80] if cell.code.strip() else ""
    return (
        f"Session {session_id!r} is still running a cell (for {cell.elapsed:.0f}s so far: {first!r}). "
        f"Call get_cell_result(session_id={session_id!r}) to wait for its output, or "
        f"interrupt_session(session_id={session_id!r}) to stop it."
    )


def _server_died(session: NotebookSession) -> str:
    sid = session.session_id
    return (
        f"The Jupyter server of session {sid!r} died (nothing answers at {session.client.url}) and its "
        "kernel died with it: the kernel's variables are gone; the notebook is kept. Call "
        f"restart_session(session_id={sid!r}): it starts the Jupyter server again, then a new kernel "
        "with the sandbox's models loaded."
    )


def _dead(session: NotebookSession) -> str:
    if session.server_died:
        return _server_died(session)
    return (
        f"The kernel of session {session.session_id!r} is dead (or the session was shut down). Call "
        f"restart_session(session_id={session.session_id!r}) to start it again; its variables are lost."
    )


def _check_index(session: NotebookSession, index: int) -> None:
    count = len(session.cells)
    if not 0 <= index < count:
        raise ToolFailure(
            f"cell_index {index} is out of range: the notebook of session {session.session_id!r} has "
            f"{count} cells (0 to {count - 1}). Results name each cell's index as '[cell N, ...]'."
            if count
            else f"cell_index {index} is out of range: session {session.session_id!r} has an empty notebook."
        )


def _server_sessions(client: JupyterClient) -> str:
    try:
        sessions = client.sessions()
    except (NotebookError, OSError):
        return ""
    if not sessions:
        return "It has no sessions."
    listed = ", ".join(f"{s.get('id')} ({s.get('path')})" for s in sessions[:20])
    return f"Its sessions: {listed}."


def _probe(url: str) -> JupyterClient:
    """A client for ``url`` whose server answered with the token; else an actionable failure."""
    shown = _redact(url)
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


# --- the MCP layer --------------------------------------------------------------------------

P = ParamSpec("P")


def _tool(
    fn: Callable[P, Awaitable[types.CallToolResult]],
) -> Callable[P, Awaitable[types.CallToolResult]]:
    """Every failure of a tool becomes an error result saying what went wrong (never a crash, never
    a token)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> types.CallToolResult:
        try:
            return await fn(*args, **kwargs)
        except ToolFailure as exc:
            return _text(_redact(str(exc)), error=True)
        except KernelDiedError as exc:
            why = str(exc).split(";")[0]
            return _text(_redact(f"{why}. Call restart_session to start the kernel again."), error=True)
        except SeerError as exc:
            return _text(_redact(f"{type(exc).__name__}: {exc}"), error=True)
        except Exception as exc:
            return _text(_redact(f"unexpected error: {type(exc).__name__}: {exc}"), error=True)

    return wrapper


async def _with_progress(fn: Callable[[], Any], ctx: Context | None, message: Callable[[float], str]) -> Any:
    """Run blocking ``fn`` in a worker thread; meanwhile send a progress notification every
    :data:`PROGRESS_INTERVAL` seconds (when the client asked for progress). A cancelled call
    abandons the thread, which runs on."""
    return await with_progress(fn, ctx, message, PROGRESS_INTERVAL)


async def _in_thread(fn: Callable[[], Any], ctx: Context | None = None, what: str = "working") -> Any:
    """Run blocking ``fn`` in a worker thread, with progress notifications while it takes long."""
    return await _with_progress(fn, ctx, lambda elapsed: f"{what} ({elapsed:.0f}s)")


async def _follow(
    cell: _Cell, ctx: Context, limit: float | None, session: NotebookSession | None = None
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
                await ctx.report_progress(cell.elapsed, None, _progress_message(cell, session))
    except BaseException:
        if not cell.done.is_set():
            cell.detached = True
        raise
    finally:
        cell.unwatch(wake)


def _still_running(session: NotebookSession, cell: _Cell) -> types.CallToolResult:
    """A running cell's state, and its output so far."""
    sid = session.session_id
    so_far = _output_content(session.partial_outputs())
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


def _check_timeout(value: float | None) -> float | None:
    """A cell timeout from a tool call: None (no limit) or a positive, finite number of seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ToolFailure(
            f"timeout_seconds must be a positive number of seconds (got {value!r}); leave it out for "
            "no limit."
        )
    return float(value)


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


def build_server(registry: SessionRegistry | None = None) -> tuple[MCPServer, SessionRegistry]:
    """The notebook MCP server and the registry of sessions its tools drive."""
    reg = registry if registry is not None else SessionRegistry.from_env()
    server: MCPServer = SeerMCPServer("seer-notebook", instructions=instructions(reg), log_level="WARNING")

    async def entry_for(session_id: str) -> _Entry:
        entry = reg.lookup(session_id)
        if entry is None:
            entry = await _in_thread(lambda: reg.resolve(session_id))
        return entry

    @server.tool(structured_output=False)
    @_tool
    async def start_new_session(
        ctx: Context,
        name: Annotated[str, Field(description="Optional notebook name.")] = "",
    ) -> types.CallToolResult:
        """Start a LOCAL Python kernel on this machine: no GPU, no models. Only for quick scratch work
        (trying out plain Python). DO NOT use it for GPU sandboxes or models: for those, write a setup
        script that starts a seer Sandbox and creates a notebook session, run it, and call
        attach_to_session with the session_id and jupyter_url it prints."""
        entry = await _in_thread(lambda: reg.start_local(name), ctx, "starting a local kernel")
        session = entry.session
        return _text(
            f"Started session {session.session_id}: a local kernel on this machine (no GPU, no models), "
            f"notebook {session.notebook_path}. Pass session_id={session.session_id!r} to execute_code."
        )

    @server.tool(structured_output=False)
    @_tool
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
        entry, how = await _in_thread(
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
            f"{_server_url(session)}. Every cell you run is recorded there"
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
        return _text(text)

    @server.tool(structured_output=False)
    @_tool
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
        timeout = _check_timeout(timeout_seconds)
        entry = await entry_for(session_id)
        cell = reg.begin(entry, code, timeout=timeout)
        await _follow(cell, ctx, None, entry.session)
        return _cell_result(cell, entry)

    @server.tool(structured_output=False)
    @_tool
    async def add_markdown(
        markdown: Annotated[str, Field(description="Markdown text for a new notebook cell.")],
        session_id: OptionalSessionId = "",
    ) -> types.CallToolResult:
        """Append a markdown cell to the session's notebook: document hypotheses, methods and findings
        as you go."""
        entry = await entry_for(session_id)
        index = await _in_thread(lambda: reg.add_markdown(entry, markdown))
        return _text(f"Added markdown as cell {index} of {entry.session.notebook_path}.")

    @server.tool(structured_output=False)
    @_tool
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
        timeout = _check_timeout(timeout_seconds)
        entry = await entry_for(session_id)
        session = entry.session
        _check_index(session, cell_index)
        if session.cells[cell_index].get("cell_type") == "markdown":
            await _in_thread(lambda: reg.edit_markdown(entry, cell_index, code))
            return _text(f"Replaced the text of markdown cell {cell_index}.")
        cell = reg.begin(entry, code, replace=cell_index, timeout=timeout)
        await _follow(cell, ctx, None, session)
        return _cell_result(cell, entry)

    @server.tool(structured_output=False)
    @_tool
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
                _check_index(session, cell_index)
                nb_cell = session.cells[cell_index]
                if nb_cell.get("cell_type") != "code":
                    return _text(_as_text(nb_cell.get("source", "")))
                outputs = nb_cell.get("outputs", [])
                blocks = _output_content(outputs) or [types.TextContent(type="text", text="(no output)")]
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
            return _text(
                f"No cell has run in session {sid!r} through this server. Pass cell_index to read a notebook "
                "cell's recorded outputs.",
                error=True,
            )
        if not await _follow(cell, ctx, wait_seconds, session):
            return _still_running(session, cell)
        return _cell_result(cell, entry)

    @server.tool(structured_output=False)
    @_tool
    async def list_sessions() -> types.CallToolResult:
        """List the sessions this server is attached to: id, notebook, server, kind (sandbox or local
        kernel), state (idle, running a cell, kernel dead) and number of cells."""
        rows = [_describe(e) for e in reg.entries()]
        pending = reg._pending_default()
        if pending:
            rows.append({"session_id": pending, "state": "not attached yet (the default session)"})
        if not rows:
            return _text(reg.known())
        return _text(json.dumps(rows, indent=1))

    @server.tool(structured_output=False)
    @_tool
    async def interrupt_session(session_id: OptionalSessionId = "") -> types.CallToolResult:
        """Interrupt the cell running in the session (it ends with KeyboardInterrupt); the kernel and
        its variables stay. Use it on a cell that runs too long."""
        entry = await entry_for(session_id)
        session = entry.session
        await _in_thread(session.interrupt)
        cell = entry.cell
        if cell is None or cell.done.is_set():
            return _text(
                f"Sent an interrupt to session {session.session_id}; no cell of this server was running."
            )
        finished = await anyio.to_thread.run_sync(cell.done.wait, INTERRUPT_WAIT, abandon_on_cancel=True)
        if not finished:
            return _text(
                f"Sent an interrupt, but the cell is still running after {INTERRUPT_WAIT:g}s (it may not "
                f"react to KeyboardInterrupt). restart_session(session_id={session.session_id!r}) stops it "
                "for sure (the kernel's variables are lost)."
            )
        result = _cell_result(cell, entry)
        result.content.insert(0, types.TextContent(type="text", text="Interrupted. The cell's output:"))
        return result

    @server.tool(structured_output=False)
    @_tool
    async def restart_session(ctx: Context, session_id: OptionalSessionId = "") -> types.CallToolResult:
        """Restart the session's kernel: after it died, or to start afresh. Its variables are lost; the
        sandbox's models are loaded again and the notebook so far is kept. If the sandbox's Jupyter
        server died, it is started again first."""
        entry = await entry_for(session_id)
        session = entry.session
        had_models = session.model_info_text != NO_MODELS_TEXT
        what = await _in_thread(lambda: reg.restart(entry), ctx, "restarting the kernel")
        if had_models and session.model_info_text == NO_MODELS_TEXT:
            return _text(
                f"{what} The models did not come back (the kernel found no model manifest). Start a "
                "session that loads them: attach_to_session(jupyter_url=<the same jupyter_url>) with no "
                "session_id.",
                error=True,
            )
        return _text(f"{what}\n\n{session.model_info_text}")

    @server.tool(structured_output=False)
    @_tool
    async def shutdown_session(session_id: OptionalSessionId = "") -> types.CallToolResult:
        """End the session: its kernel is shut down (a local session's sandbox too). The notebook
        stays. Other sessions on the same sandbox are not affected."""
        entry = await entry_for(session_id)
        session = entry.session
        await _in_thread(lambda: reg.shutdown(entry))
        extra = " and its local sandbox" if entry.origin == "local" else ""
        return _text(
            f"Shut down session {session.session_id}{extra}; its notebook {session.notebook_path} stays."
        )

    from seer_mcp import notebook_tools  # its tools build on this module's

    notebook_tools.register(server, reg)
    return server, reg


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
    # Run as seer_mcp.notebook, not as a second copy named __main__: notebook_tools imports it.
    from seer_mcp.notebook import main as _main

    _main()
