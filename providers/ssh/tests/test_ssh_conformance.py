"""The provider contract on seer-ssh: a real sshd in a container, reached with real paramiko."""

from __future__ import annotations

import pytest
from _ssh_kit import Box
from seer.config import SandboxConfig
from seer.testing import ProviderConformance

pytestmark = pytest.mark.e2e


class TestSshConformance(ProviderConformance):
    provider_name = "ssh"
    # a start on a host whose environment is made takes about a second; the watchdog must fire
    expiry_timeout = 8

    @pytest.fixture(scope="class")
    @classmethod
    def sandbox_config(cls, box: Box) -> SandboxConfig:
        return box.config(timeout=cls.sandbox_timeout)
