"""The provider contract on seer-modal, through the real modal SDK against the fake control plane."""

from __future__ import annotations

import pytest
from _modal_kit import modal_config
from seer.config import SandboxConfig
from seer.testing import ProviderConformance
from seer_modal.testing import FakeModal

# Every test talks to the fake (the provider's availability needs its credentials in the environment).
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("fake_modal", "no_leaked_sandboxes")]


class TestModalConformance(ProviderConformance):
    provider_name = "modal"
    # A start (image cached) takes a couple of seconds; Modal's own timer must still fire after it.
    expiry_timeout = 20
    # The fake runs a GPU request on a CPU container (no nvidia-smi): test_gpu_request_reaches_modal
    # checks what can be checked here, and the live set (SEER_MODAL_LIVE_GPU) runs the suite's test.
    skip_tests = {
        "test_gpu": "the fake Modal's sandboxes have no GPU; SEER_MODAL_LIVE_GPU runs this on Modal"
    }

    @pytest.fixture(scope="class")
    @classmethod
    def sandbox_config(cls, fake_modal: FakeModal) -> SandboxConfig:
        return modal_config(timeout=cls.sandbox_timeout)

    def test_gpu_request_reaches_modal(self, start_sandbox, fake_modal: FakeModal) -> None:  # type: ignore[no-untyped-def]
        """What the fake can check of a GPU sandbox: Modal was asked for the GPU, by its Modal name,
        and the sandbox works."""
        sb = start_sandbox(name="conformance-gpu", gpu="A100", gpu_count=2)
        record = fake_modal.state.sandboxes[sb.sandbox_id.removeprefix("modal-")]
        assert (record.gpu, record.version) == ("A100-40GB:2", 1)
        assert sb.exec("echo on-gpu-path", timeout=60).stdout == "on-gpu-path\n"
