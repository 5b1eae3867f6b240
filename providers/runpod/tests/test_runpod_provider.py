"""What the runpod provider does beyond the contract, with the real runpod SDK against the fake
API and pods that are real SSH-able containers: clear errors before anything is rented, GPUs
named by seer mapped to RunPod's, pods that end themselves through the API at their timeout with
no client, ``seer ls`` / ``seer down`` by the API, and a network volume's cache reused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _progress_kit import RecordingProgress
from _runpod_kit import runpod_config
from seer import Sandbox
from seer.errors import ConfigError, SandboxError
from seer.providers.base import MachineStatus
from seer.testing import killed_client
from seer.testing.conformance import wait_for
from seer_runpod.provider import RunPodProvider
from seer_runpod.testing import FakeRunPod
from seer_ssh.machine import agent

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.usefixtures("no_leaked_pods")]

DEPLOYS = ("podFindAndDeployOnDemand", "deployCpuPod")


def _deploys(fake: FakeRunPod) -> int:
    return sum(1 for op in fake.operations() if op in DEPLOYS)


def _pod_of(fake: FakeRunPod, sandbox_id: str) -> Any:
    (pod,) = [p for p in fake.pods.values() if p.name == f"seer-{sandbox_id}"]
    return pod


# --- must show: clear errors, nothing rented -----------------------------------------------------
def test_missing_api_key_is_a_clear_error_before_anything(
    fake_runpod: FakeRunPod, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("RUNPOD_API_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.runpod/config.toml either
    calls = len(fake_runpod.calls)
    with pytest.raises(ConfigError) as info:
        Sandbox(runpod_config()).start()
    assert info.value.fields == ["provider"]
    assert "no RunPod API key: set RUNPOD_API_KEY" in str(info.value) and "runpod config" in str(info.value)
    assert len(fake_runpod.calls) == calls, "no API call was made"
    # runpod's own config file is where the key may come from instead
    (tmp_path / ".runpod").mkdir()
    (tmp_path / ".runpod" / "config.toml").write_text(f'[default]\napi_key = "{fake_runpod.api_key}"\n')
    assert RunPodProvider.check_config(runpod_config()) == []


def test_unknown_gpu_is_refused_listing_what_is_available_with_prices(fake_runpod: FakeRunPod) -> None:
    deploys = _deploys(fake_runpod)
    with pytest.raises(ConfigError) as info:
        Sandbox(runpod_config(gpu="T4")).start()
    assert info.value.fields == ["gpu"]
    message = str(info.value)
    assert "RunPod offers no GPU matching 'T4'" in message
    assert "NVIDIA GeForce RTX 4090 (24 GB, $0.34/h)" in message  # what is there, and its price
    assert "RTX A5000" not in message  # out of stock: not offered as available
    assert _deploys(fake_runpod) == deploys


def test_unavailable_gpu_is_refused(fake_runpod: FakeRunPod) -> None:
    deploys = _deploys(fake_runpod)
    stock = {
        gpu_id: fake_runpod.gpu_types[gpu_id].stock for gpu_id in fake_runpod.gpu_types if "A100" in gpu_id
    }
    try:
        for gpu_id in stock:
            fake_runpod.set_stock(gpu_id, 0)
        with pytest.raises(ConfigError) as info:
            Sandbox(runpod_config(gpu="A100")).start()
        assert info.value.fields == ["gpu"]
        assert "RunPod has no 1 x A100 free now" in str(info.value)
        assert "NVIDIA A100 80GB PCIe (80 GB, none free now)" in str(info.value)
    finally:
        for gpu_id, count in stock.items():
            fake_runpod.set_stock(gpu_id, count)
    assert _deploys(fake_runpod) == deploys


def test_a_gpu_pod_is_rented_with_runpods_gpu_type_and_the_secrets_in_its_env(
    fake_runpod: FakeRunPod, volume: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEER_TEST_SECRET", "s3cret-value")
    config = runpod_config(volume, gpu="A100", gpu_count=2, secrets=["SEER_TEST_SECRET"])
    with Sandbox(config).start(name="gpu-pod") as sb:
        pod = _pod_of(fake_runpod, sb.sandbox_id)
        # the cheapest A100 RunPod has (its own list: A100 PCIe at 1.19/h beats SXM at 1.39/h)
        assert (pod.gpu.id, pod.gpu_count) == ("NVIDIA A100 80GB PCIe", 2)
        assert "22/tcp" in pod.ports and pod.network_volume_id == volume
        assert pod.env["SEER_TEST_SECRET"] == "s3cret-value"  # through the API, as pod env
        assert sb.exec("printenv SEER_TEST_SECRET", timeout=60).stdout == "s3cret-value\n"
        listed = {m.id: m for m in RunPodProvider().list()}[sb.sandbox_id]
        assert listed.labels["runpod.gpu"] == "2 x A100 PCIe"
        assert float(listed.labels["runpod.cost_per_hr"]) == pytest.approx(2 * 1.19)
        log = "".join(sb.machine.process_log(name) for name in sb.machine.log_names())
        assert "s3cret-value" not in log
    assert pod.terminated_by == "user"


def test_a_pod_whose_ssh_never_appears_is_a_clear_error_and_is_terminated(fake_runpod: FakeRunPod) -> None:
    """The deploy call answers before the pod runs; the provider waits for its 22/tcp port only
    until ``startup_timeout``, then says so and terminates the pod (whose container, still
    starting or not, is then removed)."""
    before = set(fake_runpod.pods)
    fake_runpod.boot_delay = 600  # runtime stays null, as while RunPod pulls a large image
    try:
        with pytest.raises(SandboxError, match=r"did not answer over SSH in 3 s: the pod has no SSH port"):
            Sandbox(runpod_config(provider_options={"startup_timeout": 3})).start()
    finally:
        fake_runpod.boot_delay = 0.0
    (pod_id,) = set(fake_runpod.pods) - before
    pod = fake_runpod.wait_started(pod_id)
    assert pod.terminated_by == "user" and pod.host is None
    assert [c.name for c in fake_runpod.containers() if pod_id in c.name] == []


# --- must show: a killed client; the pod ends itself, or seer down ends it earlier -------------
def _seer(*args: str) -> Any:
    out = subprocess.run([sys.executable, "-m", "seer", *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout) if "--json" in args else out.stdout


def test_killed_client_the_pod_terminates_itself_and_seer_down_ends_one_earlier(
    fake_runpod: FakeRunPod, volume: str, tmp_path: Path
) -> None:
    # the volume's environment built first: the short sandbox's 25 s are for its watchdog, not
    # for an environment build that, on a loaded machine, takes longer
    Sandbox(runpod_config(volume)).start(quiet=True).terminate()
    short = killed_client(runpod_config(volume, timeout=25), name="orphan-short")
    long = killed_client(runpod_config(volume, timeout=900), name="orphan-long")
    short_pod, long_pod = _pod_of(fake_runpod, short), _pod_of(fake_runpod, long)
    # seer ls lists both from the API, with their age and cost so far
    listed = {m["sandbox_id"]: m for m in _seer("ls", "--json")}
    assert listed[short]["status"] == listed[long]["status"] == "running"
    assert listed[long]["name"] == "orphan-long" and listed[long]["labels"]["runpod.pod_id"] == long_pod.id
    assert float(listed[long]["labels"]["runpod.cost_so_far"]) >= 0
    assert "runpod.cost_so_far" in listed[short]["labels"]
    # seer down ends the long one now
    assert f"{long}: terminated" in _seer("down", long)
    assert long_pod.terminated_by == "user"
    # the short one, with no client anywhere, terminates its own pod through the API
    wait_for(
        lambda: short_pod.terminated_by is not None,
        timeout=90,
        what="the pod to terminate itself",
        interval=0.25,
    )
    assert short_pod.terminated_by == f"pod:{short_pod.id}"
    assert short_pod.host is None or not short_pod.host.running()
    after = {m["sandbox_id"]: m for m in _seer("ls", "--all", "--json")}
    assert after[short]["status"] == "expired" and after[long]["status"] == "terminated"


def test_a_sandbox_its_agent_ended_is_listed_ended_while_its_pod_still_runs(
    fake_runpod: FakeRunPod, volume: str
) -> None:
    """At its timeout the pod's watchdog ends the sandbox (what ``status`` reads over SSH), then
    terminates the pod through the API a moment later. In between, ``list`` must not call the
    sandbox alive while ``status`` says it expired: a load race CI once lost."""
    sb = Sandbox(runpod_config(volume)).start(quiet=True)
    try:
        pod = _pod_of(fake_runpod, sb.sandbox_id)
        # the watchdog's first step alone, as the agent runs it: the pod is left running
        agent(sb.machine.conn, "end", sb.machine.base, sb.sandbox_id, "expired", timeout=60)
        assert fake_runpod.pods[pod.id].desired_status == "RUNNING"
        assert sb.status is MachineStatus.EXPIRED
        listed = {m.id: m for m in RunPodProvider().list()}[sb.sandbox_id]
        assert listed.status is MachineStatus.EXPIRED, listed
        assert listed.labels["runpod.pod_status"] == "RUNNING"  # what the API said, still shown
    finally:
        sb.terminate()
    assert pod.terminated_by == "user"  # the pod the agent left running is not leaked


# --- must show: the second start on the volume downloads nothing, reuses the environment -------


def test_second_start_on_the_network_volume_downloads_nothing(
    fake_runpod: FakeRunPod, hub: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from _model_kit import MODEL_ID

    volume = fake_runpod.add_network_volume("seer-models-once")
    config = runpod_config(volume, models=[{"name": MODEL_ID}], env=hub.env(), python_packages=["six"])
    first_progress = RecordingProgress()
    with Sandbox(config, progress=first_progress).start(name="model-first") as sb:
        first = sb.model_handles
        python = sb.machine.python
        cache = sb.machine.model_cache_dir()
        # on the network volume, reached from the sandbox's folder on the pod's own disk
        real = sb.exec(f"readlink -f {cache}", timeout=60, check=True).stdout.strip()
        assert real.startswith("/workspace/") and not sb.machine.dir.startswith("/workspace/")
    served = hub.bytes_served
    assert served > 0 and first[0].bytes_downloaded > 0
    second_progress = RecordingProgress()
    with Sandbox(config, progress=second_progress).start(name="model-second") as sb:
        second = sb.model_handles
        assert (sb.machine.python, sb.machine.model_cache_dir()) == (python, cache)
        assert sb.exec_python("import six; print(six.__name__)", check=True).stdout == "six\n"
    assert hub.bytes_served == served
    assert [h.bytes_downloaded for h in second] == [0]
    assert any("is there: reused" in line for line in second_progress.lines), second_progress.lines
