"""Lock files left behind: a client folder's ``.seer-copies`` (the lock and record of its client
copies) goes when its sandbox ends, at ``terminate`` or, for a sandbox that ended otherwise, at
the next sandbox start; never while another process holds it, and a writer that waited for a
lock file being removed takes its lock on the new file, so no two writers ever hold different
files of one name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from seer.outputs import (
    COPIES_RECORD,
    forget_copies,
    forget_ended_copies,
    forget_ended_copy,
    write_client_copy,
)
from seer.state import lock_file, prune_records, record_path, remove_lock_file, write_json

NB = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})

_HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from seer.state import lock_file
    fd = lock_file(Path(sys.argv[1]))
    print("held", flush=True)
    sys.stdin.read()  # holds it until told to exit
    """
)


def _holder(path: Path) -> subprocess.Popen[str]:
    """Another process holding the lock file ``path``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _end(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait(timeout=30)


@pytest.mark.unit
def test_a_writer_that_waited_while_the_record_was_removed_records_its_copy(tmp_path: Path) -> None:
    """A copy written by a writer that waited on the folder's lock while the record was being
    removed is recorded in the record there now (before: in the removed file, so it was lost)."""
    record = tmp_path / COPIES_RECORD
    fd = lock_file(record)  # the remover, holding the lock
    assert fd is not None
    done: list[object] = []
    writer = threading.Thread(
        target=lambda: done.append(write_client_copy(tmp_path / "a.ipynb", NB, b"\x01\x05\x02"))
    )
    writer.start()
    time.sleep(0.2)  # the writer has opened the record and waits for its lock
    record.unlink()  # what remove_lock_file does, holding the lock
    os.close(fd)
    writer.join(timeout=30)
    assert done and not writer.is_alive()
    assert json.loads(record.read_text()) == {"a.ipynb": {"5": 2}}


@pytest.mark.e2e
def test_a_lock_file_another_process_holds_is_never_removed(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    holder = _holder(path)
    try:
        assert remove_lock_file(path) is False
        assert path.exists()
        assert lock_file(path, wait=False) is None, "the holder still holds the file there"
    finally:
        _end(holder)
    assert remove_lock_file(path) is True
    assert not path.exists()
    assert remove_lock_file(path) is True  # already gone


@pytest.mark.e2e
@pytest.mark.parametrize("sweep", ["forget_ended_copies", "a start's pass over the records"])
def test_the_copies_record_of_an_ended_sandbox_is_swept(tmp_path: Path, sweep: str) -> None:
    """Sandboxes that ended without this machine's ``terminate`` (expired, ``seer down`` of a dead
    one): their folders' records go at the next start's sweep, unless a writer holds one. A start
    sweeps in the same pass that prunes the records (``prune_records(ended=...)``)."""
    ended, held, running = (tmp_path / name for name in ("local-ended01", "local-held01", "local-run01"))
    for folder in (ended, held, running):
        write_client_copy(folder / "research.ipynb", NB, b"\x01\x05\x02")
        assert (folder / COPIES_RECORD).exists()
    for folder, end in ((ended, True), (held, True), (running, False)):
        record = {"id": folder.name, "outputs_dir": str(folder)}
        write_json(record_path(folder.name), {**record, "ended_at": time.time()} if end else record)
    holder = _holder(held / COPIES_RECORD)
    try:
        if sweep == "forget_ended_copies":
            forget_ended_copies()
        else:
            prune_records(ended=forget_ended_copy)
        assert not (ended / COPIES_RECORD).exists()
        assert (held / COPIES_RECORD).exists(), "removed a record another process held"
        assert (running / COPIES_RECORD).exists(), "removed the record of a sandbox still running"
        assert (ended / "research.ipynb").exists()
    finally:
        _end(holder)
        for folder in (ended, held, running):
            record_path(folder.name).unlink(missing_ok=True)
    assert forget_copies(held) and not (held / COPIES_RECORD).exists()


@pytest.mark.e2e
@pytest.mark.slow
def test_terminate_removes_the_copies_record_and_keeps_the_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("jupyter_server")
    pytest.importorskip("websocket")
    from seer import Sandbox, SandboxConfig
    from seer.execution import create_notebook_session

    monkeypatch.setenv("SEER_OUTPUTS_DIR", str(tmp_path))
    sandbox = Sandbox(SandboxConfig(timeout=600)).start()
    try:
        session = create_notebook_session(sandbox, name="research")
        session.exec("1 + 1")
        session.flush()
        folder = sandbox.outputs_dir
        assert (folder / COPIES_RECORD).exists(), "the session's client copy took the folder's lock"
    finally:
        sandbox.terminate()
    assert not (folder / COPIES_RECORD).exists()
    cells = json.loads((folder / "research.ipynb").read_text())["cells"]
    assert ["".join(c["source"]) for c in cells] == ["1 + 1"]
