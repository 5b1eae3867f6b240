"""Nothing the agent made is lost at teardown (local provider): ``terminate()`` and ``seer down``
copy the sandbox's notebooks (every cell, with its outputs) and ``outputs/`` to the client folder
fixed when the sandbox started, say where, refuse to delete what they could not copy, and a
sandbox that expires with no client keeps them retrievable too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from _teardown_kit import seer_down_from, wait_for
from seer import Sandbox, SandboxConfig
from seer.errors import SandboxError
from seer.execution import create_notebook_session
from seer.providers.local.provider import LocalProvider, sandbox_dir

pytest.importorskip("websocket")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SLOW = 60


@pytest.fixture
def started() -> Iterator[list[Sandbox]]:
    """Sandboxes a test starts; whatever is left is terminated (forced) at the end."""
    boxes: list[Sandbox] = []
    yield boxes
    for box in boxes:
        LocalProvider().terminate(box.sandbox_id)


def _research(sandbox: Sandbox) -> None:
    """What an agent leaves: a notebook with cells and outputs (not mirrored to the client, so
    only teardown can save it) and a file under outputs/."""
    session = create_notebook_session(sandbox, name="research", outputs_dir=False)
    try:
        session.add_markdown("## Finding")
        assert session.exec("print('answer', 6 * 7)").ok
        assert session.exec(
            "import pathlib; pathlib.Path('outputs').mkdir(exist_ok=True); "
            "pathlib.Path('outputs/result.txt').write_text('42')"
        ).ok
    finally:
        session.shutdown()


def _cells(path: Path) -> list[tuple[str, str]]:
    nb = json.loads(path.read_text())
    out = []
    for cell in nb["cells"]:
        # the Jupyter server saves multi-line strings as lists of lines
        text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))
        out.append(("".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"], text))
    return out


def _assert_kept(folder: Path) -> None:
    cells = _cells(folder / "research.ipynb")
    assert ("## Finding", "") in cells
    assert ("print('answer', 6 * 7)", "answer 42\n") in cells
    assert (folder / "outputs" / "result.txt").read_text() == "42"


def test_terminate_keeps_notebooks_and_outputs_on_the_client(
    started: list[Sandbox],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SEER_OUTPUTS_DIR", str(tmp_path / "kept"))
    sandbox = Sandbox(SandboxConfig(timeout=600)).start()
    started.append(sandbox)
    folder = tmp_path / "kept" / sandbox.sandbox_id
    _research(sandbox)
    capsys.readouterr()

    sandbox.terminate()

    assert not (sandbox_dir(sandbox.sandbox_id) / "root").exists()
    _assert_kept(folder)
    assert not (folder / ".ipynb_checkpoints").exists()
    assert f"kept in {folder}" in capsys.readouterr().err
    assert sandbox.outputs_dir == folder


def test_seer_down_from_elsewhere_keeps_them_where_the_sandbox_started(
    started: list[Sandbox], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No SEER_OUTPUTS_DIR: ./seer-outputs/<id>/ of the directory the sandbox started in, even
    when `seer down` runs somewhere else."""
    monkeypatch.delenv("SEER_OUTPUTS_DIR")
    (tmp_path / "project").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    sandbox = Sandbox(SandboxConfig(timeout=600)).start()
    started.append(sandbox)
    _research(sandbox)
    folder = tmp_path / "project" / "seer-outputs" / sandbox.sandbox_id

    down = seer_down_from(tmp_path / "elsewhere", sandbox.sandbox_id)

    assert (down.returncode, down.stdout) == (0, f"{sandbox.sandbox_id}: terminated\n"), down.stderr
    assert f"kept in {folder}" in down.stderr
    _assert_kept(folder)
    assert not (tmp_path / "elsewhere" / "seer-outputs").exists()


