"""The notebook as one live document on Docker (issue #22): three writers and a browser-like
client at once on one notebook, every cell kept in execution order in the container's ``.ipynb``
and in the client copy; JupyterLab answers at ``jupyter_url``. The local run is
``seer_core/tests/test_notebook_live.py``; the writers are ``tests/_live_kit.py``'s."""

from __future__ import annotations

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


def test_three_writers_at_once_keep_every_cell_on_docker(docker_engine: Any, tmp_path: Path) -> None:
    import urllib.request

    sandbox = Sandbox(docker_config(execution_mode="notebook")).start()
    try:
        page = urllib.request.urlopen(str(sandbox.jupyter_url).replace("/?", "/lab?"), timeout=60).read()
        assert b"<title>JupyterLab</title>" in page
        session = create_notebook_session(sandbox, outputs_dir=tmp_path / "copy")
        try:
            assert session.live is not None, "no live document in the container's Jupyter server"
            three_writers(session, rounds=20, sandbox=sandbox)
        finally:
            session.shutdown()
    finally:
        sandbox.terminate(force=True)
