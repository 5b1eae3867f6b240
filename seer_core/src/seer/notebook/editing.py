"""Reading and editing a session's notebook: cells by index, inserted, deleted, moved, changed,
run again in place, and another notebook opened to continue it."""

from __future__ import annotations

import contextlib
import json
import posixpath
from typing import Any

from seer.errors import (
    NotebookError,
)
from seer.notebook.document import (
    NotebookDocument,
    check_notebook_path,
    check_source,
    new_cell_id,
    notebook_cells,
    source_text,
)
from seer.notebook.handle import RUNNING_KEY
from seer.notebook.results import CellResult
from seer.notebook.run import CellRunner


class NotebookEditing(CellRunner):
    """Reading and editing the notebook's cells. Edits take the session's lock, so they wait
    for a running cell; reads do not."""

    def add_markdown(self, text: str) -> None:
        """Append a markdown cell to the notebook."""
        with self._lock:
            self._nb.add({"cell_type": "markdown", "id": new_cell_id(), "metadata": {}, "source": text})
            self.save()

    def cell(self, index: int) -> dict[str, Any]:
        """A copy of the notebook's cell ``index`` (0-based): an nbformat dict with ``cell_type``,
        ``source`` and, for a code cell, ``outputs`` and ``execution_count``. Does not wait for a
        running cell. Raises :class:`~seer.errors.NotebookError` for an index out of range."""
        self._pull()
        index = self._index(index)
        for _ in range(5):  # a cell's outputs may change under us while a cell runs: copy again
            with contextlib.suppress(RuntimeError):
                copied: dict[str, Any] = json.loads(json.dumps(self._nb.cells[index]))
                return copied
        raise NotebookError(f"cell {index} kept changing while it was read; try again")

    def insert_cell(self, index: int, source: str, cell_type: str = "code") -> None:
        """Put a new cell at ``index`` (``len(session.cells)`` appends), moving the cells from
        ``index`` on down by one. A code cell is not run (``run_cell(index)`` runs it)."""
        if cell_type not in ("code", "markdown", "raw"):
            raise NotebookError(f"cell_type {cell_type!r} is not one of 'code', 'markdown', 'raw'")
        check_source(source)
        cell: dict[str, Any] = {"cell_type": cell_type, "id": new_cell_id(), "metadata": {}, "source": source}
        if cell_type == "code":
            cell.update(outputs=[], execution_count=None)
        with self._lock:
            self._pull()
            self._nb.cells.insert(self._index(index, insert=True), cell)
            self._changed(cell)

    def delete_cell(self, index: int) -> dict[str, Any]:
        """Remove cell ``index`` from the notebook and return it; the cells after it move up."""
        with self._lock:
            self._pull()
            removed = self._nb.cells.pop(self._index(index))
            self._changed()
        return removed

    def move_cell(self, index: int, to: int) -> None:
        """Move cell ``index`` so that it ends up at index ``to``; the cells between shift by one."""
        with self._lock:
            self._pull()
            index = self._index(index)
            to = self._index(to, what="target index")
            moved = self._nb.cells.pop(index)
            self._nb.cells.insert(to, moved)
            self._nb.mark_order()
            self._changed(moved)

    def set_source(self, index: int, source: str) -> None:
        """Replace cell ``index``'s source without running it. A code cell's outputs and execution
        count are cleared: they came from the old source (``run_cell(index)`` makes new ones)."""
        check_source(source)
        with self._lock:
            self._pull()
            cell = self._nb.cells[self._index(index)]
            cell["source"] = source
            if cell.get("cell_type") == "code":
                cell.update(outputs=[], execution_count=None)
            self._changed(cell)

    def clear_outputs(self, index: int | None = None) -> None:
        """Clear code cell ``index``'s outputs and execution count; every code cell's when ``index``
        is None. Sources and the kernel's state stay."""
        with self._lock:
            self._pull()
            cells = self._nb.cells if index is None else [self._nb.cells[self._index(index)]]
            for cell in cells:
                if cell.get("cell_type") == "code":
                    cell.update(outputs=[], execution_count=None)
            self._changed(*cells)

    def run_cell(self, index: int, *, source: str | None = None, timeout: float | None = None) -> CellResult:
        """Run code cell ``index`` again (with ``source`` as its new source, if given) and return
        what it produced, as :meth:`exec` does; the new outputs and execution count replace the
        cell's own, where it is (same index, same id), instead of being appended."""
        with self._lock:
            self._pull()
            index = self._index(index)
            cell = self._nb.cells[index]
            if cell.get("cell_type") != "code":
                raise NotebookError(
                    f"cell {index} is a {cell.get('cell_type')} cell: only code cells run "
                    "(set_source changes its text)"
                )
            if source is not None:
                cell["source"] = check_source(source)
            code = source_text(cell["source"])
            before = len(self._nb.cells)
            try:
                return self._run(code, hidden=False, timeout=timeout, record=True)
            finally:
                # The run recorded the cell at the end (also when it timed out or the kernel died):
                # put it in the place of the cell it re-ran.
                if len(self._nb.cells) > before:
                    with self._doc_lock:
                        new = self._nb.cells.pop()
                        # the run added it to the document: it goes, and the cell it re-ran changes
                        self._push()
                        index = next((i for i, c in enumerate(self._nb.cells) if c is cell), index)
                        cell.update(
                            execution_count=new.get("execution_count"), outputs=new.get("outputs", [])
                        )
                        cell.setdefault("metadata", {}).pop(RUNNING_KEY, None)
                        self._reran.add(str(cell.get("id")))
                        self._changed(cell)

    def open(self, path: str, *, notebook: dict[str, Any] | None = None) -> None:
        """Make notebook ``path`` (on the Jupyter server, relative to its root) this session's
        notebook, to continue it: its cells are read back, with their outputs, and later cells are
        added to it. The kernel is not touched: it keeps its variables and has run none of the
        opened cells (``run_cell`` runs one). The notebook written so far stays as it is.

        With ``notebook`` (an nbformat 4 dict, e.g. a ``.ipynb`` on this machine read with
        ``json.load``), that notebook is written to ``path`` first, which must not exist yet.
        Refused when another session on the server writes ``path``.
        """
        path = check_notebook_path(path)
        with self._lock:
            owner = self._client.notebook_session(path)
            if owner is not None and owner != self.session_id:
                raise NotebookError(
                    f"{path!r} is the notebook of session {owner} on this server; continue it in that "
                    "session, or shut that session down first"
                )
            if notebook is not None:
                if self._client.path_exists(path):
                    raise NotebookError(f"{path!r} already exists on the Jupyter server: open it as it is")
                cells, metadata = notebook_cells(notebook, where="the notebook given")
            else:
                cells, metadata = notebook_cells(self._client.read_notebook(path), where=path)
            self._leave_document()
            name = posixpath.splitext(posixpath.basename(path))[0]
            self._client.call("PATCH", f"/api/sessions/{self.session_id}", {"path": path, "name": name})
            self.notebook_path, self.name = path, name
            if self.local_path is not None:
                self.local_path = self.local_path.with_name(f"{name}.ipynb")
            for key in ("kernelspec", "language_info"):
                if key not in metadata and key in self._nb.metadata:
                    metadata[key] = self._nb.metadata[key]
            self._nb = NotebookDocument(metadata, cells)
            self._displays.clear()
            if notebook is not None:
                self._write_file()  # the document is made from it
            self._connect_document(new=notebook is not None)
            self.save()
