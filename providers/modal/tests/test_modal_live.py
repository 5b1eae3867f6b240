"""The provider contract against real Modal: set ``SEER_MODAL_LIVE=1`` with real credentials.

It skips otherwise (it costs money and needs an account). It runs the same conformance suite as
the fake does, with Modal's images and tunnels (HTTPS), on CPU; ``SEER_MODAL_LIVE_GPU`` (a GPU
name, e.g. ``T4``) adds the suite's GPU test, which runs ``nvidia-smi`` in the sandbox.
"""

from __future__ import annotations

import os

import pytest
from seer.config import SandboxConfig
from seer.testing import ProviderConformance

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.environ.get("SEER_MODAL_LIVE") != "1",
        reason="live Modal tests: set SEER_MODAL_LIVE=1 (and Modal credentials) to run them",
    ),
]


class TestModalLiveConformance(ProviderConformance):
    provider_name = "modal"
    # Real sandboxes take longer to schedule than the fake's containers.
    expiry_timeout = 120
    gpu_type = os.environ.get("SEER_MODAL_LIVE_GPU") or None
    skip_tests = (
        {} if gpu_type else {"test_gpu": "set SEER_MODAL_LIVE_GPU (e.g. T4) to start a GPU sandbox on Modal"}
    )

    @pytest.fixture(scope="class")
    @classmethod
    def sandbox_config(cls) -> SandboxConfig:
        return SandboxConfig(
            provider="modal",
            execution_mode="cli",
            timeout=cls.sandbox_timeout,
            provider_options={"app_name": "seer-live-tests", "model_volume": "seer-live-tests-models"},
        )
