"""A cell move is never dropped: a writer whose pending changes cover every cell (a cell updated
the displays of others: any may have changed) and that then moves a cell (a cell put where the
kernel's order says, once another writer's cell came in) puts both into the live document. The
move used to be dropped (its mark was lost in "every cell"), so every writer and the saved
``.ipynb`` kept the old order."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from seer.notebook.document import ALL_CHANGED, ORDER_CHANGED, NotebookDocument


def _cell(cid: str, source: str) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "id": cid,
        "source": source,
        "metadata": {},
        "outputs": [],
        "execution_count": None,
    }


@pytest.mark.unit
def test_a_move_while_every_cell_is_pending_is_kept() -> None:
    nb = NotebookDocument({}, [_cell("a", "1"), _cell("b", "2"), _cell("c", "3")])
    nb.mark_all()
    assert nb.take_changes() is None  # every cell, nothing moved: as before
    nb.mark_all()
    nb.cells.insert(0, nb.cells.pop(2))
    nb.mark(nb.cells[0])
    nb.mark_order()
    assert nb.take_changes() == {"c", ORDER_CHANGED, ALL_CHANGED}
    assert nb.take_changes() == set()
    # a move noted before every cell was marked is kept too
    nb.mark(nb.cells[0])
    nb.mark_order()
    nb.mark_all()
    assert nb.take_changes() == {"c", ORDER_CHANGED, ALL_CHANGED}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Any, Any]]:
    pytest.importorskip("jupyter_server_ydoc")
    pytest.importorskip("websocket")
    from seer import Sandbox, SandboxConfig
    from seer.execution import create_notebook_session

    sandbox = Sandbox(SandboxConfig(timeout=600)).start()
    try:
        session = create_notebook_session(sandbox, name="main", outputs_dir=False)
        url = session.jupyter_url
        session.detach()
        yield sandbox, url
    finally:
        sandbox.terminate()


def _order(live: Any) -> list[str]:
    return [str(c.get("id")) for c in live.pull()[0]]


def _until(what: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.e2e
@pytest.mark.slow
def test_two_writers_a_move_with_every_cell_pending_reaches_the_other(server: tuple[Any, Any]) -> None:
    from seer.notebook import JupyterClient
    from seer.notebook.live import LiveNotebook

    sandbox, url = server
    path = "notebooks/moves.ipynb"
    first = [_cell("a1", "x = 1"), _cell("a2", "display('x', display_id='d')")]
    sandbox.write_file(path, json.dumps({"cells": first, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    a = LiveNotebook(JupyterClient.from_url(url), path)
    b = LiveNotebook(JupyterClient.from_url(url), path)
    try:
        nb_a = NotebookDocument({}, json.loads(json.dumps(a.pull()[0])))
        nb_b = NotebookDocument({}, json.loads(json.dumps(b.pull()[0])))
        # B runs a cell: it comes in after A's
        nb_b.add(_cell("b1", "y = 2"))
        b.push(nb_b.cells, nb_b.take_changes())
        assert _until(lambda: _order(a) == ["a1", "a2", "b1"])
        nb_a.replace(json.loads(json.dumps(a.pull()[0])))
        # A: a cell of its own updated a2's display in place (any cell may have changed) ...
        shown = {"output_type": "display_data", "data": {"text/plain": "'y'"}, "metadata": {}}
        nb_a.cells[1]["outputs"] = [shown]
        nb_a.mark_all()
        # ... and, before that reached the document, it moves a1 after B's cell
        moved = nb_a.cells.pop(0)
        nb_a.cells.append(moved)
        nb_a.mark(moved)
        nb_a.mark_order()
        a.push(nb_a.cells, nb_a.take_changes())
        assert _until(lambda: _order(b) == ["a2", "b1", "a1"]), f"B sees {_order(b)}: A's move was dropped"
        held = {str(c["id"]): c for c in b.pull()[0]}
        assert held["a2"]["outputs"][0]["data"]["text/plain"] == "'y'", "A's display update was dropped"
        a.save()
        saved = json.loads(sandbox.read_file(path))["cells"]
        assert [c["id"] for c in saved] == ["a2", "b1", "a1"]
    finally:
        a.close()
        b.close()
