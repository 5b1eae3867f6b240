"""The ``.ipynb`` document a notebook session writes: :class:`NotebookDocument` (nbformat 4.5,
built cell by cell, each cell serialised once) and the checks for continuing an existing notebook
(:func:`notebook_cells`, :func:`check_notebook_path`)."""

from __future__ import annotations

import json
import re
import uuid
from typing import TYPE_CHECKING, Any, cast

from seer.errors import (
    NotebookError,
)

__all__ = [
    "ALL_CHANGED",
    "CELL_ID",
    "ORDER_CHANGED",
    "NotebookDocument",
    "check_notebook_path",
    "check_source",
    "new_cell_id",
    "notebook_cells",
    "source_text",
]

if TYPE_CHECKING:
    pass


# --- the notebook document ------------------------------------------------------------------

#: In :meth:`NotebookDocument.take_changes`: cells were deleted or moved (no cell has this id).
ORDER_CHANGED = "\x00order"
#: In :meth:`NotebookDocument.take_changes`: any cell may have changed, and cells were moved too
#: (the set names those and :data:`ORDER_CHANGED`).
ALL_CHANGED = "\x00all"


class NotebookDocument:
    """An nbformat 4.5 notebook built cell by cell; each cell is serialised once, when added.

    It also notes which cells changed since :meth:`take_changes` was last called (what a session
    puts into the notebook's live document next)."""

    def __init__(self, metadata: dict[str, Any], cells: list[dict[str, Any]] | None = None):
        self.metadata = metadata
        self.cells: list[dict[str, Any]] = list(cells or [])
        self._text: list[str | None] = [None] * len(self.cells)
        #: ids of the cells changed (or moved) since the last :meth:`take_changes`
        self._changes: set[str] = set()
        #: whether any cell may have changed since then (cells changed in place)
        self._all = False
        #: the metadata as last rendered: compact JSON (to compare), and as written
        self._metadata_text = ("", "")

    def add(self, cell: dict[str, Any]) -> None:
        """Append ``cell`` (an nbformat cell dict) to the notebook."""
        self.cells.append(cell)
        self._text.append(None)
        self.mark(cell)

    def mark(self, cell: dict[str, Any]) -> None:
        """Note that ``cell`` changed (for :meth:`take_changes`)."""
        self._changes.add(str(cell.get("id")))

    def mark_order(self) -> None:
        """Note that cells were deleted or moved (a moved cell is also :meth:`mark`-ed)."""
        self._changes.add(ORDER_CHANGED)

    def mark_all(self) -> None:
        """Note that any cell may have changed (the cells moved meanwhile are still noted)."""
        self._all = True

    def take_changes(self) -> set[str] | None:
        """The ids of the cells changed since the last call, and :data:`ORDER_CHANGED` if cells
        were deleted or moved; forgets them. None: any cell may have changed, and none moved;
        with moves, the moved cells' ids, :data:`ORDER_CHANGED` and :data:`ALL_CHANGED` (a move
        is never dropped for a change of every cell)."""
        changes, self._changes = self._changes, set()
        every, self._all = self._all, False
        if not every:
            return changes
        if ORDER_CHANGED not in changes:
            return None
        changes.add(ALL_CHANGED)
        return changes

    def replace(self, cells: list[dict[str, Any]], *, unchanged: set[str] | None = None) -> None:
        """Hold ``cells`` from now on (read back from the live document: not changes of ours).
        The serialised text of the cells (ids) in ``unchanged`` that were held before is kept."""
        kept: dict[str, str] = {}
        if unchanged:
            for cell, text in zip(self.cells, self._text, strict=False):
                cid = str(cell.get("id"))
                if text is not None and cid in unchanged:
                    kept[cid] = text
        self.cells = cells
        self._text = [kept.get(str(c.get("id"))) for c in cells]

    def invalidate(self) -> None:
        """Serialise every cell again at the next render (cells changed in place)."""
        self._text = [None] * len(self.cells)

    def touch(self, cell: dict[str, Any]) -> None:
        """``cell`` (this very dict) changed: serialise it again at the next render."""
        self.mark(cell)
        i = self.index_of(cell)
        if i is not None and i < len(self._text):
            self._text[i] = None
            return
        self.invalidate()

    def index_of(self, cell: dict[str, Any]) -> int | None:
        """Where ``cell`` (this very dict) is in :attr:`cells` (None: it is not); the last cells
        are looked at first (the cell a session runs is usually the last)."""
        cells = self.cells
        for i in range(len(cells) - 1, -1, -1):
            if cells[i] is cell:
                return i
        return None

    @staticmethod
    def _dump(obj: Any, indent: str) -> str:
        """``obj`` as nbformat writes it (one space a level), every line after the first
        indented by ``indent``. (The JSON holds no line break but its own: strings escape theirs.
        ``textwrap.indent`` also broke lines at U+2028 and U+0085, which JSON leaves as they are,
        and put spaces into such a string.)"""
        return json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False).replace("\n", "\n" + indent)

    def render(self) -> str:
        """The notebook as ``.ipynb`` text, re-serialising only the cells that changed."""
        texts, i = self._text, -1
        while True:  # the cells not serialised yet (list.index: no Python loop over every cell)
            try:
                i = texts.index(None, i + 1)
            except ValueError:
                break
            texts[i] = "  " + self._dump(self.cells[i], "  ")
        cells = ",\n".join(cast("list[str]", texts))  # every one serialised now
        compact = json.dumps(self.metadata, sort_keys=True, ensure_ascii=False)  # (C, not Python)
        if compact != self._metadata_text[0]:
            self._metadata_text = (compact, self._dump(self.metadata, " "))
        return (
            '{\n "cells": [\n'
            + cells
            + ("\n" if cells else "")
            + ' ],\n "metadata": '
            + self._metadata_text[1]
            + ',\n "nbformat": 4,\n "nbformat_minor": 5\n}\n'
        )


