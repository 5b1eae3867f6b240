"""The notebook as one live document on Docker (issue #22), in one container for the module:
three writers and a browser-like client at once on one notebook, every cell kept in execution
order in the container's ``.ipynb`` and in the client copy; the same with a Python session, two
real MCP clients started from ``session.mcp_config`` and a browser-like client; JupyterLab answers
at ``jupyter_url``. The local runs are ``seer_core/tests/test_notebook_live.py`` and
``plugins/mcp/tests/test_mcp_live_writers.py``; the writers are ``tests/_live_kit.py``'s and
``tests/_mcp_writers.py``'s."""

from __future__ import annotations

import importlib.util
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# the writers (tests/_live_kit.py) need the notebook packages, which seer-docker alone does not bring
pytest.importorskip("nbformat")
pytest.importorskip("jupyter_ydoc")

from _docker_kit import docker_config
from _live_kit import three_writers
from seer import Sandbox
from seer.execution import create_notebook_session

# The first run builds an image with JupyterLab in it: minutes, not seconds.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def sandbox(docker_engine: Any) -> Iterator[Sandbox]:
    box = Sandbox(docker_config(execution_mode="notebook")).start()
    try:
        yield box
    finally:
        box.terminate(force=True)


def test_three_writers_at_once_keep_every_cell_on_docker(sandbox: Sandbox, tmp_path: Path) -> None:
    page = urllib.request.urlopen(str(sandbox.jupyter_url).replace("/?", "/lab?"), timeout=60).read()
    assert b"<title>JupyterLab</title>" in page
    session = create_notebook_session(sandbox, outputs_dir=tmp_path / "copy")
    try:
        assert session.live is not None, "no live document in the container's Jupyter server"
        three_writers(session, rounds=20, sandbox=sandbox)
    finally:
        session.shutdown()


@pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None or importlib.util.find_spec("seer_mcp") is None,
    reason="needs the mcp SDK and seer-mcp (pip install 'seer[mcp]')",
)
def test_a_session_two_mcp_clients_and_a_browser_keep_every_cell_on_docker(sandbox: Sandbox) -> None:
    from _mcp_writers import session_and_mcp_writers

    session = create_notebook_session(sandbox, name="writers")
    try:
        session_and_mcp_writers(session, sandbox, rounds=20)
    finally:
        session.shutdown()
