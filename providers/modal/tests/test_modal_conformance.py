"""The provider contract on seer-modal, through the real modal SDK against the fake control plane."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from _modal_kit import modal_config
from seer import Sandbox
from seer.config import SandboxConfig
from seer.testing import ProviderConformance
from seer.testing.conformance.helpers import unique_token, wait_for
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

    # --- output that reaches the client after the exit status ------------------------------------
    # The SDK reads an exec's stdout, stderr and exit status over separate calls, which a network
    # (or a loaded client) may answer in any order: the exit status can come first. Output still
    # in flight then is the command's all the same, however long the command ran silent before.
    def test_output_after_a_silent_run_is_kept_when_the_exit_status_comes_first(
        self, sandbox: Sandbox, fake_modal: FakeModal
    ) -> None:
        with _lagging_output(fake_modal, 0.5):
            result = sandbox.exec("sleep 1.5; echo out-tail; echo err-tail >&2; exit 3", timeout=60)
            missing = sandbox.exec("sleep 1.5; no-such-command-after-a-pause", timeout=60)
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out-tail\n", "err-tail\n")
        assert missing.exit_code == 127
        assert "no-such-command-after-a-pause" in missing.stderr

    def test_the_tail_of_a_long_output_after_a_pause_is_kept(
        self, sandbox: Sandbox, fake_modal: FakeModal
    ) -> None:
        # two 64 KiB messages on each side of the pause: the last ones come after the exit status
        with _lagging_output(fake_modal, 0.4):
            result = sandbox.exec("seq 1 20000; sleep 1.5; seq 20001 40000", timeout=60)
        assert result.exit_code == 0
        assert result.stdout == "".join(f"{n}\n" for n in range(1, 40001))

    def test_exec_does_not_wait_for_a_background_child_holding_its_output(self, sandbox: Sandbox) -> None:
        # the fake's stream ends when the engine ends it: a couple of seconds after the command
        # when a child holds it; the pump's quiet after the exit would end the exec otherwise
        token = unique_token()
        py = sandbox.machine.python
        started = time.monotonic()
        try:
            result = sandbox.exec(
                f"echo done; {py} -c 'import time; time.sleep(600)' {token} & exit 3", timeout=60
            )
            elapsed = time.monotonic() - started
            assert (result.exit_code, result.stdout) == (3, "done\n")
            assert elapsed < 15, f"a background child holding stdout held exec up for {elapsed:.1f}s"
        finally:
            pids = " ".join(map(str, self.live_in_sandbox(sandbox, token)))
            sandbox.exec(f"kill {pids}", timeout=60, check=bool(pids))  # bash's kill: no procps here
        wait_for(lambda: not self.live_in_sandbox(sandbox, token), timeout=15, what="the child to end")


@contextlib.contextmanager
def _lagging_output(fake: FakeModal, seconds: float) -> Iterator[None]:
    """Each message of an exec's output reaches the client ``seconds`` late."""
    fake.state.stdio_lag = seconds
    try:
        yield
    finally:
        fake.state.stdio_lag = 0.0
