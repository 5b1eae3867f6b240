"""One cell run: ``exec`` sends an execute request, records the cell in the notebook before it
runs and with its outputs when it ends, and turns a timeout, a dead kernel or a lost connection
into the error that says so (with what the cell produced so far)."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, NoReturn

from seer.errors import (
    CellTimeoutError,
    JupyterServerDiedError,
    KernelDiedError,
    NotebookError,
)
from seer.notebook.client import (
    ChannelClosed,
    KernelChannels,
)
from seer.notebook.document import (
    new_cell_id,
)
from seer.notebook.handle import RUNNING_KEY
from seer.notebook.kernel import KernelLink
from seer.notebook.results import CellResult, OutputCollector

#: How long to wait for a kernel to answer an interrupt before giving up on a timed-out cell.
INTERRUPT_GRACE = 10.0


#: With no message for this long while a cell runs, ask the server whether the kernel lives.
LIVENESS_INTERVAL = 10.0


#: While a cell runs, its outputs so far are saved at most this often (seconds), so a client that
#: dies mid-cell leaves them in the notebook.
PARTIAL_SAVE_INTERVAL = 2.0
#: A cell of a session alone on its notebook still running after this long (seconds) is put into
#: the live document then, marked running; one that ends sooner goes in once, with its outputs.
BEGIN_PUSH_DELAY = 0.05


class CellRunner(KernelLink):
    """Running cells (``exec``) and recording them in the notebook."""

    def exec(self, code: str, hidden: bool = False, timeout: float | None = None) -> CellResult:
        """Run ``code`` as a cell and return what it produced.

        A visible cell is appended (with its outputs) to the notebook in the sandbox and its local
        mirror; ``hidden=True`` runs it without history and records it nowhere. An exception in the
        cell is *returned* (``result.error``), not raised. Raises
        :class:`~seer.errors.CellTimeoutError` after ``timeout`` seconds (having interrupted the
        cell) and :class:`~seer.errors.KernelDiedError` if the kernel dies.
        """
        with self._lock:
            return self._run(code, hidden=hidden, timeout=timeout, record=not hidden)

    def exec_file(
        self, path: str | os.PathLike[str], hidden: bool = False, timeout: float | None = None
    ) -> CellResult:
        """Run a local Python file's contents as one cell."""
        return self.exec(Path(path).read_text(), hidden=hidden, timeout=timeout)

    def _run(self, code: str, *, hidden: bool, timeout: float | None, record: bool) -> CellResult:
        self._check_usable()
        if self._channels is None or self._channels.closed:
            self._reconnect_or_die("the websocket was closed")
        self._drain()
        channels = self._channels
        assert channels is not None
        msg = channels.message(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": not hidden,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )
        msg_id = msg["header"]["msg_id"]
        collector = OutputCollector(self._displays)
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        interrupted_at: float | None = None
        reply: dict[str, Any] | None = None
        idle = False
        last_seen = started
        reconnects = 0
        # A recorded cell is in the notebook before it runs (as Jupyter does), its outputs list
        # the very list the collector fills: a client that dies mid-cell leaves it there.
        # A short cell of a session alone on its notebook goes into the live document once,
        # when it ends (one update of the document, not two); one still running after
        # BEGIN_PUSH_DELAY goes in then, marked running. With other writers it goes in at once:
        # they order their cells against it.
        defer = record and self._doc is not None and not self._others_write()
        cell = self._begin_record(code, msg_id, collector.outputs, push=not defer) if record else None
        push_at = started + BEGIN_PUSH_DELAY if defer else None
        self._running_cell = cell
        last_save, unsaved = started, False
        self._live = collector.outputs
        self._busy = True
        try:
            channels.send(msg)
            while reply is None or not idle:
                now = time.monotonic()
                if push_at is not None and now >= push_at:
                    push_at = None
                    with self._doc_lock:
                        self._push()
                if unsaved and now - last_save >= PARTIAL_SAVE_INTERVAL:
                    # The outputs so far, into the notebook (the cell may run for hours).
                    assert cell is not None
                    last_save, unsaved = now, False
                    self._nb.touch(cell)
                    self.save()
                wait = LIVENESS_INTERVAL
                if interrupted_at is not None:
                    wait = min(wait, max(interrupted_at + INTERRUPT_GRACE - now, 0.0))
                elif deadline is not None:
                    wait = min(wait, max(deadline - now, 0.0))
                if unsaved:
                    wait = min(wait, max(last_save + PARTIAL_SAVE_INTERVAL - now, 0.01))
                if push_at is not None:
                    wait = min(wait, max(push_at - now, 0.001))
                item = channels.get(wait) if wait > 0 else None
                now = time.monotonic()
                if item is None:
                    if deadline is not None and now >= deadline and interrupted_at is None:
                        interrupted_at = now
                        with contextlib.suppress(NotebookError):
                            self.interrupt()
                        continue
                    if interrupted_at is not None and now >= interrupted_at + INTERRUPT_GRACE:
                        partial = collector.result(code, hidden=hidden, execution_count=None, started=started)
                        raise CellTimeoutError(
                            f"the cell ran past its timeout of {timeout:g}s and did not stop when "
                            "interrupted; the kernel is still busy (session.restart() resets it)",
                            result=partial,
                        )
                    if now - last_seen < LIVENESS_INTERVAL:
                        continue
                elif isinstance(item, ChannelClosed) and self._closed:
                    # detach() let go of the kernel: the cell runs on there
                    raise NotebookError("the session was detached while the cell ran")
                last_seen = now
                # Whatever came (or did not, for a while): did the kernel die? One check for all.
                why = self._death(item)
                if why is not None:
                    self._died(collector, code, hidden, started, cell, why)
                if item is None:  # silent for LIVENESS_INTERVAL, and the server says it lives
                    if reconnects and self._kernel_state == "idle":
                        raise NotebookError(
                            "lost the connection to the kernel while the cell ran; it has "
                            "finished, but its output did not come back"
                        )
                    if reply is not None:
                        # The kernel finished the cell, and its output stream has said
                        # nothing since: its idle status (and maybe outputs) was lost.
                        raise NotebookError(
                            "the kernel finished the cell, but its output stream (iopub) fell "
                            f"silent for {LIVENESS_INTERVAL:g}s before the cell's end: some "
                            "of its outputs may be missing"
                        )
                    continue
                if isinstance(item, ChannelClosed):
                    if reconnects >= 3:
                        raise NotebookError(
                            f"lost the connection to the kernel while the cell ran ({item.reason})"
                        )
                    # The kernel lives: reconnect as the same client, and the server replays what
                    # the cell sent meanwhile.
                    reconnects += 1
                    channels.close()
                    with contextlib.suppress(NotebookError):
                        channels = self._channels = KernelChannels(
                            self._client, self.kernel_id, session=channels.session
                        )
                    continue
                if not isinstance(item, dict):
                    continue
                parent = item.get("parent_header") or {}
                channel = item.get("channel")
                msg_type = item.get("msg_type") or item.get("header", {}).get("msg_type")
                content = item.get("content") or {}
                if not parent:
                    continue
                if parent.get("msg_id") != msg_id:
                    self._absorb(item)
                    continue
                if channel == "shell":
                    reply = content
                elif channel == "iopub":
                    if msg_type == "status":
                        if content.get("execution_state") == "idle":
                            idle = True
                    elif msg_type == "execute_input":
                        self._note_started(
                            msg_id, content.get("execution_count"), (item.get("header") or {}).get("session")
                        )
                        if cell is not None:
                            # Saved with the next partial save: a later client that takes over
                            # this cell may never see its execute_input again.
                            cell["execution_count"] = content.get("execution_count")
                            self._stamp(cell)
                            self._nb.touch(cell)
                            unsaved = True
                            if self._others_write():  # their cells may race ours
                                self._place(cell)
                    else:
                        collector.handle(msg_type, content)
                        unsaved = cell is not None
        finally:
            self._busy = False
            self._live = None
            self._running_cell = None
            if cell is not None and (reply is None or not idle):
                # It did not finish here (timeout, lost connection): keep what it printed so far.
                self._nb.touch(cell)
                with contextlib.suppress(Exception):
                    self.save()
        collector.error_from_reply(reply)
        count = None if hidden else reply.get("execution_count")
        result = collector.result(code, hidden=hidden, execution_count=count, started=started)
        if collector.model_info is not None:
            self._last_model_info = collector.model_info
        if cell is not None:
            self._record(result, cell)
        elif collector.updated_displays:
            self._nb.invalidate()
            self._nb.mark_all()
            self.save()
        if interrupted_at is not None:
            raise CellTimeoutError(
                f"the cell ran past its timeout of {timeout:g}s and was interrupted", result=result
            )
        return result

    def _died(
        self,
        collector: OutputCollector,
        code: str,
        hidden: bool,
        started: float,
        cell: dict[str, Any] | None,
        why: str,
    ) -> NoReturn:
        result = collector.result(code, hidden=hidden, execution_count=None, started=started)
        self._dead = why
        server_gone = self._server_gone
        if cell is not None:
            result.execution_count = cell.get("execution_count")
            result.outputs.append(
                {
                    "output_type": "error",
                    "ename": "KernelDied",
                    "evalue": f"{why} while this cell ran",
                    "traceback": [f"KernelDied: {why} while this cell ran"],
                }
            )
            with contextlib.suppress(Exception):  # a server that is gone takes no notebook
                self._record(result, cell)
        if server_gone:
            raise JupyterServerDiedError(f"{why} while the cell ran", result=result)
        raise KernelDiedError(
            f"{why} while the cell ran; call session.restart() to start it again", result=result
        )

    def _begin_record(
        self, code: str, msg_id: str, outputs: list[dict[str, Any]], *, push: bool = True
    ) -> dict[str, Any]:
        """Put a cell about to run in the notebook, marked running, and save it (with a live
        document: put it there, unless not ``push``: the caller does, later)."""
        cell: dict[str, Any] = {
            "cell_type": "code",
            "execution_count": None,
            "id": new_cell_id(),
            "metadata": {RUNNING_KEY: msg_id},
            "outputs": outputs,
            "source": code,
        }
        self._pull()  # it goes after every cell run before it, whoever ran that
        self._place_recent(8)
        self._nb.add(cell)
        if self._doc is None:
            self.save()
        elif push:
            # Into the live document: every writer sees it running, and the server's next save
            # (this cell's end asks for one; a long cell's partial saves do) writes it to the
            # sandbox's .ipynb. The client copy gets the cell when it ends, or with the first
            # partial save: one render, file write and save request less per cell.
            self._push()
        return cell

    def _record(self, result: CellResult, cell: dict[str, Any]) -> None:
        """The cell ``_begin_record`` added has finished: its outputs and count are final."""
        with self._doc_lock:  # marked changed at once: reading the document back keeps it
            cell["execution_count"] = result.execution_count
            cell["outputs"] = result.outputs
            cell["metadata"].pop(RUNNING_KEY, None)
            self._stamp(cell)
            if self._displays:
                self._nb.invalidate()
                self._nb.mark_all()
            else:
                self._nb.touch(cell)
            self._place(cell)  # where the kernel's order puts it, as other writers' cells came in
            self._recent.append((cell, cell.get("execution_count")))
        self.save()

    def partial_outputs(self) -> list[dict[str, Any]]:
        """The outputs of the cell running now, so far (nbformat dicts, copied); [] when none
        runs. Safe from any thread: what a client shows while a long cell runs. While
        :meth:`sync` waits for a cell an earlier client started, that cell's."""
        orphans = list(self._orphans.values())
        if orphans:
            orphan = orphans[-1]
            cell = next(
                (c for c in self._nb.cells if c.get("metadata", {}).get(RUNNING_KEY) == orphan.msg_id), None
            )
            saved = list(cell.get("outputs") or []) if cell is not None else []
            return [dict(out) for out in saved + list(orphan.collector.outputs)]
        live = self._live
        if live is None:
            return []
        return [dict(out) for out in list(live)]

    def _leave_document(self) -> None:
        """Save the live document (as :meth:`flush` does, as far as it can) and leave it."""
        if self._doc is not None:
            with contextlib.suppress(NotebookError, OSError):
                self.flush()
        self._close_document()

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until the notebook in the sandbox holds everything this session wrote: with a
        live document the Jupyter server saves it shortly after each cell (:attr:`live`); this
        has it save now and waits. Raises :class:`~seer.errors.NotebookError` when the server
        could not write it (the client copy is written regardless). ``sandbox.terminate()``
        flushes every notebook itself before it copies them."""
        doc = self._doc
        if doc is None:
            return
        with self._doc_lock:
            self._push()
        doc.round_trip(timeout)  # what every other writer put there is here too now
        with self._lock:
            with contextlib.suppress(NotebookError):
                if self._channels is not None and not self._channels.closed:
                    self._drain()  # which cells the kernel started meanwhile
            self._placed_at = -1
            self._place_recent(len(self._recent))
        self.save()  # the client copy, from this replica
        doc.flush(timeout)
