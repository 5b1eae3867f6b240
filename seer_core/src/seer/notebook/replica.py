"""The notebook as a session holds it: its cells (:class:`~seer.notebook.document.NotebookDocument`),
kept in sync both ways with the notebook's live document on the Jupyter server (where there is
one), and saved through the session's writer (the client copy, and the sandbox's ``.ipynb``)."""

from __future__ import annotations

import json
import operator
from typing import TYPE_CHECKING, Any, cast

from seer.errors import (
    NotebookError,
)
from seer.notebook.client import (
    quote_path,
)
from seer.notebook.document import source_text
from seer.notebook.handle import KERNEL_KEY, RECOVERED_KEY, RUNNING_KEY, SessionHandle
from seer.notebook.live import LiveNotebook, live_supported
from seer.notebook.writer import rendered_at

if TYPE_CHECKING:
    from seer.notebook.session import NotebookSession


class NotebookReplica(SessionHandle):
    """A session's replica of its notebook: the live document joined, pulled, pushed, saved."""

    @property
    def cells(self) -> list[dict[str, Any]]:
        """The notebook's cells so far (nbformat dicts), every writer's: with a live document,
        what others (another session, an MCP server, a person in JupyterLab) put there too."""
        self._pull()
        return self._nb.cells

    @property
    def notebook(self) -> dict[str, Any]:
        """The notebook as an nbformat 4.5 dict."""
        self._pull()
        with self._doc_lock:
            return json.loads(self._nb.render())

    def wait_changed(self, timeout: float) -> bool:
        """Whether another writer changes the live document within ``timeout`` seconds (at once
        True if one did since this session last read it). False without a live document."""
        doc = self._doc
        if doc is None:
            return False
        return doc.version != self._doc_seen or doc.wait_changed(self._doc_seen, timeout)

    def _connect_document(self, *, new: bool) -> None:
        """Join the notebook's live document, if the server has one. ``new``: this session made
        the notebook: what the server put in it (JupyterLab's blank first cell) goes, and the
        cells here are the notebook; otherwise the document's cells replace the ones here."""
        self._close_document()
        if not live_supported():
            return
        try:
            doc = LiveNotebook(self._client, self.notebook_path)
        except NotebookError as exc:
            if "no live document" not in str(exc):
                raise
            return  # a server without jupyter-collaboration: the session writes the file
        with self._doc_lock:
            self._doc = doc
            # (the server's state, read on joining, counts as a change of another writer's)
            self._doc_seen = self._doc_base = self._placed_at = doc.version
            cells, metadata = doc.pull()
            cells = json.loads(json.dumps(cells))  # this session's own, to change
            self._doc_metadata = None
            if new:
                doc.push(self._nb.cells, None)
                self._nb.take_changes()
            else:
                self._nb.replace(cells)
                self._nb.take_changes()
                self._nb.metadata.update(metadata)
            self._push()

    def _others_write(self) -> bool:
        """Whether another writer changed the live document since this session joined it (then
        cells are ordered against theirs as they start; alone, as they finish)."""
        doc = self._doc
        return doc is not None and doc.version != self._doc_base

    def _write_file(self) -> None:
        """Write the notebook as held here into the sandbox's file now, through the Jupyter
        contents API (not the writer, which may write later): a live document is made from it."""
        self._client.call(
            "PUT",
            f"/api/contents/{quote_path(self.notebook_path)}",
            {"type": "file", "format": "text", "content": self._nb.render()},
        )

    def _close_document(self) -> None:
        """Leave the live document (unsaved: see ``CellRunner._leave_document``)."""
        doc, self._doc = self._doc, None
        if doc is not None:
            doc.close()

    def _push(self) -> None:
        """Put what changed here into the live document."""
        doc = self._doc
        if doc is None:
            return
        with self._doc_lock:
            changes = self._nb.take_changes()
            if changes is None or changes:
                doc.push(self._nb.cells, changes)
            metadata = json.dumps(self._nb.metadata, sort_keys=True)
            if metadata != self._doc_metadata:
                doc.push_metadata(self._nb.metadata)
                self._doc_metadata = metadata

    def _pull(self) -> None:
        """Bring the cells here up to date with the live document, if another writer changed it.
        Cell dicts keep their identity (by id); the cell running here keeps its own."""
        doc = self._doc
        if doc is None or doc.version == self._doc_seen:
            return
        with self._doc_lock:
            self._push()
            seen = doc.version
            cells, _ = doc.pull()
            held = {str(c.get("id")): c for c in self._nb.cells}
            merged = []
            fresh_recovered = False
            for cell in cells:
                cid = str(cell.get("id"))
                if cid in doc.pulled and RECOVERED_KEY in (cell.get("metadata") or {}):
                    fresh_recovered = True
                old = held.get(cid)
                if old is None:
                    merged.append(json.loads(json.dumps(cell)) if cid not in doc.pulled else cell)
                    continue
                if cid in doc.pulled and old is not self._running_cell and old != cell:
                    old.clear()
                    old.update(cell)
                merged.append(old)
            # Only cells read again can make a new pair: the notebook is looked through when
            # one is a recovered cell, or while recovered cells are in it.
            twins = (
                self._recovered_twins(merged)
                if fresh_recovered or (self._recovered and doc.pulled)
                else set()
            )
            if twins:
                merged = [c for c in merged if str(c.get("id")) not in twins]
            unchanged = {str(c.get("id")) for c in merged} - doc.pulled
            if self._running_cell is not None:
                unchanged.discard(str(self._running_cell.get("id")))
            self._nb.replace(merged, unchanged=unchanged)
            self._doc_seen = seen
            if twins:  # out of the live document too (this replica has seen them)
                self._nb.mark_order()
                self._push()

    def _recovered_twins(self, cells: list[dict[str, Any]]) -> set[str]:
        """The ids of the cells ``sync`` recovered from the kernel's history (:data:`RECOVERED_KEY`)
        whose run another cell in ``cells`` records too: the same source, execution count and
        kernel. A writer's cell for it came into the live document after the sync looked (a cell
        goes in as it ends); it has the outputs, and the recovered cell goes. Of recovered cells
        alone (two handles synced at once), the first in the document stays: every replica
        agrees which."""
        recovered: dict[tuple[Any, ...], str] = {}
        runs: set[tuple[Any, ...]] = set()
        twins: set[str] = set()
        for cell in cells:
            count = cell.get("execution_count")
            if cell.get("cell_type") != "code" or not isinstance(count, int):
                continue
            meta = cell.get("metadata") or {}
            key = (meta.get(KERNEL_KEY), count, source_text(cell.get("source", "")).strip())
            if RECOVERED_KEY not in meta:
                runs.add(key)
            elif key in recovered:
                twins.add(str(cell.get("id")))
            else:
                recovered[key] = str(cell.get("id"))
        self._recovered = bool(recovered)
        return twins | {cid for key, cid in recovered.items() if key in runs}

    def save(self, *, refresh: bool = False) -> None:
        """Render the notebook and hand it to the session's :attr:`writer`.

        The session saves after every cell and every edit; call it after changing the notebook
        some other way. ``refresh=True`` serialises every cell again, for outputs that grew in
        place (a cell still running on another thread). It does not take the session's lock, so
        it can record a running cell's outputs so far.
        """
        with self._doc_lock:
            if refresh:
                self._nb.invalidate()
                for cell in self._nb.cells:
                    if RUNNING_KEY in (cell.get("metadata") or {}):
                        self._nb.mark(cell)
            self._push()
            # taken before the pull, so that the text holds at least this state (never less)
            state = self._doc.state() if self._doc is not None else None
            self._pull()
            text = self._nb.render()
        with rendered_at(state):
            self.writer(cast("NotebookSession", self), text)

    def _index(self, index: object, *, what: str = "cell index", insert: bool = False) -> int:
        """``index`` if it names a cell (with ``insert``: a place between cells, the end included);
        else an error saying what is wrong and what the notebook holds."""
        try:
            if isinstance(index, bool):
                raise TypeError
            index = operator.index(index)  # type: ignore[arg-type]
        except TypeError:
            raise NotebookError(f"{what} {index!r} is not an integer (cells count from 0)") from None
        count = len(self._nb.cells)
        top = count if insert else count - 1
        if 0 <= index <= top:
            return index
        has = f"{self.notebook_path} has {count} cell{'' if count == 1 else 's'}"
        if top < 0:
            valid = "there is no cell to name"
        elif insert:
            valid = f"a new cell goes at 0 to {top}; {top} appends"
        else:
            valid = f"indexes 0 to {top}"
        why = "is negative (cells count from 0)" if index < 0 else "is out of range"
        raise NotebookError(f"{what} {index} {why}: {has} ({valid})")

    def _changed(self, *cells: dict[str, Any]) -> None:
        """(Under the lock.) The notebook's cells were edited (``cells`` changed; cells added,
        deleted or moved tell themselves): render them again and save."""
        for cell in cells:
            self._nb.mark(cell)
        if not cells:
            self._nb.mark_order()
        self._nb.invalidate()
        self.save()
