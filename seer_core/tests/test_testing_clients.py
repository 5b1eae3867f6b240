"""seer.testing.killed_client: the orphan every provider's tests start, and its clear failure."""

from __future__ import annotations

import pytest
from seer import ExecutionMode, Sandbox, SandboxConfig
from seer.providers.base import MachineStatus
from seer.providers.local.provider import LocalProvider
from seer.testing import killed_client

pytestmark = pytest.mark.e2e


def test_the_sandbox_outlives_the_killed_client() -> None:
    sandbox_id = killed_client(SandboxConfig(execution_mode=ExecutionMode.CLI, timeout=120), name="orphan")
    try:
        orphan = Sandbox.attach(sandbox_id)
        assert orphan.status is MachineStatus.RUNNING and orphan.name == "orphan"
    finally:
        LocalProvider().terminate(sandbox_id)


def test_a_client_that_fails_to_start_is_a_clear_error() -> None:
    config = SandboxConfig(execution_mode=ExecutionMode.CLI, repos=["file:///nonexistent/seer-no-repo.git"])
    with pytest.raises(AssertionError, match=r"(?s)the client that starts 'broken' exited 1.*repos"):
        killed_client(config, name="broken")
