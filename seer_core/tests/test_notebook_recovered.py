"""Which recovered cells ``sync`` put into a notebook are twins of a writer's cell (the same run:
source, execution count and kernel) and go. Fast unit tests of the match; the race itself, with a
real sandbox and two writers, is in test_notebook_live.py."""

from __future__ import annotations

from typing import Any

import pytest
from seer.notebook import NotebookSession
from seer.notebook.handle import KERNEL_KEY, RECOVERED_KEY

pytestmark = pytest.mark.unit


def _session() -> NotebookSession:
    # no server is reached: the match reads only the cells it is given
    return NotebookSession(
        object(),  # type: ignore[arg-type]
        session_id="s",
        kernel_id="k",
        notebook_path="notebooks/n.ipynb",
        name="n",
    )


def _cell(
    cid: str, source: str, count: int | None, kernel: str | None, *, recovered: bool = False
) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if kernel is not None:
        metadata[KERNEL_KEY] = kernel
    if recovered:
        metadata[RECOVERED_KEY] = True
    return {
        "cell_type": "code",
        "id": cid,
        "source": source,
        "execution_count": count,
        "metadata": metadata,
        "outputs": [],
    }


def test_a_recovered_cell_goes_when_the_writers_cell_of_the_same_run_is_there() -> None:
    session = _session()
    cells = [
        _cell("rec", "a = 1\n", 1, "run-1", recovered=True),
        _cell("own", "a = 1", 1, "run-1"),
    ]
    assert session._recovered_twins(cells) == {"rec"}


@pytest.mark.parametrize(
    "own",
    [
        _cell("own", "a = 1", 1, "run-2"),  # another kernel (restarted): its counts start again
        _cell("own", "a = 1", 2, "run-1"),  # run again: another count
        _cell("own", "a = 2", 1, "run-1"),  # another source
        _cell("own", "a = 1", None, "run-1"),  # not run
    ],
)
def test_a_recovered_cell_of_another_run_stays(own: dict[str, Any]) -> None:
    session = _session()
    cells = [_cell("rec", "a = 1", 1, "run-1", recovered=True), own]
    assert session._recovered_twins(cells) == set()
    assert session._recovered, "the notebook holds a recovered cell: it is looked through again"


def test_of_two_handles_recovering_one_run_the_first_cell_stays() -> None:
    session = _session()
    cells = [
        _cell("rec", "a = 1", 1, "run-1", recovered=True),
        _cell("rec2", "a = 1", 1, "run-1", recovered=True),
    ]
    assert session._recovered_twins(cells) == {"rec2"}
    # and both go once the writer's own cell is there
    assert session._recovered_twins([*cells, _cell("own", "a = 1", 1, "run-1")]) == {"rec", "rec2"}
