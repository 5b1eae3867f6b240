"""The sandbox's Jupyter server, stopped by SIGTERM (a sandbox terminated, a container stopped),
first saves every live document room to its ``.ipynb``: the server saves a room only when a
writer asks, and the rooms' update history lives in its memory, so cells written since the last
save were lost. On the local provider, against the real server."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from seer import Sandbox, SandboxConfig
from seer.execution import create_notebook_session
from seer.notebook import JupyterClient
from seer.notebook.live import LiveNotebook

pytest.importorskip("jupyter_server")
pytest.importorskip("jupyter_server_ydoc")
pytest.importorskip("websocket")
nbformat = pytest.importorskip("nbformat")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox(SandboxConfig(timeout=600)).start()
    try:
        yield box
    finally:
        box.terminate()


def _server_pid(sandbox_id: str) -> int:
    """The sandbox's Jupyter server (the launcher's process; its kernels share its marker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"jupyter_server.serverapp" in cmdline and f"SEER_SANDBOX_ID={sandbox_id}".encode() in environ:
            found.append(int(entry.name))
    assert len(found) == 1, f"expected one Jupyter server of {sandbox_id}, found {found}"
    return found[0]


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):  # exited (its parent, the provider, reaps it later)
            return True
        time.sleep(0.05)
    return False


def test_sigterm_saves_the_live_rooms_first(sandbox: Sandbox) -> None:
    session = create_notebook_session(sandbox, name="main", outputs_dir=False)
    url = session.jupyter_url
    session.detach()
    path = "notebooks/unsaved.ipynb"
    cells = [nbformat.v4.new_code_cell(f"x = {i}", id=f"cell-{i}", execution_count=i + 1) for i in range(4)]
    sandbox.write_file(path, nbformat.writes(nbformat.v4.new_notebook(cells=cells[:1])))
    live = LiveNotebook(JupyterClient.from_url(url), path)
    try:
        live.push([dict(c) for c in cells], None)
        live.round_trip()  # the server has the cells; nobody asked for a save
        assert len(json.loads(sandbox.read_file(path))["cells"]) == 1, "saved before the test stopped it"
        pid = _server_pid(sandbox.sandbox_id)
        os.kill(pid, signal.SIGTERM)
        assert _gone(pid, 30), "the Jupyter server did not exit on SIGTERM"
    finally:
        live.close()
    saved = json.loads(sandbox.read_file(path))["cells"]
    assert ["".join(c["source"]) for c in saved] == ["x = 0", "x = 1", "x = 2", "x = 3"]
    assert [c["id"] for c in saved] == ["cell-0", "cell-1", "cell-2", "cell-3"]
