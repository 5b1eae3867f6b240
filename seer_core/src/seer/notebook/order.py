"""Execution order in a shared notebook: the cells of several writers (sessions, MCP servers)
race to the kernel and to the live document; a session places each of its cells where the
kernel's order (execution counts, and which requests it started) puts it among the others."""

from __future__ import annotations

from typing import Any

from seer.notebook.handle import KERNEL_KEY, RUNNING_KEY
from seer.notebook.replica import NotebookReplica


class ExecutionOrder(NotebookReplica):
    """Where this session's cells go among other writers' cells (the kernel's order)."""

    def _note_started(self, msg_id: str, count: Any, kernel_run: Any = None) -> None:
        count = count if isinstance(count, int) else None
        if isinstance(kernel_run, str) and kernel_run and kernel_run != self._kernel_run:
            if self._kernel_run is not None:  # a kernel started since: its counts start again
                self._counts_seen.clear()
            self._kernel_run = kernel_run
        self._started[msg_id] = count
        if count is not None:
            self._counts_seen.add(count)
        if len(self._started) > 4096:
            for old in list(self._started)[:2048]:
                del self._started[old]

    def _stamp(self, cell: dict[str, Any]) -> None:
        """Name the kernel ``cell``'s execution count comes from (see :data:`KERNEL_KEY`)."""
        if self._kernel_run is not None and isinstance(cell.get("metadata"), dict):
            cell["metadata"][KERNEL_KEY] = self._kernel_run

    def _other_kernel(self, other: dict[str, Any]) -> bool:
        """Whether ``other``'s count comes from another kernel than this one's (an earlier one,
        before a restart): such counts say nothing about the order here."""
        theirs = (other.get("metadata") or {}).get(KERNEL_KEY)
        return theirs is not None and self._kernel_run is not None and theirs != self._kernel_run

    def _this_kernel(self, other: dict[str, Any], count: Any) -> bool:
        """Whether ``count`` (``other``'s execution count) orders ``other`` against this kernel's
        cells: this session saw the kernel start it, or its writer stamped it with this kernel
        (see :data:`KERNEL_KEY`). A session reads the kernel's messages only while it runs a cell
        (and when it flushes), so the counts of cells other writers started after its last one
        are known to it only from the document: without them it could not place its cells
        against those (an MCP server, which lets go of the kernel before its last placement,
        never could), and the last cells of two writers could stay out of order (issue #22)."""
        if not isinstance(count, int):
            return False
        if count in self._counts_seen:
            return True
        theirs = (other.get("metadata") or {}).get(KERNEL_KEY)
        return self._kernel_run is not None and theirs == self._kernel_run

    def _ran_after(self, other: dict[str, Any], count: int) -> bool:
        """Whether code cell ``other`` runs (or ran) after the cell with execution count
        ``count`` in this kernel: it waits to start, or started later."""
        if self._other_kernel(other):
            return False
        request = (other.get("metadata") or {}).get(RUNNING_KEY)
        if request:
            if request in self._started:
                started = self._started[request]
            else:  # its writer put its count in the document as the kernel started it
                theirs = other.get("execution_count")
                started = theirs if self._this_kernel(other, theirs) else None
            return started is None or started > count
        if str(other.get("id")) in self._reran:
            return False
        theirs = other.get("execution_count")
        return isinstance(theirs, int) and theirs > count and self._this_kernel(other, theirs)

    def _ran_before(self, other: dict[str, Any], count: int) -> bool:
        """Whether code cell ``other`` started before the cell with execution count ``count``
        in this kernel."""
        if self._other_kernel(other):
            return False
        request = (other.get("metadata") or {}).get(RUNNING_KEY)
        if not request and str(other.get("id")) in self._reran:
            return False
        theirs = self._started.get(request) if request else None
        if theirs is None:
            theirs = other.get("execution_count")
        return isinstance(theirs, int) and theirs < count and self._this_kernel(other, theirs)

    def _place_recent(self, how_many: int) -> None:
        """(Live document.) Place this session's last cells again, if other writers changed the
        document since they were placed: their cells may have come in after ours were placed."""
        doc = self._doc
        if doc is None or doc.version == self._placed_at:
            return
        with self._doc_lock:
            self._placed_at = doc.version
            for cell, count in list(self._recent)[-how_many:]:
                if cell.get("execution_count") == count:  # not run again in place since
                    self._place(cell)

    def _place(self, cell: dict[str, Any]) -> None:
        """(Live document.) The kernel started ``cell`` (or finished it): it goes before the cells
        other writers put just ahead of it that the kernel runs after it (they wait to start, or
        started later), so the notebook stays in execution order however the writers' requests
        raced to the kernel and to the document; its count goes into the document now."""
        count = cell.get("execution_count")
        if self._doc is None or not isinstance(count, int) or self._other_kernel(cell):
            return  # a cell of an earlier kernel stays where it is: its count orders nothing now
        with self._doc_lock:
            self._pull()
            cells = self._nb.cells
            at = self._nb.index_of(cell)
            if at is None:
                return
            # Other cells (markdown, a person's notes) between are passed only on the way to a
            # code cell it must go before (after).
            to = at
            for i in range(at - 1, -1, -1):
                if cells[i].get("cell_type") != "code":
                    continue
                if not self._ran_after(cells[i], count):
                    break
                to = i
            if to == at:  # or after the cells put just behind it that the kernel ran first
                for i in range(at + 1, len(cells)):
                    if cells[i].get("cell_type") != "code":
                        continue
                    if not self._ran_before(cells[i], count):
                        break
                    to = i
            if to != at:
                cells.insert(to, cells.pop(at))
                self._nb.mark(cell)
                self._nb.mark_order()
                self._nb.invalidate()
            self._push()