def new_cell_id() -> str:
    """A fresh nbformat cell id."""
    return uuid.uuid4().hex[:8]


def check_notebook_path(path: object) -> str:
    """``path`` if it names a notebook inside a Jupyter server's root (relative, ``.ipynb``, no
    ``..``); else :class:`~seer.errors.NotebookError` saying what is wrong with it."""
    if not isinstance(path, str) or not path.strip():
        raise NotebookError(f"notebook path {path!r} is not a path: give one like 'notebooks/name.ipynb'")
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or "\x00" in path or ".." in parts:
        raise NotebookError(
            f"notebook path {path!r} must be relative to the Jupyter server's root, without '..' "
            "(like 'notebooks/name.ipynb')"
        )
    if not path.endswith(".ipynb") or not parts[-1][: -len(".ipynb")]:
        raise NotebookError(f"notebook path {path!r} does not name a notebook (a '<name>.ipynb' file)")
    return path


def notebook_cells(
    notebook: object, *, where: str = "the notebook"
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(cells, metadata)`` of an nbformat 4 notebook dict, checked and made fit to be continued:
    sources joined into strings, every cell given an id, code cells their ``outputs`` and
    ``execution_count``. Raises :class:`~seer.errors.NotebookError` naming ``where`` and the cell
    when it is not such a notebook."""
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise NotebookError(f"{where} is not a Jupyter notebook (no list of 'cells')")
    if notebook.get("nbformat") != 4:
        raise NotebookError(
            f"{where} is nbformat {notebook.get('nbformat')!r}; seer continues nbformat 4 notebooks "
            "(convert it with: jupyter nbconvert --to notebook --inplace FILE)"
        )
    cells: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(notebook["cells"]):
        kind = raw.get("cell_type") if isinstance(raw, dict) else None
        if kind not in ("code", "markdown", "raw"):
            raise NotebookError(f"{where}: cell {number} is not a code, markdown or raw cell")
        cell = json.loads(json.dumps(raw))
        cell["source"] = source_text(cell.get("source", ""))
        cell.setdefault("metadata", {})
        if not isinstance(cell.get("id"), str) or not CELL_ID.match(cell["id"]) or cell["id"] in seen:
            cell["id"] = new_cell_id()
        seen.add(cell["id"])
        if kind == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
        cells.append(cell)
    metadata = notebook.get("metadata")
    return cells, dict(metadata) if isinstance(metadata, dict) else {}


def check_source(source: object) -> str:
    """``source`` if it is a cell's source (a string); else :class:`~seer.errors.NotebookError`."""
    if not isinstance(source, str):
        raise NotebookError(f"a cell's source must be a string, not {type(source).__name__}")
    return source


def source_text(source: Any) -> str:
    """A cell's source as one string (nbformat allows a list of lines)."""
    return "".join(source) if isinstance(source, list) else str(source)


CELL_ID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")
