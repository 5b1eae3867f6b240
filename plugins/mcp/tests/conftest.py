"""The fixtures the notebook MCP tests share: a local sandbox per module (``sandbox``) and, in it,
the session a setup script would have made and printed (``setup_session``). A module that needs
another sandbox (one torn down with ``force=True``) defines its own ``sandbox``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _notebook_kit import local_sandbox
from seer import Sandbox


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with local_sandbox(timeout=900) as box:
        yield box


@pytest.fixture(scope="module")
def setup_session(sandbox: Sandbox) -> Iterator[Any]:
    """The session a setup script would have made (and printed as JSON)."""
    from seer.execution import create_notebook_session

    with create_notebook_session(sandbox, name="agent", outputs_dir=False) as session:
        yield session