def test_a_failed_copy_deletes_nothing_and_force_goes_on(
    started: list[Sandbox], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the outputs folder should go")
    monkeypatch.setenv("SEER_OUTPUTS_DIR", str(blocker))
    sandbox = Sandbox(SandboxConfig(timeout=600, execution_mode="cli")).start()
    started.append(sandbox)
    sandbox.write_file("notebooks/n.ipynb", json.dumps({"cells": [], "nbformat": 4}))

    with pytest.raises(SandboxError, match="Nothing was deleted") as err:
        sandbox.terminate()
    assert str(blocker) in str(err.value) and "force" in str(err.value)
    assert sandbox.status.alive and sandbox.read_file("notebooks/n.ipynb")

    sandbox.terminate(force=True)
    assert not sandbox.status.alive
    # the local provider still kept them, in seer's home, since the client folder was unusable
    meta = json.loads((sandbox_dir(sandbox.sandbox_id) / "meta.json").read_text())
    assert (Path(meta["kept"]) / "n.ipynb").is_file()


def test_a_sandbox_that_expires_with_no_client_keeps_its_notebooks(
    started: list[Sandbox], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEER_OUTPUTS_DIR", str(tmp_path / "kept"))
    sandbox = Sandbox(SandboxConfig(timeout=30)).start()
    started.append(sandbox)
    _research(sandbox)
    folder = tmp_path / "kept" / sandbox.sandbox_id
    meta_path = sandbox_dir(sandbox.sandbox_id) / "meta.json"

    # nobody terminates it: its supervisor tears it down when the timeout passes
    assert wait_for(lambda: json.loads(meta_path.read_text())["status"] == "expired", timeout=30 + SLOW)
    assert not (sandbox_dir(sandbox.sandbox_id) / "root").exists()
    _assert_kept(folder)
    assert json.loads(meta_path.read_text())["kept"] == str(folder)
    assert f"kept in {folder}" in (sandbox_dir(sandbox.sandbox_id) / "logs" / "supervisor.log").read_text()


def _nb(cells: list[str]) -> str:
    return json.dumps({"cells": [{"cell_type": "markdown", "source": c} for c in cells], "nbformat": 4})


@pytest.mark.unit
def test_a_copy_never_silently_replaces_a_different_client_file(tmp_path: Path) -> None:
    """Identical: left alone. A notebook the sandbox's copy only extends: brought up to date.
    Anything else: the sandbox's copy is written beside it, and the summary says so."""
    from seer.outputs import keep_tree

    root, dest = tmp_path / "sandbox", tmp_path / "client"
    (root / "notebooks").mkdir(parents=True)
    (root / "outputs").mkdir()
    (root / "notebooks" / "same.ipynb").write_text(_nb(["a"]))
    (root / "notebooks" / "grown.ipynb").write_text(_nb(["a", "b"]))
    (root / "notebooks" / "edited.ipynb").write_text(_nb(["a", "b"]))
    (root / "outputs" / "table.csv").write_text("x\n1\n")
    dest.mkdir()
    (dest / "outputs").mkdir()
    (dest / "same.ipynb").write_text(_nb(["a"]))
    # the same cells, laid out differently (as Jupyter's contents API writes them): still "only extends"
    (dest / "grown.ipynb").write_text(json.dumps(json.loads(_nb(["a"])), indent=4))
    (dest / "edited.ipynb").write_text(_nb(["mine"]))
    (dest / "outputs" / "table.csv").write_text("x\n2\n")

    kept = keep_tree(root, dest)

    assert (dest / "same.ipynb").read_text() == _nb(["a"])
    assert (dest / "grown.ipynb").read_text() == _nb(["a", "b"])
    assert (dest / "edited.ipynb").read_text() == _nb(["mine"])
    assert (dest / "edited.sandbox.ipynb").read_text() == _nb(["a", "b"])
    assert (dest / "outputs" / "table.csv").read_text() == "x\n2\n"
    assert (dest / "outputs" / "table.sandbox.csv").read_text() == "x\n1\n"
    assert sorted(p.name for p in kept.beside) == ["edited.sandbox.ipynb", "table.sandbox.csv"]
    assert "2 differed from the copy already there" in kept.summary("local-x")
    # notebooks copied to the client are private to the user, as its records are
    for name in ("grown.ipynb", "edited.sandbox.ipynb"):
        assert (dest / name).stat().st_mode & 0o777 == 0o600, name
    # a second copy of the same files adds nothing more
    again = keep_tree(root, dest)
    assert sorted(p.name for p in again.beside) == ["edited.sandbox.ipynb", "table.sandbox.csv"]
    assert not list(dest.glob("*.sandbox-2*")) and not list((dest / "outputs").glob("*.sandbox-2*"))


@pytest.mark.unit
def test_a_client_copy_ahead_of_the_sandbox_copy_is_left_alone(tmp_path: Path) -> None:
    """A live mirror written after the sandbox last saved holds the sandbox's cells and more: it
    is left as it is and nothing is written beside it (a teardown under a busy writer wrote the
    older notebook beside it as ``.sandbox.ipynb``). A client copy that lacks one of the sandbox's
    cells still gets the sandbox's written beside it."""
    from seer.outputs import keep_tree

    root, dest = tmp_path / "sandbox", tmp_path / "client"
    (root / "notebooks").mkdir(parents=True)
    dest.mkdir()
    (root / "notebooks" / "ahead.ipynb").write_text(json.dumps(json.loads(_nb(["a", "b"])), indent=1))
    (dest / "ahead.ipynb").write_text(_nb(["a", "b", "c"]))
    (root / "notebooks" / "apart.ipynb").write_text(_nb(["a", "x"]))
    (dest / "apart.ipynb").write_text(_nb(["a", "b", "c"]))

    kept = keep_tree(root, dest)

    assert (dest / "ahead.ipynb").read_text() == _nb(["a", "b", "c"])
    assert dest / "ahead.ipynb" in kept.unchanged
    assert sorted(p.name for p in kept.beside) == ["apart.sandbox.ipynb"]
    assert (dest / "apart.sandbox.ipynb").read_text() == _nb(["a", "x"])


@pytest.mark.unit
def test_a_notebook_caught_mid_save_is_kept_as_jupyter_last_saved_it(tmp_path: Path) -> None:
    """Jupyter's server saves a notebook by copying it to ``.~<name>``, writing ``<name>`` in
    place, then deleting the copy: a teardown copy that caught ``<name>`` half-written (empty, or
    cut off) keeps the whole notebook from ``.~<name>``, never the torn one."""
    from seer.outputs import keep_tree

    root, dest = tmp_path / "sandbox", tmp_path / "client"
    (root / "notebooks").mkdir(parents=True)
    (root / "notebooks" / ".~torn.ipynb").write_text(_nb(["a", "b"]))
    (root / "notebooks" / "torn.ipynb").write_text(_nb(["a", "b", "c"])[:20])
    (root / "notebooks" / ".~empty.ipynb").write_text(_nb(["x"]))
    (root / "notebooks" / "empty.ipynb").write_text("")

    kept = keep_tree(root, dest)

    assert (dest / "torn.ipynb").read_text() == _nb(["a", "b"])
    assert (dest / "empty.ipynb").read_text() == _nb(["x"])
    # (and the folder's lock, which every writer of a client copy takes: seer.outputs.COPIES_RECORD)
    assert sorted(p.name for p in dest.iterdir()) == [".seer-copies", "empty.ipynb", "torn.ipynb"]
    assert not kept.beside


@pytest.mark.unit
def test_a_notebook_saved_with_lines_is_the_same_as_the_client_copy_with_strings(tmp_path: Path) -> None:
    """The Jupyter server saves a live document's text as lists of lines; the client copy holds the
    same text as strings. The same notebook, so it is brought up to date, not written beside."""
    from seer.outputs import keep_tree

    code = {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "x = 1\nx"}
    code["outputs"] = [
        {"name": "stdout", "output_type": "stream", "text": "a\nb\n"},
        {
            "data": {"text/plain": "1", "application/json": {"k": ["v"]}},
            "execution_count": 1,
            "metadata": {},
            "output_type": "execute_result",
        },
    ]
    as_lines = {**code, "source": ["x = 1\n", "x"]}
    as_lines["outputs"] = [
        {**code["outputs"][0], "text": ["a\n", "b\n"]},
        {**code["outputs"][1], "data": {"text/plain": ["1"], "application/json": {"k": ["v"]}}},
    ]
    root, dest = tmp_path / "sandbox", tmp_path / "client"
    (root / "notebooks").mkdir(parents=True)
    dest.mkdir()
    (dest / "nb.ipynb").write_text(json.dumps({"cells": [code], "nbformat": 4}))
    saved = json.dumps({"cells": [as_lines, {"cell_type": "markdown", "source": ["more"]}], "nbformat": 4})
    (root / "notebooks" / "nb.ipynb").write_text(saved)
    # the same cells in the other layout: the client's copy is left as it is
    mine = json.dumps({"cells": [code], "nbformat": 4})
    (dest / "same.ipynb").write_text(mine)
    (root / "notebooks" / "same.ipynb").write_text(json.dumps({"cells": [as_lines], "nbformat": 4}))
    # a cell whose text really differs is still a different notebook
    (dest / "other.ipynb").write_text(json.dumps({"cells": [code], "nbformat": 4}))
    changed = {**as_lines, "source": ["x = 2\n", "x"]}
    (root / "notebooks" / "other.ipynb").write_text(json.dumps({"cells": [changed], "nbformat": 4}))

    kept = keep_tree(root, dest)

    assert (dest / "nb.ipynb").read_text() == saved
    assert (dest / "same.ipynb").read_text() == mine
    assert [p.name for p in kept.beside] == ["other.sandbox.ipynb"]
    assert dest / "same.ipynb" in kept.unchanged


#: A writer in the sandbox that saves ``notebooks/live.ipynb`` the way Jupyter's contents manager
#: does (a temporary ``.~live.ipynb`` renamed into place), one more cell each time, as fast as it can.
_SAVER = r"""
import json, os, pathlib, sys
folder = pathlib.Path("notebooks"); folder.mkdir(exist_ok=True)
n = 0
while True:
    n += 1
    cells = [{"cell_type": "markdown", "metadata": {}, "source": f"cell {i}"} for i in range(n)]
    tmp = folder / ".~live.ipynb"
    tmp.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    os.replace(tmp, folder / "live.ipynb")
    if n == 3:
        (folder / "saving").write_text("")
"""


def test_teardown_while_a_notebook_is_being_saved_never_refuses_and_loses_nothing(
    started: list[Sandbox], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #22: a temporary file vanishing during the copy made terminate() refuse. 50 times:
    a sandbox whose notebook is being saved over and over is torn down; each time the copy is a
    whole notebook holding at least the cells saved before teardown began, and no temporary file."""
    monkeypatch.setenv("SEER_OUTPUTS_DIR", str(tmp_path / "kept"))
    for _round in range(50):
        sandbox = Sandbox(SandboxConfig(timeout=600, execution_mode="cli")).start()
        started.append(sandbox)
        sandbox.machine.start_process([sandbox.machine.python, "-c", _SAVER], name="saver")
        assert wait_for(lambda s=sandbox: s.exec("test -e notebooks/saving").exit_code == 0, timeout=SLOW)
        before = len(json.loads(sandbox.read_file("notebooks/live.ipynb"))["cells"])

        sandbox.terminate()  # raised "could not copy ... .~live.ipynb: No such file" before

        assert not sandbox.status.alive
        folder = tmp_path / "kept" / sandbox.sandbox_id
        cells = json.loads((folder / "live.ipynb").read_text())["cells"]
        assert len(cells) >= before >= 3
        assert [c["source"] for c in cells] == [f"cell {i}" for i in range(len(cells))]
        assert not list(folder.glob(".~*"))


@pytest.mark.unit
def test_a_tree_is_copied_as_found_while_files_vanish(tmp_path: Path) -> None:
    """The local provider's get_dir: files renamed away while the tree is walked are skipped,
    never an error; everything that stays is copied."""
    import threading

    from seer.providers.local.provider import copy_tree_as_found

    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "kept.txt").write_text("kept")
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            for i in range(20):
                (src / f".~{i}.tmp").write_text("x")
            for i in range(20):
                (src / f".~{i}.tmp").replace(src / "renamed.txt")

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        for n in range(200):
            copy_tree_as_found(src, tmp_path / f"copy{n % 4}")
    finally:
        stop.set()
        worker.join()
    assert (tmp_path / "copy0" / "sub" / "kept.txt").read_text() == "kept"
    with pytest.raises(FileNotFoundError):
        copy_tree_as_found(tmp_path / "missing", tmp_path / "copy")


def _code(cid: str, source: str, text: str | None, *, running: bool = False) -> dict[str, object]:
    return {
        "cell_type": "code",
        "id": cid,
        "source": source,
        "metadata": {"seer_running": True} if running else {},
        "execution_count": None if running else 1,
        "outputs": [] if text is None else [{"output_type": "stream", "name": "stdout", "text": text}],
    }


@pytest.mark.unit
def test_a_sandbox_copy_saved_mid_cell_is_not_written_beside_a_client_copy_holding_it(tmp_path: Path) -> None:
    """The sandbox saved a cell while it ran (marked running, part of its output); the client copy
    has the cell finished, and later cells: the sandbox's copy adds nothing, so nothing is written
    beside it (it was, as clutter). A running cell whose output the client copy lacks is still
    written beside it."""
    from seer.outputs import keep_tree

    root, dest = tmp_path / "sandbox", tmp_path / "client"
    (root / "notebooks").mkdir(parents=True)
    dest.mkdir()
    done = _code("a", "print(1)", "1\n")
    mid = {
        "cells": [done, _code("b", "loop()", "step 1\n", running=True)],
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    full = {
        "cells": [done, _code("b", "loop()", "step 1\nstep 2\n"), _code("c", "x = 2", None)],
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (root / "notebooks" / "mid.ipynb").write_text(json.dumps(mid, indent=1))
    (dest / "mid.ipynb").write_text(json.dumps(full))
    other = {"cells": [done, _code("b", "loop()", "another run\n", running=True)], "nbformat": 4}
    (root / "notebooks" / "other.ipynb").write_text(json.dumps(other))
    (dest / "other.ipynb").write_text(json.dumps(full))

    kept = keep_tree(root, dest)

    assert json.loads((dest / "mid.ipynb").read_text()) == full
    assert dest / "mid.ipynb" in kept.unchanged
    assert [p.name for p in kept.beside] == ["other.sandbox.ipynb"]
    assert not (dest / "mid.sandbox.ipynb").exists()
