"""The ``ssh_host`` pytest fixture: one started :class:`SshHost` per test session, removed after.
Import it into a ``conftest.py``::

    from seer_ssh.testing.pytest_plugin import ssh_host  # noqa: F401

Tests using it skip, saying why, when no Docker engine (or no local base image) is there.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from seer_ssh.testing.host import SshHost, engine_problem

__all__ = ["ssh_host"]


@pytest.fixture(scope="session")
def ssh_host() -> Iterator[SshHost]:
    """A running SSH host (user ``seer``, a key made for it) shared by the session's tests."""
    problem = engine_problem()
    if problem:
        pytest.skip(f"no SSH test host here: {problem}")
    with SshHost() as host:
        yield host
