"""The local sandbox the notebook and CLI-session tests start their sessions in
(``seer_core/tests/test_notebook*.py``, ``test_cli_session.py``, ``test_extras.py`` and
``plugins/mcp/tests``): as a fixture holds it, terminated when the fixture ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from seer import Sandbox, SandboxConfig


@contextmanager
def local_sandbox(*, force: bool = False, **config: Any) -> Iterator[Sandbox]:
    """A local sandbox (``SandboxConfig(**config)``), started; terminated when the block ends
    (``force=True``: torn down even where copying its notebooks to the client fails)."""
    sandbox = Sandbox(SandboxConfig(**config)).start()
    try:
        yield sandbox
    finally:
        sandbox.terminate(force=force)
