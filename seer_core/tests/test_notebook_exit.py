"""A script that uses a notebook session and ends without ``detach()`` (a setup script that prints
its session's JSON and exits) exits cleanly, and leaves the sandbox's ``.ipynb`` saved.

At exit, :func:`seer.notebook.live.close_all` (atexit) waits for the saves the script's live
documents asked for and stops their threads, before the interpreter finalises: a daemon thread
still applying the server's updates through pycrdt when finalisation stops it is how such a
script once ended with SIGSEGV after printing its JSON. Each run here checks, from a handler that
runs after seer's, that no thread of a live document is left, and its exit status.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _notebook_kit import local_sandbox
from seer import Sandbox
from seer.execution import create_notebook_session
from seer.notebook import NotebookSession

pytest.importorskip("jupyter_server_ydoc")
pytest.importorskip("websocket")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: How many times the script runs (each a fresh interpreter: a second or two).
RUNS = 12

SCRIPT = """\
import atexit, json, os, sys, threading

def no_live_threads_left():  # registered first, so it runs after seer's close_all
    left = [t.name for t in threading.enumerate() if t.name.startswith("seer-live") and t.is_alive()]
    if left:
        print("live-document threads still running at exit:", left, file=sys.stderr, flush=True)
        os._exit(3)

atexit.register(no_live_threads_left)

from seer.notebook import NotebookSession

session = NotebookSession.attach(sys.argv[1], sys.argv[2])
assert session.live is not None, "no live document"
result = session.exec(f"run_{sys.argv[3]} = {sys.argv[3]} * 2\\nrun_{sys.argv[3]}")
print(json.dumps({"session_id": session.session_id, "result": result.result}), flush=True)
"""


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with local_sandbox(timeout=900, force=True) as box:
        yield box


@pytest.fixture
def session(sandbox: Sandbox, tmp_path: Path) -> Iterator[NotebookSession]:
    with create_notebook_session(sandbox, outputs_dir=tmp_path / "copy") as nb:
        yield nb


def test_a_script_that_ends_without_detach_exits_cleanly_and_leaves_the_notebook_saved(
    sandbox: Sandbox, session: NotebookSession, tmp_path: Path
) -> None:
    script = tmp_path / "setup.py"
    script.write_text(SCRIPT)
    for run in range(RUNS):
        done = subprocess.run(
            [sys.executable, str(script), str(sandbox.jupyter_url), session.session_id, str(run)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"run {run} exited with {done.returncode}:\n{done.stderr[-3000:]}"
        printed = json.loads(done.stdout.strip().splitlines()[-1])
        assert printed == {"session_id": session.session_id, "result": str(run * 2)}
        # Saved before the script's interpreter ended: the file in the sandbox holds its cell.
        saved = json.loads(sandbox.read_file(session.notebook_path))
        sources = ["".join(c["source"]) for c in saved["cells"]]
        assert f"run_{run} = {run} * 2\nrun_{run}" in sources, f"run {run}'s cell is not saved: {sources}"
