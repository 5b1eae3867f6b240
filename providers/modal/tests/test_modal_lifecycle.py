"""seer-modal's lifetime, listing, secrets and refusals, against the fake control plane.

A client killed with SIGKILL leaves a sandbox that any machine with the same Modal credentials
finds by its tags (``seer ls`` from a fresh ``SEER_HOME``) and ends (``seer down``), and that Modal
ends at its timeout when left alone. Secrets reach the sandbox's processes only. A config Modal
cannot run is refused before the first call to Modal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _modal_kit import modal_config
from seer import Sandbox
from seer.errors import ConfigError
from seer.providers.base import MachineStatus
from seer.testing import killed_client
from seer_modal.testing import FakeModal

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.usefixtures("no_leaked_sandboxes")]


def _seer(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    """The ``seer`` command line, from a machine that knows nothing of the sandbox but the
    Modal credentials (a fresh ``SEER_HOME``)."""
    env = {**os.environ, "SEER_HOME": str(home), "SEER_DISABLE_PLUGINS": "docker"}
    return subprocess.run(
        [sys.executable, "-m", "seer", *args], env=env, capture_output=True, text=True, timeout=300
    )


def _killed_client(timeout: int) -> str:
    """The id of a sandbox whose starting client was then killed with SIGKILL."""
    return killed_client(modal_config(timeout=timeout), name="killed-client")


def _listed(home: Path) -> dict[str, Any]:
    out = _seer(["ls", "--json"], home)
    assert out.returncode == 0, out.stderr
    return {m["sandbox_id"]: m for m in json.loads(out.stdout)}


def test_killed_client_sandbox_is_found_by_tags_and_ended(fake_modal: FakeModal, tmp_path: Path) -> None:
    sandbox_id = _killed_client(timeout=900)
    record = fake_modal.state.sandboxes[sandbox_id.removeprefix("modal-")]
    assert record.result is None, "the sandbox ended with its client"
    listed = _listed(tmp_path / "elsewhere")
    assert sandbox_id in listed, listed
    assert (listed[sandbox_id]["name"], listed[sandbox_id]["status"]) == ("killed-client", "running")
    down = _seer(["down", sandbox_id], tmp_path / "elsewhere")
    assert down.returncode == 0, down.stderr
    assert f"{sandbox_id}: terminated" in down.stdout
    deadline = time.monotonic() + 30
    while record.result is None:
        assert time.monotonic() < deadline, "seer down left the sandbox running"
        time.sleep(0.2)
    assert sandbox_id not in _listed(tmp_path / "elsewhere")


def test_killed_client_sandbox_ends_at_its_timeout(fake_modal: FakeModal, tmp_path: Path) -> None:
    sandbox_id = _killed_client(timeout=20)
    record = fake_modal.state.sandboxes[sandbox_id.removeprefix("modal-")]
    assert record.result is None
    deadline = time.monotonic() + 60
    while record.result is None:
        assert time.monotonic() < deadline, "the sandbox outlived its timeout"
        time.sleep(0.5)
    assert "timed out" in record.result.exception
    assert sandbox_id not in _listed(tmp_path / "elsewhere")
    # the client that made it knows it expired
    assert Sandbox.attach(sandbox_id).status is MachineStatus.EXPIRED


def test_secrets_reach_processes_only(
    fake_modal: FakeModal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = f"s3cret-{os.urandom(6).hex()}"
    monkeypatch.setenv("SEER_MODAL_TEST_SECRET", value)
    sb = Sandbox(modal_config(timeout=600, secrets=["SEER_MODAL_TEST_SECRET"])).start(name="secrets")
    try:
        assert sb.exec('printf %s "$SEER_MODAL_TEST_SECRET"', timeout=60).stdout == value
        sb.machine.start_process(["bash", "-c", "echo started"], name="noisy")
        record = fake_modal.state.sandboxes[sb.sandbox_id.removeprefix("modal-")]
        places = {
            "image definitions": "".join(fake_modal.state.image_definitions),
            "tags": json.dumps(record.tags),
            "seer ls": json.dumps(_listed(tmp_path / "elsewhere")),
            "client records": "".join(p.read_text() for p in Path(os.environ["SEER_HOME"]).rglob("*.json")),
            # the model Volume, the sandbox's logs and its filesystem outside /proc
            "volume and logs": sb.exec(
                f"grep -rl -- {value} /opt/seer/hf-hub {sb.workdir} /tmp /etc 2>/dev/null; true", timeout=120
            ).stdout,
            "process log": sb.machine.process_log("noisy"),
        }
        leaked = [where for where, text in places.items() if value in text]
        assert not leaked, f"the secret is in: {leaked}"
    finally:
        sb.terminate()


def _refused(fake: FakeModal, config: Any) -> ConfigError:
    calls, containers = len(fake.calls), len(fake.containers())
    with pytest.raises(ConfigError) as info:
        Sandbox(config).start()
    assert fake.calls[calls:] == [], "a refused config reached Modal"
    assert len(fake.containers()) == containers
    return info.value


def test_missing_credentials_refused_before_anything(
    fake_modal: FakeModal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MODAL_TOKEN_ID")
    monkeypatch.delenv("MODAL_TOKEN_SECRET")
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "no-such.toml"))
    err = _refused(fake_modal, modal_config())
    assert err.fields == ["provider"]
    assert "modal token new" in str(err) and "MODAL_TOKEN_ID" in str(err)


def test_gpu_modal_lacks_refused_before_anything(fake_modal: FakeModal) -> None:
    err = _refused(fake_modal, modal_config(gpu="A10G", gpu_count=8))
    assert err.fields == ["gpu_count"] and "at most 4 A10G" in str(err)
    err = _refused(fake_modal, modal_config(gpu="V100"))  # a name no provider knows: refused at start
    assert err.fields == ["gpu"] and "V100" in str(err)


def test_timeout_past_modals_limit_refused_before_anything(fake_modal: FakeModal) -> None:
    err = _refused(fake_modal, modal_config(timeout=24 * 3600 + 1))
    assert err.fields == ["timeout"] and "86400" in str(err)


def test_a_start_reuses_what_it_resolved_and_resolves_again_what_modal_lost(fake_modal: FakeModal) -> None:
    """A second start in one process makes one call (SandboxCreate: no ImageFromId, no
    VolumeGetOrCreate); a teardown with nothing to copy asks two (the listing, stdout only) and
    terminates. When Modal no longer has the volume the process resolved, the start looks it up
    again instead of failing."""
    Sandbox(modal_config(), progress=False).start(name="first").terminate()

    before = len(fake_modal.calls)
    sandbox = Sandbox(modal_config(), progress=False).start(name="second")
    started = len(fake_modal.calls)
    sandbox.terminate()
    assert [str(c) for c in fake_modal.calls[before:started]] == ["SandboxCreateV2"]
    teardown = [str(c) for c in fake_modal.calls[started:]]
    assert teardown == ["TaskExecStart", "TaskExecStdioRead", "SandboxTerminateV2"], teardown

    fake_modal.state.volumes.clear()  # Modal lost the model volume this process resolved
    before = len(fake_modal.calls)
    with Sandbox(modal_config(), progress=False).start(name="third") as sandbox:
        assert sandbox.exec("echo ok").stdout == "ok\n"
    calls = [str(c) for c in fake_modal.calls[before:]]
    assert calls.count("VolumeGetOrCreate") == 1 and calls.count("SandboxCreateV2") == 2, calls
    assert len(fake_modal.state.volumes) == 1
