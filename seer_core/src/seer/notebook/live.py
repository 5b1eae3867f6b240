"""The notebook as one live document: a replica, on this side, of the collaborative document the
sandbox's Jupyter server holds for a notebook (jupyter-collaboration's room), kept in sync both ways.

Every writer of a notebook (Python sessions, MCP servers, a person in JupyterLab) edits that one
document; the server saves it to the ``.ipynb`` in the sandbox, and each writer's client copy is
rendered from its replica. Nothing is rebuilt from one writer's memory, so no writer's cell is lost.

Jupyter's model, spoken directly: ``PUT /api/collaboration/session/<path>`` names the room, its
websocket (``/api/collaboration/room/json:notebook:<file id>``) carries the Y sync protocol
(pycrdt's messages), and the document is a :class:`jupyter_ydoc.YNotebook` over a :class:`pycrdt.Doc`.
seer speaks it over the same websocket-client transport as the kernel channels, with one reader
thread, rather than through jupyter-nbmodel-client: that client runs on asyncio (an event loop per
session, a second websocket stack) and offers no way to know that the server has applied an update
or saved the file, which a session needs before it says a cell is kept.

A writer changes the document with :meth:`LiveNotebook.push`: given the cells as it holds them and
which of them it changed, it makes only those changes (a cell added after the cell it follows, a
cell deleted or moved, a changed source, outputs or count), so what others did meanwhile stays.
:meth:`LiveNotebook.pull` reads the document back.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from seer.errors import NotebookError
from seer.notebook.client import NOTEBOOK_PURPOSE, JupyterClient, quote_path
from seer.notebook.document import ALL_CHANGED, ORDER_CHANGED
from seer.notebook.saves import SaveScheduler
from seer.notebook.ywire import (
    RAW,
    STEP2,
    SYNC,
    cell_from_y,
    from_yjs,
    raw_message,
    read_raw,
    reorder_ycells,
    to_yjs,
    update_ycell,
    ycell,
)

__all__ = ["LIVE_PURPOSE", "LiveNotebook", "live_supported"]

#: What needs pycrdt and jupyter-ydoc, as :class:`~seer.errors.MissingExtraError` says it.
LIVE_PURPOSE = "a notebook's live document (pycrdt, jupyter-ydoc)"
#: Longest wait for the server to answer a sync round trip or a save.
ROUND_TRIP_TIMEOUT = 30.0
#: How long after the server's answer to a save its "written" mark may take to arrive.
SAVED_WAIT = 2.0
#: How long a process, as it exits, waits for the saves its open live documents asked for.
EXIT_SAVE_WAIT = 10.0

#: The live documents open in this process: closed in order at exit (see :func:`close_all`).
_open: weakref.WeakSet[LiveNotebook] = weakref.WeakSet()
_exit_hooked = False
_exit_lock = threading.Lock()


def close_all(wait_saves: float = EXIT_SAVE_WAIT) -> None:
    """Close every live document open in this process, each once the saves it asked for are
    done (up to ``wait_saves`` seconds in all). Run at exit (atexit): a script that ends without
    ``session.detach()`` leaves the sandbox's ``.ipynb`` saved, and no thread of a document, the
    reader applying the server's updates through pycrdt (Rust) or the saver, is still running
    when the interpreter finalises (a daemon thread stopped in the middle of a pycrdt call, as
    finalisation stops them, is what can end a process with SIGSEGV after its last line)."""
    deadline = time.monotonic() + wait_saves
    for doc in list(_open):
        with contextlib.suppress(Exception):
            doc.close(wait_saves=max(deadline - time.monotonic(), 0.0))


def _track(doc: LiveNotebook) -> None:
    global _exit_hooked
    with _exit_lock:
        if not _exit_hooked:
            atexit.register(close_all)
            _exit_hooked = True
        _open.add(doc)


def live_supported() -> bool:
    """Whether this side has what a live document needs (pycrdt and jupyter-ydoc)."""
    try:
        import jupyter_ydoc  # noqa: F401
        import pycrdt  # noqa: F401
    except ImportError:
        return False
    return True


class LiveNotebook:
    """A replica of one notebook's live document on a Jupyter server with jupyter-collaboration.

    Thread-safe: one lock guards the replica; a reader thread applies what the server sends.
    :attr:`version` grows with every change another writer made; :meth:`wait_changed` waits for one.
    """

    def __init__(self, client: JupyterClient, path: str, *, timeout: float = ROUND_TRIP_TIMEOUT):
        from seer.extras import require

        websocket = require("websocket", NOTEBOOK_PURPOSE)
        pycrdt = require("pycrdt", LIVE_PURPOSE)
        ynotebook = require("jupyter_ydoc", LIVE_PURPOSE)
        self._pycrdt = pycrdt
        self.path = path
        self.client = client
        status, model = client.request(
            "PUT",
            f"/api/collaboration/session/{quote_path(path)}",
            {"format": "json", "type": "notebook"},
            timeout=timeout,
        )
        if status not in (200, 201) or not isinstance(model, dict) or "fileId" not in model:
            message = model.get("message") if isinstance(model, dict) else None
            raise NotebookError(
                f"the Jupyter server at {client.url} has no live document for {path!r} "
                f"(PUT /api/collaboration/session: HTTP {status}{': ' + str(message) if message else ''})"
            )
        room = f"json:notebook:{model['fileId']}"
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self.doc = pycrdt.Doc()
        self.notebook = ynotebook.YNotebook(self.doc)
        self._ymeta = self.doc.get("meta", type=pycrdt.Map)
        #: grows by one with every change another writer made (applied from the server)
        self.version = 0
        #: set when the websocket closed (why)
        self.closed: str | None = None
        self._remote = False
        self._step2 = 0
        self._saves: dict[int, dict[str, Any]] = {}
        self._save_number = 0
        #: the ids of cells this writer has seen in the document (pulled or pushed)
        self.known: set[str] = set()
        #: per cell id: the outputs as this writer last put them or read them (JSON)
        self._outputs: dict[str, str] = {}
        #: the document's cell ids in order, as this writer last knew them (None: read them again)
        self._ids: list[str] | None = None
        #: the cells as last read from the document, by id, and the ids changed since then: a
        #: pull reads again only what changed (reading every cell of a long notebook took
        #: hundreds of milliseconds)
        self._as_read: dict[str, dict[str, Any]] = {}
        self._stale: set[str] = set()
        #: the ids whose cells the last :meth:`pull` read again (the rest are as before)
        self.pulled: set[str] = set()
        url = client.ws_url(f"/api/collaboration/room/{room}?sessionId={model.get('sessionId', '')}")
        try:
            self._ws = websocket.create_connection(
                url,
                header=[f"Authorization: token {client.token}"],
                timeout=timeout,
                enable_multithread=True,
                suppress_origin=True,
            )
        except Exception as exc:
            raise NotebookError(f"cannot open the live document of {path!r}: {exc}") from exc
        self._ws.settimeout(None)
        self._subscription = self.doc.observe(self._on_update)
        self._cells_subscription = self.notebook.ycells.observe_deep(self._on_cells)
        #: how many times the server marked the document written (its "dirty" flag cleared)
        self._written = 0
        self._state_subscription = self.notebook.ystate.observe(self._on_state)
        self._saver = SaveScheduler(self.save)
        self._thread = threading.Thread(target=self._read, name="seer-live-notebook", daemon=True)
        self._thread.start()
        _track(self)
        try:
            self.round_trip(timeout)
        except BaseException:
            self.close()
            raise

    # --- the wire --------------------------------------------------------------------------
    def _send(self, data: bytes) -> None:
        try:
            self._ws.send_binary(data)
        except Exception as exc:
            raise NotebookError(f"lost the live document of {self.path!r}: {exc}") from exc

    def _on_update(self, event: Any) -> None:
        """(Under the lock, in the thread that changed the document.) Send a local change.

        A send that fails (the websocket closed under the change: a teardown in another thread,
        the server gone) loses the document as the reader's finding it closed does: the change
        stays in this replica, so the client copy still gets it, and the next save or flush says
        the document was lost. (Raised here, pycrdt would hand the change's caller the error in
        an ``ExceptionGroup``, and the client copy would miss the cell.)"""
        if self._remote:
            return
        if self.closed is None:
            try:
                self._send(self._pycrdt.create_update_message(event.update))
            except NotebookError as exc:
                self.closed = f"a change could not be sent: {exc.__cause__ or exc}"
                self._changed.notify_all()

    def _on_cells(self, events: Any) -> None:
        """(Under the lock.) The cells changed: count it when another writer changed them."""
        if self._remote:
            self.version += 1
            for event in events:
                path = list(getattr(event, "path", None) or [])
                if path and isinstance(path[0], int):
                    # a change inside one cell: read that one again at the next pull
                    try:
                        self._stale.add(str(self.notebook.ycells[path[0]].get("id")))
                    except Exception:  # not there any more: read them all again
                        self._as_read.clear()
                    continue
                self._ids = None  # cells added, deleted or moved
                for change in getattr(event, "delta", None) or []:
                    for item in change.get("insert") or [] if isinstance(change, dict) else []:
                        try:  # a cell inserted (or moved here) is read again whatever its id
                            self._stale.add(str(item.get("id")))
                        except Exception:
                            self._as_read.clear()
            self._changed.notify_all()

    def _on_state(self, event: Any) -> None:
        """(Under the lock.) The server cleared the "dirty" flag: it wrote the file."""
        if self._remote and self.notebook.dirty is False:
            self._written += 1
            self._changed.notify_all()

    def _read(self) -> None:
        reason = "the server closed it"
        try:
            while True:
                data = self._ws.recv()
                if not data:
                    break
                if isinstance(data, str):
                    data = data.encode()
                kind = data[0]
                if kind == SYNC:
                    with self._lock:
                        self._remote = True
                        try:
                            reply = self._pycrdt.handle_sync_message(data[1:], self.doc)
                        finally:
                            self._remote = False
                        if len(data) > 1 and data[1] == STEP2:
                            self._step2 += 1
                        self._changed.notify_all()  # whoever waits on the document looks again
                    if reply is not None:
                        self._send(reply)
                elif kind == RAW:
                    answer = read_raw(data)
                    if answer is not None and answer.get("type") == "save":
                        with self._lock:
                            self._saves[int(answer.get("responseTo", -1))] = answer
                            self._changed.notify_all()
        except Exception as exc:  # closed by us or by the server
            reason = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.closed = reason
            self._changed.notify_all()
        self._saver.stop()

    def _wait(self, done: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            while not done():
                if self.closed is not None:
                    raise NotebookError(f"lost the live document of {self.path!r} ({self.closed}) {what}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NotebookError(f"the Jupyter server did not answer {what} within {timeout:g}s")
                self._changed.wait(left)

    def round_trip(self, timeout: float = ROUND_TRIP_TIMEOUT) -> None:
        """Ask the server for what this replica lacks and wait for the answer: every change sent
        before has then been applied by the server (it handles one client's messages in order)."""
        with self._lock:
            target = self._step2 + 1
            self._send(self._pycrdt.create_sync_message(self.doc))
        self._wait(lambda: self._step2 >= target, timeout, "a sync request")

    def save(self, timeout: float = ROUND_TRIP_TIMEOUT) -> None:
        """Have the server write the document to its ``.ipynb`` now, and wait until it has.
        Raises :class:`~seer.errors.NotebookError` when the server could not write it (its disk
        is full, the file is not writable): the document stays, unsaved, on the server."""
        deadline = time.monotonic() + timeout
        with self._lock:
            written = self._written
        before = self._modified()
        while True:
            with self._lock:
                # The server clears it once it wrote the file: a save by any writer that ends
                # after this reached the server holds every change this writer sent before.
                self.notebook.dirty = True
                self._save_number += 1
                number = self._save_number
            # Every change sent so far is applied before the save (the server saves at once on
            # this request, while changes wait their turn in its queue).
            self.round_trip(timeout)
            self._send(raw_message("save", number))
            left = max(deadline - time.monotonic(), 0.001)
            self._wait(lambda n=number: n in self._saves, left, "a save")
            with self._lock:
                answer = self._saves.pop(number)
            if answer.get("status") == "failed":
                raise NotebookError(f"the Jupyter server could not save {self.path!r}")
            if answer.get("status") != "skipped":
                break
            if time.monotonic() >= deadline:  # a save of its own kept it busy all along
                raise NotebookError(f"the Jupyter server did not save {self.path!r} within {timeout:g}s")
            time.sleep(0.05)
        # The server answers a save whether or not it could write the file; only a written file
        # clears the mark. Its update is sent before the answer to a sync request made now.
        self.round_trip(timeout)
        # A save that other writers' changes interrupt writes the file but leaves the mark (the
        # server starts saving again after them): the file's time tells then.
        for wait in (0.25, SAVED_WAIT):
            with contextlib.suppress(NotebookError):
                self._wait(lambda: self._written > written, min(timeout, wait), "a save")
            if self._written > written or self._modified() != before:
                return
        raise NotebookError(
            f"the Jupyter server could not write {self.path!r} in the sandbox (is its disk full? "
            "the server's log says why)"
        )

    def _modified(self) -> str | None:
        """When the notebook's file was last written, as the server says (None: it cannot say)."""
        try:
            status, model = self.client.request(
                "GET", f"/api/contents/{quote_path(self.path)}?content=0", timeout=ROUND_TRIP_TIMEOUT
            )
        except OSError:
            return None
        if status != 200 or not isinstance(model, dict) or model.get("type") != "notebook":
            return None
        return str(model.get("last_modified"))

    @property
    def save_error(self) -> str | None:
        """Why the last save of the sandbox's ``.ipynb`` failed (None: it did not)."""
        return self._saver.error

    def request_save(self) -> None:
        """Have the server write the document to its ``.ipynb`` soon: a thread of this replica
        asks it once a stream of cells pauses (see :mod:`seer.notebook.saves`);
        :attr:`save_error` says how the last save went, :meth:`flush` saves at once."""
        self._saver.request()

    def flush(self, timeout: float = ROUND_TRIP_TIMEOUT) -> None:
        """Save now (once a save under way has ended), holding every change sent so far: raises
        :class:`~seer.errors.NotebookError` when the server could not write the ``.ipynb``."""
        self._saver.flush(timeout)

    def wait_changed(self, since: int, timeout: float) -> bool:
        """Whether another writer changed the document after :attr:`version` was ``since``,
        waiting up to ``timeout`` seconds for it."""
        with contextlib.suppress(NotebookError):
            self._wait(lambda: self.version > since, timeout, "a change")
        return self.version > since

    def state(self) -> bytes:
        """The replica's state vector (encoded): which updates of each writer it holds."""
        with self._lock:
            return bytes(self.doc.get_state())

    def wait_state(self, covers: Callable[[bytes], bool], timeout: float) -> bool:
        """Whether the replica's state comes to satisfy ``covers`` within ``timeout`` seconds
        (every update from the server wakes the check)."""
        with contextlib.suppress(NotebookError):
            self._wait(lambda: covers(bytes(self.doc.get_state())), timeout, "the document's state")
        return covers(self.state())

    def close(self, *, wait_saves: float = 0.0) -> None:
        """Close the websocket and stop this replica's threads (the server keeps the document;
        what was saved is in the ``.ipynb``). ``wait_saves``: first wait up to that many seconds
        for the saves asked for (:meth:`request_save`) to be done."""
        if wait_saves > 0:
            self._saver.wait(wait_saves)
        _open.discard(self)
        with self._lock:
            if self.closed is None:
                self.closed = "closed by this side"
            self._changed.notify_all()
        with contextlib.suppress(Exception):
            self.doc.unobserve(self._subscription)
        with contextlib.suppress(Exception):
            self.notebook.ycells.unobserve(self._cells_subscription)
        with contextlib.suppress(Exception):
            self.notebook.ystate.unobserve(self._state_subscription)
        with contextlib.suppress(Exception):
            self._ws.send_close()
        with contextlib.suppress(Exception):
            self._ws.abort()
        self._thread.join(timeout=5)
        self._saver.stop(join=5)  # a save under way fails at once now: the document is closed
        with contextlib.suppress(Exception):
            self._ws.shutdown()

    # --- reading and writing cells ------------------------------------------------------------
    def pull(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """``(cells, metadata)``: the document as it is now, nbformat 4.5 dicts. Only the cells
        that changed since the last pull are read again (:attr:`pulled` names them, and they are
        fresh copies); the others are the dicts an earlier pull gave: do not change them. A cell
        with no id (an nbformat 4.4 notebook) is given one in the document, and the notebook
        becomes 4.5: every writer addresses cells by id."""
        with self._lock:
            meta = from_yjs(self._ymeta.to_py() or {})
            ycells = self.notebook.ycells
            if self._ids is None or len(self._ids) != len(ycells):
                self._ids = [str(y.get("id")) for y in ycells]
            ids = self._ids
            fixed = len(set(ids)) != len(ids) or any(not cid or cid == "None" for cid in ids)
            if fixed:  # give every cell an id of its own, in the document
                seen: set[str] = set()
                for i, yentry in enumerate(ycells):
                    if not ids[i] or ids[i] == "None" or ids[i] in seen:
                        ids[i] = uuid.uuid4().hex[:8]
                        yentry["id"] = ids[i]  # sent to the others as any change is
                    seen.add(ids[i])
            self.pulled = set()
            cells: list[dict[str, Any]] = []
            for i, cid in enumerate(ids):
                cell = self._as_read.get(cid)
                if cell is None or cid in self._stale:
                    cell = cell_from_y(ycells[i], cid, self._outputs)
                    self._as_read[cid] = cell
                    self.pulled.add(cid)
                self.known.add(cid)
                cells.append(cell)
            self._stale.clear()
            if len(self._as_read) > len(ids):
                present = set(ids)
                self._as_read = {k: v for k, v in self._as_read.items() if k in present}
            if fixed or int(meta.get("nbformat_minor", 5) or 0) < 5:
                self._ymeta["nbformat"] = 4.0
                self._ymeta["nbformat_minor"] = 5.0
            return [json.loads(json.dumps(c)) if c["id"] in self.pulled else c for c in cells], dict(
                meta.get("metadata") or {}
            )

    def push_metadata(self, metadata: dict[str, Any]) -> None:
        """Make the notebook's metadata ``metadata`` (kernelspec, language_info, ...)."""
        with self._lock:
            current = self._ymeta.get("metadata")
            held = current.to_py() if hasattr(current, "to_py") else current
            if held is None or from_yjs(held) != metadata:
                self._ymeta["metadata"] = self._pycrdt.Map(to_yjs(json.loads(json.dumps(metadata))))

    def push(self, cells: list[dict[str, Any]], changed: set[str] | None) -> None:
        """Make the document agree with ``cells`` (this writer's cells, in its order) where this
        writer changed it: cells it no longer has that it had seen are deleted, cells new to the
        document are inserted after the cell they follow here, the cells in ``changed`` (ids; None
        or :data:`~seer.notebook.document.ALL_CHANGED` in it: every cell) get their source,
        outputs, execution count and metadata, and cells moved here are moved there. Cells only
        other writers know are left as they are."""
        with self._lock:
            try:
                self._push(cells, changed)
            except BaseException:
                self._ids = None  # read them again next time
                raise

    def _push(self, cells: list[dict[str, Any]], changed: set[str] | None) -> None:
        with self.doc.transaction():
            ycells = self.notebook.ycells
            if self._ids is None or len(self._ids) != len(ycells):
                self._ids = [str(y.get("id")) for y in ycells]
            ids = self._ids
            # (Set operations and comprehensions over every cell, a Python loop only over the
            # cells to change: a cell of a long notebook costs what one of a short one does.)
            order = [str(c.get("id")) for c in cells]
            gone = (self.known & set(ids)).difference(order)
            for i in range(len(ids) - 1, -1, -1) if gone else ():
                if ids[i] in gone:
                    del ycells[i]
                    del ids[i]
            if changed is not None and ORDER_CHANGED in changed:  # this writer moved cells
                reorder_ycells(self._pycrdt, ycells, ids, cells, changed, self._outputs)
                if ALL_CHANGED in changed:  # and any cell may have changed
                    changed = None
            place = {cid: i for i, cid in enumerate(ids)}
            todo = [k for k, cid in enumerate(order) if changed is None or cid in changed or cid not in place]
            for k in todo:
                cell, cid = cells[k], order[k]
                self._stale.add(cid)  # read it again at the next pull
                at = place.get(cid)
                if at is None:  # new to the document: after the cell before it here
                    before = next((place[o] for o in reversed(order[:k]) if o in place), -1)
                    at = before + 1
                    ycells.insert(at, ycell(self._pycrdt, cell))
                    ids.insert(at, cid)
                    place = {c: i for i, c in enumerate(ids)}
                    if cell.get("cell_type") == "code":
                        self._outputs[cid] = json.dumps(cell.get("outputs") or [], sort_keys=True)
                else:
                    update_ycell(self._pycrdt, ycells[at], cell, self._outputs)
            self.known.update(order)
