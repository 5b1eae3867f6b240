"""Where a writer places its cell among other writers' cells (:class:`seer.notebook.order.ExecutionOrder`),
from what it knows: the kernel's messages it read, and the execution counts other writers put in the
live document, stamped with the kernel they come from.

A writer reads the kernel's messages only while it runs a cell (and when it flushes; an MCP server
that exits lets go of the kernel first): the cells other writers started after its last one are
known to it only from the document. Two MCP servers' last cells stayed out of execution order
(``…60, 62, 61``) when neither could tell. The end-to-end runs are ``test_notebook_live.py`` and
``plugins/mcp/tests/test_mcp_live_writers.py``; here the decision itself, on cells as the document
holds them, with the document's side (the replica's push) recorded instead of sent."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from seer.notebook.document import NotebookDocument
from seer.notebook.handle import KERNEL_KEY, RUNNING_KEY
from seer.notebook.order import ExecutionOrder

pytestmark = pytest.mark.unit

KERNEL = "kernel-run-1"


class _Pushed:
    """The replica's side of ``_place``: what it was asked to put into the live document."""

    version = 0

    def __init__(self) -> None:
        self.pushes: list[list[str]] = []

    def push(self, cells: list[dict[str, Any]], changed: set[str] | None) -> None:
        self.pushes.append([str(c["execution_count"]) for c in cells])

    def push_metadata(self, metadata: dict[str, Any]) -> None:
        pass


def _writer(seen: dict[str, int]) -> ExecutionOrder:
    """A writer that saw the kernel start the requests in ``seen`` (msg id: count), and no other."""
    order = ExecutionOrder.__new__(ExecutionOrder)
    order._started, order._counts_seen, order._kernel_run, order._reran = {}, set(), None, set()
    for msg_id, count in seen.items():
        order._note_started(msg_id, count, KERNEL)
    order._doc = _Pushed()  # type: ignore[assignment]
    order._doc_seen = 0
    order._doc_lock = threading.RLock()
    order._doc_metadata = "{}"
    return order


def _cell(count: int, *, running: str | None = None, kernel: str | None = KERNEL) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if running:
        metadata[RUNNING_KEY] = running
    if kernel:
        metadata[KERNEL_KEY] = kernel
    return {"cell_type": "code", "id": f"c{count}", "execution_count": count, "metadata": metadata}


def _placed(order: ExecutionOrder, cells: list[dict[str, Any]], mine: int) -> list[int]:
    order._nb = NotebookDocument({}, cells)
    order._place(next(c for c in cells if c["execution_count"] == mine))
    return [c["execution_count"] for c in order._nb.cells]


def test_a_writer_places_its_cell_before_a_later_cell_it_never_saw_start() -> None:
    """Writer of 61 stopped reading the kernel when 61 ended; 62 (another writer's, finished,
    stamped with this kernel) lies before it in the document: 61 goes before it."""
    writer = _writer({"m60": 60, "m61": 61})
    pushed = _Pushed()
    writer._doc = pushed  # type: ignore[assignment]
    assert _placed(writer, [_cell(60), _cell(62), _cell(61)], 61) == [60, 61, 62]
    assert pushed.pushes[-1] == ["60", "61", "62"]  # the new order went to the live document


def test_a_writer_places_its_cell_after_an_earlier_cell_known_only_from_the_document() -> None:
    """Writer of 62 (it attached after 61 started) finds 61 after its cell: 62 goes after it."""
    writer = _writer({"m62": 62})
    assert _placed(writer, [_cell(60), _cell(62), _cell(61)], 62) == [60, 61, 62]


def test_a_running_cell_whose_count_the_document_holds_is_placed_by_it() -> None:
    """Another writer's running cell whose start this writer did not see, with its count (this
    kernel's) in the document: it started before ours, so ours goes after it."""
    writer = _writer({"m63": 63})
    assert _placed(writer, [_cell(63), _cell(61, running="other")], 63) == [61, 63]
    # not started yet as far as anyone knows (no count): it waits to start, ours goes first
    waiting = _cell(61, running="other")
    waiting["execution_count"] = None
    assert _placed(_writer({"m63": 63}), [waiting, _cell(63)], 63) == [63, None]


def test_counts_of_another_kernel_or_unstamped_order_nothing() -> None:
    """A count from an earlier kernel (before a restart), or one with no kernel named that this
    writer never saw, says nothing about the order here: the cells stay as they are."""
    writer = _writer({"m61": 61})
    assert _placed(writer, [_cell(62, kernel="kernel-run-0"), _cell(61)], 61) == [62, 61]
    writer = _writer({"m61": 61})
    assert _placed(writer, [_cell(62, kernel=None), _cell(61)], 61) == [62, 61]
