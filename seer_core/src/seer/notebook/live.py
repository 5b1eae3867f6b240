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

import contextlib
import json
import threading
import time
import uuid
from typing import Any

from seer.errors import NotebookError
from seer.notebook.client import NOTEBOOK_PURPOSE, JupyterClient, quote_path
from seer.notebook.document import ORDER_CHANGED

__all__ = ["LIVE_PURPOSE", "LiveNotebook", "live_supported"]

#: What needs pycrdt and jupyter-ydoc, as :class:`~seer.errors.MissingExtraError` says it.
LIVE_PURPOSE = "a notebook's live document (pycrdt, jupyter-ydoc)"
#: Longest wait for the server to answer a sync round trip or a save.
ROUND_TRIP_TIMEOUT = 30.0
#: Least time between two saves this replica asks for (the server also saves on its own, shortly
#: after each change): a session running many short cells does not keep the server busy saving.
SAVE_PAUSE = 0.5
#: How long after the server's answer to a save its "written" mark may take to arrive.
SAVED_WAIT = 2.0

_SYNC, _AWARENESS, _RAW = 0, 1, 2
_STEP1, _STEP2, _UPDATE = 0, 1, 2


def live_supported() -> bool:
    """Whether this side has what a live document needs (pycrdt and jupyter-ydoc)."""
    try:
        import jupyter_ydoc  # noqa: F401
        import pycrdt  # noqa: F401
    except ImportError:
        return False
    return True


def _var_uint(num: int) -> bytes:
    out = bytearray()
    while True:
        byte = num & 0x7F
        num >>= 7
        if num:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _raw_message(text: str, number: int) -> bytes:
    data = text.encode()
    return bytes([_RAW]) + _var_uint(len(data)) + data + _var_uint(number)


def _read_raw(data: bytes) -> dict[str, Any] | None:
    """The JSON of a RAW message (the server's answer to a save), or None."""
    pos, length, shift = 1, 0, 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    try:
        decoded = json.loads(data[pos : pos + length])
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


