"""The client copy of a notebook only moves forward (:func:`seer.outputs.write_client_copy`): several
writers (sessions, MCP servers) keep one copy, each from its own replica of the live document, and
one whose replica is behind must never replace a copy written from a newer state of it. Teardown's
copy takes the same lock, so a live writer cannot land between its check of a file and its copy.

The replicas here are real pycrdt documents exchanging real updates; the end-to-end run with two
sessions on one Jupyter server is in ``test_notebook_live.py``."""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path

import pytest
from seer.outputs import COPIES_RECORD, CopyWrite, keep_tree, state_covers, state_vector, write_client_copy

pycrdt = pytest.importorskip("pycrdt")

pytestmark = pytest.mark.unit


def _nb(cells: list[str]) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "id": c, "source": c} for c in cells], "nbformat": 4})


class Writer:
    """A replica of one document: its cells are an array of sources."""

    def __init__(self) -> None:
        self.doc = pycrdt.Doc()
        self.cells = self.doc.get("cells", type=pycrdt.Array)

    def add(self, source: str) -> None:
        self.cells.append(source)

    def receive(self, other: Writer) -> None:
        self.doc.apply_update(other.doc.get_update(self.doc.get_state()))

    def text(self) -> str:
        return _nb(list(self.cells))

    def state(self) -> bytes:
        return bytes(self.doc.get_state())


def test_state_vectors_are_read_as_pycrdt_writes_them() -> None:
    a, b = Writer(), Writer()
    for i in range(200):  # clocks past one byte of the variable-length encoding
        a.add(f"x{i}")
    b.receive(a)
    b.add("y")
    sa, sb = state_vector(a.state()), state_vector(b.state())
    assert sa == {str(a.doc.client_id): 200}
    assert sb == {str(a.doc.client_id): 200, str(b.doc.client_id): 1}
    assert state_covers(sb, sa) and not state_covers(sa, sb)
    assert state_vector(pycrdt.Doc().get_state()) == {}


def test_a_writer_behind_never_replaces_a_newer_copy(tmp_path: Path) -> None:
    copy = tmp_path / "client" / "research.ipynb"
    ahead, behind = Writer(), Writer()
    ahead.add("a = 1")
    behind.receive(ahead)
    stale_text, stale_state = behind.text(), behind.state()  # rendered, not yet written
    ahead.add("b = 2")
    assert write_client_copy(copy, ahead.text(), ahead.state())[0] is CopyWrite.WRITTEN

    done, held = write_client_copy(copy, stale_text, stale_state)

    assert done is CopyWrite.KEPT and held == state_vector(ahead.state())
    assert copy.read_text() == _nb(["a = 1", "b = 2"])
    # caught up, the same writer writes again
    behind.receive(ahead)
    behind.add("c = 3")
    assert write_client_copy(copy, behind.text(), behind.state())[0] is CopyWrite.WRITTEN
    assert copy.read_text() == _nb(["a = 1", "b = 2", "c = 3"])
    assert copy.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in copy.parent.iterdir()) == [COPIES_RECORD, "research.ipynb"]


def test_writers_that_each_lack_the_others_change_are_told_and_nothing_is_lost(tmp_path: Path) -> None:
    copy = tmp_path / "research.ipynb"
    one, two = Writer(), Writer()
    one.add("mine")
    two.add("theirs")
    assert write_client_copy(copy, one.text(), one.state())[0] is CopyWrite.WRITTEN

    done, held = write_client_copy(copy, two.text(), two.state())
    assert done is CopyWrite.DIVERGED and held == state_vector(one.state())
    assert copy.read_text() == _nb(["mine"])

    # forced (the replica did not catch up): written, and the copy it replaced kept beside it
    assert write_client_copy(copy, two.text(), two.state(), force=True)[0] is CopyWrite.WRITTEN
    assert copy.read_text() == _nb(["theirs"])
    assert (tmp_path / "research.earlier.ipynb").read_text() == _nb(["mine"])


def test_a_write_with_no_live_document_replaces_and_forgets_the_state(tmp_path: Path) -> None:
    copy = tmp_path / "research.ipynb"
    w = Writer()
    w.add("a")
    write_client_copy(copy, w.text(), w.state())
    assert write_client_copy(copy, _nb(["alone"]), None)[0] is CopyWrite.WRITTEN
    assert json.loads((tmp_path / COPIES_RECORD).read_text()) == {}
    # a copy deleted by hand is written again, whatever state it was last written at
    copy.unlink()
    assert write_client_copy(copy, _nb(["again"]), Writer().state())[0] is CopyWrite.WRITTEN


