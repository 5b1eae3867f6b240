"""Three writers at once on one notebook, with real MCP clients (issue #22, on the local provider):
a Python session, two notebook MCP servers started from exactly ``session.mcp_config`` (the mcp
SDK's stdio client, only that config's environment), and a browser-like collaborative client adding
cells, 20 rounds; every cell kept, in execution order, in the sandbox's ``.ipynb`` and in the client
copy. The Docker run is ``providers/docker/tests/test_docker_live.py``; the writers are
``tests/_mcp_writers.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("jupyter_server_ydoc")
pytest.importorskip("websocket")
pytest.importorskip("mcp")
pytest.importorskip("seer_mcp")

from _mcp_writers import session_and_mcp_writers
from _notebook_kit import local_sandbox
from seer import Sandbox
from seer.execution import create_notebook_session

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with local_sandbox(timeout=900, force=True) as box:
        yield box


def test_a_session_two_mcp_clients_and_a_browser_keep_every_cell_in_order(sandbox: Sandbox) -> None:
    session = create_notebook_session(sandbox, name="writers")
    try:
        session_and_mcp_writers(session, sandbox, rounds=20)
    finally:
        session.shutdown()