def _yjs(value: Any) -> Any:
    """``value`` (JSON) with ints as floats: Yjs keeps every number as a float, and a browser's
    JupyterLab reads an integer put there otherwise as a BigInt."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        return {k: _yjs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_yjs(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """``value`` with the floats Yjs keeps numbers as turned back into ints where whole."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


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
        self._thread = threading.Thread(target=self._read, name="seer-live-notebook", daemon=True)
        self._thread.start()
        #: why the last save of the sandbox's .ipynb failed (None: it did not)
        self.save_error: str | None = None
        self._save_wanted = False
        self._save_running = False
        self._saver: threading.Thread | None = None
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
        """(Under the lock, in the thread that changed the document.) Send a local change."""
        if self._remote:
            return
        if self.closed is None:
            self._send(self._pycrdt.create_update_message(event.update))

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
                if kind == _SYNC:
                    with self._lock:
                        self._remote = True
                        try:
                            reply = self._pycrdt.handle_sync_message(data[1:], self.doc)
                        finally:
                            self._remote = False
                        if len(data) > 1 and data[1] == _STEP2:
                            self._step2 += 1
                        self._changed.notify_all()  # whoever waits on the document looks again
                    if reply is not None:
                        self._send(reply)
                elif kind == _RAW:
                    answer = _read_raw(data)
                    if answer is not None and answer.get("type") == "save":
                        with self._lock:
                            self._saves[int(answer.get("responseTo", -1))] = answer
                            self._changed.notify_all()
        except Exception as exc:  # closed by us or by the server
            reason = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.closed = reason
            self._changed.notify_all()

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
            self._send(_raw_message("save", number))
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

    def request_save(self) -> None:
        """Have the server write the document to its ``.ipynb`` soon (a thread of this replica
        asks it, one save at a time, requests coalesced); :attr:`save_error` says how the last one
        went, :meth:`flush` waits for them."""
        with self._lock:
            self._save_wanted = True
            if self._saver is None or not self._saver.is_alive():
                self._saver = threading.Thread(target=self._save_loop, name="seer-live-save", daemon=True)
                self._saver.start()
            self._changed.notify_all()

    def _save_loop(self) -> None:
        last = 0.0
        while True:
            with self._lock:
                if self.closed is not None:
                    self._save_running = False
                    self._changed.notify_all()
                    return
                if not self._save_wanted:
                    self._save_running = False
                    self._changed.notify_all()
                    self._changed.wait()
                    continue
                self._save_running = True
                pause = last + SAVE_PAUSE - time.monotonic()
                if pause > 0:
                    self._changed.wait(pause)
                    continue
                self._save_wanted = False
            try:
                self.save()
                error = None
            except NotebookError as exc:
                error = str(exc)
            last = time.monotonic()
            with self._lock:
                self.save_error = error
                self._changed.notify_all()

    def flush(self, timeout: float = ROUND_TRIP_TIMEOUT) -> None:
        """Wait for the saves asked for so far, and save once more: raises
        :class:`~seer.errors.NotebookError` when the server could not write the ``.ipynb``."""
        self._wait(lambda: not (self._save_wanted or self._save_running), timeout, "the saves asked for")
        self.save(timeout)

    def wait_changed(self, since: int, timeout: float) -> bool:
        """Whether another writer changed the document after :attr:`version` was ``since``,
        waiting up to ``timeout`` seconds for it."""
        with contextlib.suppress(NotebookError):
            self._wait(lambda: self.version > since, timeout, "a change")
        return self.version > since

    def close(self) -> None:
        """Close the websocket (the server keeps the document and saves it)."""
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
            meta = _plain(self._ymeta.to_py() or {})
            ycells = self.notebook.ycells
            if self._ids is None or len(self._ids) != len(ycells):
                self._ids = [str(y.get("id")) for y in ycells]
            ids = self._ids
            fixed = len(set(ids)) != len(ids) or any(not cid or cid == "None" for cid in ids)
            if fixed:  # give every cell an id of its own, in the document
                seen: set[str] = set()
                for i, ycell in enumerate(ycells):
                    if not ids[i] or ids[i] == "None" or ids[i] in seen:
                        ids[i] = uuid.uuid4().hex[:8]
                        ycell["id"] = ids[i]  # sent to the others as any change is
                    seen.add(ids[i])
            self.pulled = set()
            cells: list[dict[str, Any]] = []
            for i, cid in enumerate(ids):
                cell = self._as_read.get(cid)
                if cell is None or cid in self._stale:
                    cell = self._convert(ycells[i], cid)
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

    def _convert(self, ycell: Any, cid: str) -> dict[str, Any]:
        cell: dict[str, Any] = _plain(ycell.to_py() or {})
        cell.pop("execution_state", None)
        cell["id"] = cid
        cell.setdefault("metadata", {})
        cell["source"] = str(cell.get("source", ""))
        if cell.get("cell_type") == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
            self._outputs[cid] = json.dumps(cell["outputs"], sort_keys=True)
        elif not cell.get("attachments"):
            cell.pop("attachments", None)
        return cell

    def push_metadata(self, metadata: dict[str, Any]) -> None:
        """Make the notebook's metadata ``metadata`` (kernelspec, language_info, ...)."""
        with self._lock:
            current = self._ymeta.get("metadata")
            held = current.to_py() if hasattr(current, "to_py") else current
            if held is None or _plain(held) != metadata:
                self._ymeta["metadata"] = self._pycrdt.Map(_yjs(json.loads(json.dumps(metadata))))

    def _ycell(self, cell: dict[str, Any]) -> Any:
        pycrdt = self._pycrdt
        value: dict[str, Any] = {
            k: _yjs(v) for k, v in cell.items() if k not in ("source", "metadata", "outputs")
        }
        value["source"] = pycrdt.Text(str(cell.get("source", "")))
        value["metadata"] = pycrdt.Map(_yjs(json.loads(json.dumps(cell.get("metadata") or {}))))
        if cell.get("cell_type") == "code":
            value["outputs"] = pycrdt.Array([self._youtput(o) for o in cell.get("outputs") or []])
            value["execution_state"] = "idle"
        return pycrdt.Map(value)

    def _youtput(self, output: dict[str, Any]) -> Any:
        pycrdt = self._pycrdt
        value = _yjs(json.loads(json.dumps(output)))
        if value.get("output_type") == "stream":
            text = value.get("text", "")
            value["text"] = pycrdt.Text("".join(text) if isinstance(text, list) else str(text))
        return pycrdt.Map(value)

    def push(self, cells: list[dict[str, Any]], changed: set[str] | None) -> None:
        """Make the document agree with ``cells`` (this writer's cells, in its order) where this
        writer changed it: cells it no longer has that it had seen are deleted, cells new to the
        document are inserted after the cell they follow here, the cells in ``changed`` (ids; None:
        every cell) get their source, outputs, execution count and metadata, and cells moved here
        are moved there. Cells only other writers know are left as they are."""
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
            mine = {str(c.get("id")) for c in cells}
            for i in range(len(ids) - 1, -1, -1):
                if ids[i] in self.known and ids[i] not in mine:
                    del ycells[i]
                    del ids[i]
            if changed is not None and ORDER_CHANGED in changed:  # this writer moved cells
                self._reorder(ycells, ids, cells, changed)
            place = {cid: i for i, cid in enumerate(ids)}
            previous = -1
            for cell in cells:
                cid = str(cell.get("id"))
                at = place.get(cid)
                if at is None or changed is None or cid in changed:
                    self._stale.add(cid)  # read it again at the next pull
                if at is None:
                    at = previous + 1
                    ycells.insert(at, self._ycell(cell))
                    ids.insert(at, cid)
                    place = {c: i for i, c in enumerate(ids)}
                    if cell.get("cell_type") == "code":
                        self._outputs[cid] = json.dumps(cell.get("outputs") or [], sort_keys=True)
                elif changed is None or cid in changed:
                    self._update(ycells[at], cell)
                self.known.add(cid)
                previous = at

    def _reorder(self, ycells: Any, ids: list[str], cells: list[dict[str, Any]], moved: set[str]) -> None:
        """Put the cells in ``moved`` (the ones this writer moved) where they are in its order:
        after the cell that precedes each here (before the one that follows, at the top). Other
        writers' cells are never moved from here: this writer's copy of them may be behind. A
        shared cell cannot be moved in place: a moved cell is deleted and inserted again."""
        if len(set(ids)) != len(ids):
            return  # the same cell twice (writers raced): moving by id would be ambiguous
        order = [str(c.get("id")) for c in cells]
        for k, cell in enumerate(cells):
            cid = order[k]
            if cid not in moved or cid not in ids:
                continue
            source = ids.index(cid)
            before = next((o for o in reversed(order[:k]) if o in ids and o != cid), None)
            after = next((o for o in order[k + 1 :] if o in ids and o != cid), None)
            del ycells[source]
            ids.pop(source)
            if before is not None:
                dest = ids.index(before) + 1
            elif after is not None:
                dest = ids.index(after)
            else:
                dest = 0
            ycells.insert(dest, self._ycell(cell))
            ids.insert(dest, cid)
            if cell.get("cell_type") == "code":
                self._outputs[cid] = json.dumps(cell.get("outputs") or [], sort_keys=True)

    def _update(self, ycell: Any, cell: dict[str, Any]) -> None:
        source = str(cell.get("source", ""))
        ytext = ycell.get("source")
        if ytext is None or str(ytext) != source:
            if ytext is None:
                ycell["source"] = self._pycrdt.Text(source)
            else:
                del ytext[:]
                ytext += source
        metadata = cell.get("metadata") or {}
        ymeta = ycell.get("metadata")
        if ymeta is None or _plain(ymeta.to_py()) != metadata:
            ycell["metadata"] = self._pycrdt.Map(_yjs(json.loads(json.dumps(metadata))))
        if cell.get("cell_type") != "code":
            return
        if _plain(ycell.get("execution_count")) != cell.get("execution_count"):
            ycell["execution_count"] = _yjs(cell.get("execution_count"))
        outputs = cell.get("outputs") or []
        text = json.dumps(outputs, sort_keys=True)
        cid = str(cell.get("id"))
        if self._outputs.get(cid) != text:
            youtputs = ycell.get("outputs")
            old = json.loads(self._outputs.get(cid) or "[]")
            if youtputs is not None and len(youtputs) >= len(old) and outputs[: len(old)] == old:
                # outputs streaming in: append what is new (the last one may have grown)
                start = len(old)
                if old and outputs[len(old) - 1] != old[-1]:
                    start = len(old) - 1
                    del youtputs[start]
                youtputs.extend([self._youtput(o) for o in outputs[start:]])
            else:
                ycell["outputs"] = self._pycrdt.Array([self._youtput(o) for o in outputs])
            self._outputs[cid] = text
