"""The provider contract on a real Docker engine."""

from __future__ import annotations

from typing import Any

import pytest
from _docker_kit import docker_config
from seer.config import SandboxConfig
from seer.testing import ProviderConformance

pytestmark = pytest.mark.e2e


class TestDockerConformance(ProviderConformance):
    provider_name = "docker"
    # A start (image cached) takes about a second; the in-container timer must still fire.
    expiry_timeout = 10

    @pytest.fixture(scope="class")
    @classmethod
    def sandbox_config(cls, docker_engine: Any) -> SandboxConfig:
        return docker_config(timeout=cls.sandbox_timeout)
