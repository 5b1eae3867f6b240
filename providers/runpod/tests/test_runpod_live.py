"""The provider contract against the real RunPod: ``SEER_RUNPOD_LIVE=1`` with ``RUNPOD_API_KEY`` set.

It rents real pods (CPU ones, and for the GPU test the cheapest GPU RunPod has free, or
``SEER_RUNPOD_LIVE_GPU``, e.g. ``A100``) and costs money; every pod is terminated at the end, and
each ends itself at its timeout if the run dies. ``SEER_RUNPOD_LIVE_OPTIONS`` (JSON) adds
provider_options, e.g. ``{"network_volume_id": "..."}``. Skipped otherwise.
"""

from __future__ import annotations

import json
import os

import pytest
from seer.config import SandboxConfig
from seer.testing import ProviderConformance

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.environ.get("SEER_RUNPOD_LIVE") != "1",
        reason="live RunPod tests: set SEER_RUNPOD_LIVE=1 (rents pods)",
    ),
]


class TestRunPodLive(ProviderConformance):
    provider_name = "runpod"
    sandbox_timeout = 3600
    # a real pod takes minutes to pull its image and start; its watchdog must still end it
    expiry_timeout = 900
    gpu_type = os.environ.get("SEER_RUNPOD_LIVE_GPU") or None

    @pytest.fixture(scope="class")
    @classmethod
    def sandbox_config(cls) -> SandboxConfig:
        options = json.loads(os.environ.get("SEER_RUNPOD_LIVE_OPTIONS") or "{}")
        return SandboxConfig(
            provider="runpod", execution_mode="cli", timeout=cls.sandbox_timeout, provider_options=options
        )
