"""One cell run through the notebook MCP server, and the session it runs in.

:class:`Cell` is a cell and what it produced, filled in by the session's :class:`Runner` thread (a
cell outlives the tool call that started it); :class:`NotebookWriter` writes the session's notebook
from a thread of its own; :class:`Entry` is a session the server drives, with its latest cell.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from seer.errors import (
    CellTimeoutError,
    KernelDiedError,
)
from seer.notebook import (
    CellResult,
    NotebookSession,
    rendered_state,
    write_notebook,
)

from seer_mcp.failures import redact

if TYPE_CHECKING:
    from seer.sandbox import Sandbox


#: A notebook save waits this long for the next one before it is written (see NotebookWriter).
WRITE_DELAY = 0.25

# --- cells ----------------------------------------------------------------------------------


@dataclass
class Cell:
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


class Runner:
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


class NotebookWriter:
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
        self._state: bytes | None = None
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
            # with the document's state it was rendered at: written later, it must not replace a
            # client copy another writer wrote from a newer one
            self._text, self._state = text, rendered_state()
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
                text, state, self._text = self._text, self._state, None
                self._writing = True
            try:
                write_notebook(self.session, text, state=state)
                self.error = None
            except Exception as exc:
                self.error = redact(f"{type(exc).__name__}: {exc}")
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
class Entry:
    """A session this server knows."""

    session: NotebookSession
    #: "attached" (an existing session), "created" (a new session on a server) or "local"
    origin: str
    #: the sandbox this server started for the session (start_new_session); terminated with it
    sandbox: Sandbox | None = None
    #: the latest cell run through this server
    cell: Cell | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    writer: NotebookWriter | None = None
    runner: Runner | None = None

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


def server_url(session: NotebookSession) -> str:
    return session.client.url


def describe(entry: Entry) -> dict[str, Any]:
    session = entry.session
    return {
        "session_id": session.session_id,
        "notebook": session.notebook_path,
        "server": server_url(session),
        "kind": "local kernel (no GPU)" if entry.origin == "local" else "sandbox",
        "state": entry.state(),
        "cells": len(session.cells),
        **({"notebook_error": entry.writer.error} if entry.writer is not None and entry.writer.error else {}),
    }


def run_cell(entry: Entry, cell: Cell, timeout: float | None) -> None:
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


def adopt_cell(entry: Entry, cell: Cell, on_synced: Callable[[], None]) -> None:
    """(The cell's thread.) Wait for the cell an earlier server left running in the kernel; its
    outputs are recorded in its notebook cell (NotebookSession.sync)."""
    session = entry.session
    try:
        recovered = session.sync()
        cell.result = recovered[-1] if recovered else None
        if cell.result is not None:
            cell.index = index_of(session, cell.result)
    except (CellTimeoutError, KernelDiedError) as exc:
        cell.failure = exc
    except BaseException as exc:
        cell.failure = exc
    finally:
        with contextlib.suppress(Exception):
            on_synced()
        cell.finish()


def index_of(session: NotebookSession, result: CellResult) -> int | None:
    """The notebook index of the latest code cell holding ``result``'s code and count."""
    for i in range(len(session.cells) - 1, -1, -1):
        cell = session.cells[i]
        if cell.get("cell_type") == "code" and cell.get("execution_count") == result.execution_count:
            return i
    return None


def close_entry(entry: Entry, *, shutdown: bool) -> None:
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
