"""Reading and editing a session's notebook through NotebookSession's public methods, on the local
provider: every edit reaches the notebook file in the sandbox and its local mirror (read back with
nbformat), re-run cells keep their place, bad indexes are refused with the index named, and an
existing ``.ipynb`` can be opened to be continued.

One sandbox and one session for the module; each test starts from a notebook it makes itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _notebook_kit import local_sandbox
from seer import Sandbox
from seer.errors import NotebookError
from seer.execution import create_notebook_session
from seer.notebook import NotebookSession, check_notebook_path, notebook_cells

pytest.importorskip("jupyter_server")
pytest.importorskip("websocket")
nbformat = pytest.importorskip("nbformat")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with local_sandbox(timeout=600) as box:
        yield box


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("seer-outputs")


@pytest.fixture(scope="module")
def session(sandbox: Sandbox, outputs: Path) -> Iterator[NotebookSession]:
    with create_notebook_session(sandbox, name="editing", outputs_dir=outputs) as nb:
        yield nb


@pytest.fixture
def fresh(session: NotebookSession, sandbox: Sandbox) -> NotebookSession:
    """The session on a notebook of its own for this test (the earlier one stays as it was)."""
    path = f"notebooks/t-{len(sandbox.exec('ls notebooks').stdout.split())}.ipynb"
    session.open(path, notebook={"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    return session


def on_disk(sandbox: Sandbox, session: NotebookSession) -> Any:
    """The notebook file in the sandbox (once the server saved the live document), read and
    validated with nbformat."""
    session.flush()
    nb = nbformat.reads(sandbox.read_file(session.notebook_path), as_version=4)
    nbformat.validate(nb)
    return nb


def sources(nb: Any) -> list[str]:
    return [c.source for c in nb.cells]


def test_insert_delete_move_set_source_and_clear_reach_the_file(
    fresh: NotebookSession, sandbox: Sandbox
) -> None:
    s = fresh
    s.exec("a = 1\na")
    s.exec("print('b')")
    s.insert_cell(1, "## between", "markdown")
    s.insert_cell(3, "c = 3")  # at the end
    s.insert_cell(0, "first = True")
    assert sources(on_disk(sandbox, s)) == ["first = True", "a = 1\na", "## between", "print('b')", "c = 3"]
    inserted = on_disk(sandbox, s).cells[0]
    assert inserted.cell_type == "code" and inserted.outputs == [] and inserted.execution_count is None

    removed = s.delete_cell(2)
    assert removed["source"] == "## between" and removed["cell_type"] == "markdown"
    s.move_cell(3, 0)  # "c = 3" to the front
    assert sources(on_disk(sandbox, s)) == ["c = 3", "first = True", "a = 1\na", "print('b')"]
    s.move_cell(0, 3)
    assert sources(on_disk(sandbox, s)) == ["first = True", "a = 1\na", "print('b')", "c = 3"]

    # A new source without running: the old outputs came from the old source, so they go.
    s.set_source(1, "a = 2\na")
    cell = on_disk(sandbox, s).cells[1]
    assert cell.source == "a = 2\na" and cell.outputs == [] and cell.execution_count is None
    assert on_disk(sandbox, s).cells[2].outputs[0]["text"] == "b\n"

    s.clear_outputs(2)
    assert on_disk(sandbox, s).cells[2].outputs == []
    s.exec("'x'")
    s.exec("'y'")
    s.clear_outputs()
    cells = on_disk(sandbox, s).cells
    assert all(c.outputs == [] and c.execution_count is None for c in cells)
    assert sources(on_disk(sandbox, s))[-2:] == ["'x'", "'y'"]
    # The local mirror holds the same notebook.
    assert s.local_path is not None
    assert nbformat.reads(s.local_path.read_text(), as_version=4).cells == on_disk(sandbox, s).cells


def test_run_cell_reruns_in_place(fresh: NotebookSession, sandbox: Sandbox) -> None:
    s = fresh
    s.exec("n = 0")
    s.exec("n += 1\nn")
    s.add_markdown("note")
    ident = s.cells[1]["id"]
    first_count = s.cells[1]["execution_count"]

    again = s.run_cell(1)
    assert again.result == "2" and again.execution_count is not None and again.execution_count > first_count
    assert len(s.cells) == 3 and s.cells[1]["id"] == ident
    cell = on_disk(sandbox, s).cells[1]
    assert cell.outputs[-1]["data"]["text/plain"] == "2" and cell.execution_count == again.execution_count

    changed = s.run_cell(1, source="n * 100")
    assert changed.result == "200"
    assert sources(on_disk(sandbox, s)) == ["n = 0", "n * 100", "note"]

    raised = s.run_cell(0, source="1 / 0")
    assert raised.error is not None and raised.error.ename == "ZeroDivisionError"
    assert on_disk(sandbox, s).cells[0].outputs[-1]["output_type"] == "error"
    with pytest.raises(NotebookError, match="cell 2 is a markdown cell: only code cells run"):
        s.run_cell(2)


def test_cell_is_a_copy(fresh: NotebookSession) -> None:
    fresh.exec("print('hi')")
    copy = fresh.cell(0)
    assert copy["source"] == "print('hi')" and copy["outputs"][0]["text"] == "hi\n"
    copy["source"] = "changed"
    assert fresh.cells[0]["source"] == "print('hi')"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.cell(-1), r"cell index -1 is negative \(cells count from 0\): .* has 2 cells"),
        (lambda s: s.cell(2), r"cell index 2 is out of range: .* has 2 cells \(indexes 0 to 1\)"),
        (lambda s: s.cell(True), "cell index True is not an integer"),
        (lambda s: s.cell("1"), "cell index '1' is not an integer"),
        (lambda s: s.delete_cell(1.0), "cell index 1.0 is not an integer"),
        (
            lambda s: s.insert_cell(3, "x"),
            r"cell index 3 is out of range: .*a new cell goes at 0 to 2; 2 appends",
        ),
        (lambda s: s.insert_cell(-1, "x"), "cell index -1 is negative"),
        (lambda s: s.insert_cell(0, "x", "python"), "cell_type 'python' is not one of"),
        (lambda s: s.insert_cell(0, 5), "source must be a string, not int"),
        (lambda s: s.move_cell(0, 2), "target index 2 is out of range"),
        (lambda s: s.move_cell(5, 0), "cell index 5 is out of range"),
        (lambda s: s.set_source(-3, "x"), "cell index -3 is negative"),
        (lambda s: s.clear_outputs(9), "cell index 9 is out of range"),
        (lambda s: s.run_cell(2), "cell index 2 is out of range"),
    ],
)
def test_bad_indexes_are_refused_and_change_nothing(
    fresh: NotebookSession, sandbox: Sandbox, call: Any, message: str
) -> None:
    fresh.exec("1")
    fresh.add_markdown("two")
    before = on_disk(sandbox, fresh)
    with pytest.raises(NotebookError, match=message):
        call(fresh)
    assert on_disk(sandbox, fresh) == before and len(fresh.cells) == 2


def test_open_an_existing_notebook_and_continue_it(session: NotebookSession, sandbox: Sandbox) -> None:
    session.exec("kept = 'from before'")
    previous = session.notebook_path
    previous_sources = sources(on_disk(sandbox, session))
    # An older notebook, written by another tool: list sources, no cell ids (nbformat 4.4).
    old = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Old work\n", "continued"]},
            {
                "cell_type": "code",
                "execution_count": 7,
                "metadata": {"tags": ["keep"]},
                "outputs": [{"output_type": "stream", "name": "stdout", "text": ["old\n"]}],
                "source": ["x = 41\n", "print('old')"],
            },
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 4,
    }
    sandbox.write_file("notebooks/old-work.ipynb", json.dumps(old))
    session.open("notebooks/old-work.ipynb")

    assert session.notebook_path == "notebooks/old-work.ipynb" and session.name == "old-work"
    assert [c["source"] for c in session.cells] == ["# Old work\ncontinued", "x = 41\nprint('old')"]
    assert "".join(session.cells[1]["outputs"][0]["text"]) == "old\n"
    # The kernel kept its variables and has not run the opened cells; run_cell does.
    assert session.exec("kept").result == "'from before'"
    assert session.run_cell(1).stdout == "old\n"
    assert session.exec("x + 1").result == "42"
    nb = on_disk(sandbox, session)
    assert sources(nb) == ["# Old work\ncontinued", "x = 41\nprint('old')", "kept", "x + 1"]
    assert nb.cells[1].metadata == {"tags": ["keep"]} and len({c.id for c in nb.cells}) == 4
    # The Jupyter session names the notebook now (attach finds it), and the mirror follows it.
    model = session.client.call("GET", f"/api/sessions/{session.session_id}")
    assert model["path"] == "notebooks/old-work.ipynb"
    assert session.local_path is not None and session.local_path.name == "old-work.ipynb"
    assert json.loads(session.local_path.read_text())["cells"][-1]["source"] == "x + 1"
    # The notebook it wrote before is left as it was.
    back = nbformat.reads(sandbox.read_file(previous), as_version=4)
    assert sources(back) == previous_sources


def test_open_refuses_what_it_cannot_continue(session: NotebookSession, sandbox: Sandbox) -> None:
    other = create_notebook_session(sandbox, name="owner", outputs_dir=False)
    try:
        path = session.notebook_path
        cases: list[tuple[Any, str]] = [
            (lambda: session.open("notebooks/none.ipynb"), "there is no notebook 'notebooks/none.ipynb'"),
            (lambda: session.open("../etc/x.ipynb"), "without '..'"),
            (lambda: session.open("/abs/x.ipynb"), "relative to the Jupyter server's root"),
            (lambda: session.open("notebooks/x.txt"), "does not name a notebook"),
            (lambda: session.open(other.notebook_path), f"is the notebook of session {other.session_id}"),
            (lambda: session.open(path, notebook={"cells": [], "nbformat": 4}), "already exists"),
            (
                lambda: session.open("notebooks/v3.ipynb", notebook={"cells": [], "nbformat": 3}),
                "nbformat 3; seer continues nbformat 4",
            ),
            (
                lambda: session.open(
                    "notebooks/bad.ipynb", notebook={"cells": [{"cell_type": "x"}], "nbformat": 4}
                ),
                "cell 0 is not a code, markdown or raw cell",
            ),
        ]
        for call, message in cases:
            with pytest.raises(NotebookError, match=message):
                call()
            assert session.notebook_path == path
    finally:
        other.shutdown()
    # Nothing refused was written.
    assert not sandbox.exec("ls notebooks/v3.ipynb").ok and not sandbox.exec("ls notebooks/bad.ipynb").ok


@pytest.mark.unit
def test_notebook_helpers() -> None:
    assert check_notebook_path("notebooks/a.ipynb") == "notebooks/a.ipynb"
    for bad in ("", "a.py", ".ipynb", "a/../b.ipynb", "/a.ipynb", 3):
        with pytest.raises(NotebookError):
            check_notebook_path(bad)
    cells, metadata = notebook_cells(
        {
            "nbformat": 4,
            "cells": [
                {"cell_type": "code", "source": ["a\n", "b"], "id": "dup"},
                {"cell_type": "raw", "source": "r", "id": "dup"},
            ],
        }
    )
    assert [c["source"] for c in cells] == ["a\nb", "r"]
    assert cells[0]["outputs"] == [] and cells[0]["execution_count"] is None and metadata == {}
    assert cells[0]["id"] == "dup" and cells[1]["id"] != "dup"
    with pytest.raises(NotebookError, match="no list of 'cells'"):
        notebook_cells({"nbformat": 4})
