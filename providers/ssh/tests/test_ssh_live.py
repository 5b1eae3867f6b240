"""The provider contract against a real host of yours: ``SEER_SSH_LIVE_HOST`` names it.

Its value is a host name from the hosts file (``~/.config/seer/ssh-hosts.toml``), or JSON
provider_options (``{"host": "gpu-box", "user": "me", "key_file": "~/.ssh/id_ed25519"}``). Strict
host keys hold: the host must be in your known_hosts. Sandboxes live under ``~/.seer`` there and
are ended at the end of the run (or by the host at their timeout). Skipped otherwise.
"""

from __future__ import annotations

import json
import os

import pytest
from seer.config import SandboxConfig
from seer.testing import ProviderConformance

LIVE = os.environ.get("SEER_SSH_LIVE_HOST", "")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not LIVE, reason="live SSH tests: set SEER_SSH_LIVE_HOST to a host of yours"),
]


class TestSshLive(ProviderConformance):
    provider_name = "ssh"
    expiry_timeout = 30

    @pytest.fixture(scope="class")
    @classmethod
    def sandbox_config(cls) -> SandboxConfig:
        options = json.loads(LIVE) if LIVE.lstrip().startswith("{") else {"host": LIVE}
        return SandboxConfig(
            provider="ssh", execution_mode="cli", timeout=cls.sandbox_timeout, provider_options=options
        )