def test_teardown_copy_waits_for_a_writer_holding_the_folder(tmp_path: Path) -> None:
    """Teardown checks a client file and copies the sandbox's over it in one step under the
    folder's lock: a live writer's newer copy written meanwhile is never replaced by the older
    sandbox copy (it used to be able to land between the check and the copy)."""
    root, dest = tmp_path / "sandbox", tmp_path / "client"
    (root / "notebooks").mkdir(parents=True)
    dest.mkdir()
    (root / "notebooks" / "research.ipynb").write_text(_nb(["a", "b"]))
    (dest / "research.ipynb").write_text(_nb(["a"]))  # the sandbox's copy extends it: replaced

    fd = os.open(dest / COPIES_RECORD, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a live writer in the middle of its write
    kept: list[object] = []
    teardown = threading.Thread(target=lambda: kept.append(keep_tree(root, dest)))
    try:
        teardown.start()
        teardown.join(timeout=2)
        assert teardown.is_alive(), "teardown copied into the folder while a writer held it"
        (dest / "research.ipynb").write_text(_nb(["a", "b", "c"]))  # the writer's newer copy
    finally:
        os.close(fd)
    teardown.join(timeout=30)
    assert not teardown.is_alive()

    assert (dest / "research.ipynb").read_text() == _nb(["a", "b", "c"])
    assert not list(dest.glob("*.sandbox*"))


class FakeLive:
    """A session's live document, as the writer sees it: one that receives ``pending`` (another
    writer's update in transit) once the writer waits for it."""

    def __init__(self, writer: Writer, pending: Writer | None) -> None:
        self.writer, self.pending, self.waited = writer, pending, 0

    def wait_state(self, covers: object, timeout: float) -> bool:
        self.waited += 1
        if self.pending is not None:
            self.writer.receive(self.pending)
        return bool(covers(self.writer.state()))  # type: ignore[operator]

    def request_save(self) -> None:
        pass

    save_error = None


class FakeSession:
    """What :func:`seer.notebook.write_notebook` reads of a session, over a real replica."""

    def __init__(self, path: Path, writer: Writer, pending: Writer | None = None) -> None:
        self.local_path, self.replica = path, writer
        self.live = FakeLive(writer, pending)

    def save(self) -> None:
        from seer.notebook import write_notebook

        write_notebook(self, self.replica.text(), state=self.replica.state())  # type: ignore[arg-type]


def test_a_writer_that_diverged_waits_for_the_copys_changes_and_writes_both(tmp_path: Path) -> None:
    from seer.notebook import write_notebook

    copy = tmp_path / "research.ipynb"
    one, two = Writer(), Writer()
    one.add("a = 1")
    two.receive(one)
    one.add("b = 2")  # in transit to two
    two.add("c = 3")
    write_client_copy(copy, one.text(), one.state())
    session = FakeSession(copy, two, pending=one)

    write_notebook(session, two.text(), state=two.state())  # type: ignore[arg-type]

    assert session.live.waited == 1
    assert sorted(json.loads(copy.read_text())["cells"], key=str) == sorted(
        json.loads(_nb(["a = 1", "b = 2", "c = 3"]))["cells"], key=str
    )
    assert not list(tmp_path.glob("*.earlier*"))


def test_a_copy_whose_changes_never_come_is_replaced_after_the_wait_and_kept_beside(tmp_path: Path) -> None:
    """The copy holds a cell this writer's replica never receives (the Jupyter server rebuilt the
    document from a file that lacked it): after the wait, written, the copy kept beside."""
    from seer.notebook import write_notebook

    copy = tmp_path / "research.ipynb"
    before, after = Writer(), Writer()
    before.add("lost = 1")
    write_client_copy(copy, before.text(), before.state())
    after.add("rebuilt = 1")
    session = FakeSession(copy, after)

    write_notebook(session, after.text(), state=after.state())  # type: ignore[arg-type]

    assert session.live.waited == 1
    assert copy.read_text() == _nb(["rebuilt = 1"])
    assert (tmp_path / "research.earlier.ipynb").read_text() == _nb(["lost = 1"])


def test_a_copy_whose_every_cell_the_text_holds_is_replaced_at_once(tmp_path: Path) -> None:
    """The document was rebuilt from the file (a restarted server): other writer ids, the same
    cells and more. Nothing the copy has is missing: written at once, nothing kept beside."""
    from seer.notebook import write_notebook

    copy = tmp_path / "research.ipynb"
    before, after = Writer(), Writer()
    before.add("x = 1")
    write_client_copy(copy, before.text(), before.state())
    after.add("x = 1")
    after.add("y = 2")
    session = FakeSession(copy, after)

    write_notebook(session, after.text(), state=after.state())  # type: ignore[arg-type]

    assert session.live.waited == 0
    assert copy.read_text() == _nb(["x = 1", "y = 2"])
    assert not list(tmp_path.glob("*.earlier*"))


def test_the_rendered_notebook_holds_every_cell_and_the_metadata_as_they_are() -> None:
    """What the client copy is written from: sources with the line separators JSON leaves as they
    are (U+2028, U+2029, U+0085) come back unchanged, and metadata changed between two renders
    is in the second."""
    from seer.notebook.document import NotebookDocument

    source = "a = '\u2028'\u2029b = '\x85'\n# é\n"
    cell = {
        "cell_type": "code",
        "id": "c1",
        "source": source,
        "metadata": {},
        "outputs": [],
        "execution_count": 1,
    }
    nb = NotebookDocument({"kernelspec": {"name": "python3"}}, [cell])
    first = json.loads(nb.render())
    assert first["cells"] == [cell] and first["metadata"] == {"kernelspec": {"name": "python3"}}
    nb.metadata["language_info"] = {"name": "python"}
    nb.add({"cell_type": "markdown", "id": "c2", "source": "x\u2028y", "metadata": {}})
    text = nb.render()
    second = json.loads(text)
    assert second["metadata"]["language_info"] == {"name": "python"}
    assert [c["source"] for c in second["cells"]] == [source, "x\u2028y"]
    assert text.startswith('{\n "cells": [\n  {\n   "cell_type": "code",\n')
