"""What a RunPod sandbox leaves behind and who can reach it, with the real runpod SDK against the
fake API and pods that are real containers (see docs/runpod.md, "Security"):

* a later pod on the same network volume finds nothing of earlier sandboxes (no secret, no
  notebook, no sandbox folder), whether they were terminated or ended themselves at their timeout;
* hidden models with a network volume are refused before anything is rented (the volume's shared
  model cache would name them);
* a pod its agent stopped is listed (``stopped``) and terminable from any seer home with the API key;
* options that reach RunPod's GraphQL are checked, and seer's own GraphQL passes values as variables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _runpod_kit import runpod_config
from seer import Sandbox
from seer.errors import ConfigError
from seer.testing import killed_client
from seer.testing.conformance import wait_for
from seer_runpod import watchdog
from seer_runpod.provider import RunPodProvider
from seer_runpod.testing import FakeRunPod

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_leaked_pods")]

SECRET = "s3cret-runpodsec-4f1d"


def _pod_of(fake: FakeRunPod, sandbox_id: str) -> Any:
    (pod,) = [p for p in fake.pods.values() if p.name == f"seer-{sandbox_id}"]
    return pod


def _deploys(fake: FakeRunPod) -> int:
    return sum(1 for op in fake.operations() if op in ("podFindAndDeployOnDemand", "deployCpuPod"))


#: what the agent makes in its working directory: a notebook and an output
_WORK = (
    'mkdir -p notebooks outputs && printf \'%s\' \'{"cells": [], "metadata": {}, "nbformat": 4, '
    '"nbformat_minor": 5}\' > notebooks/leftover-{tag}.ipynb && echo result > outputs/leftover-{tag}.txt'
)


@pytest.mark.slow
def test_a_later_pod_on_the_network_volume_finds_nothing_of_earlier_sandboxes(
    fake_runpod: FakeRunPod, volume: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SEER_TEST_SECRET", SECRET)
    monkeypatch.setenv("SEER_OUTPUTS_DIR", str(tmp_path / "outputs"))
    config = runpod_config(volume, secrets=["SEER_TEST_SECRET"])
    # what each pod holds of its sandbox at the moment RunPod is asked to terminate it
    at_termination: dict[str, str] = {}
    terminate = fake_runpod.terminate

    def observed(pod_id: str, caller: str) -> None:
        pod = fake_runpod.pods[pod_id]
        if pod.host is not None:
            folder = f"/root/.seer/sandboxes/{pod.name.removeprefix('seer-')}"
            at_termination[pod.name] = pod.host.exec_as_root(f"ls -A {folder}").stdout
        terminate(pod_id, caller)

    monkeypatch.setattr(fake_runpod, "terminate", observed)
    # one sandbox is terminated by its client, which keeps a copy of its notebooks and outputs ...
    with Sandbox(config).start(name="terminated") as sb:
        terminated = sb.sandbox_id
        assert sb.exec("printenv SEER_TEST_SECRET", timeout=60).stdout == f"{SECRET}\n"
        sb.exec(_WORK.replace("{tag}", "terminated"), timeout=60, check=True)
        mount = sb.exec("cd /workspace && pwd -P", timeout=60).stdout.strip()
        # the account's API key never reaches the pod (it has a key of its own)
        seen = sb.exec("cat /proc/1/environ; env; cat /root/.seer/sandboxes/*/env.sh", timeout=60).stdout
        assert fake_runpod.api_key not in seen and SECRET in seen
    # its folder was emptied in the pod (secrets, work) before the pod was terminated
    assert at_termination[f"seer-{terminated}"].split() == [".lock", "meta.json"]
    # ... another ends itself at its timeout with no client (its pod terminates itself); its start
    # reuses the environment the first built on the volume, so its timeout can be short
    expiring = killed_client(runpod_config(volume, timeout=45, secrets=["SEER_TEST_SECRET"]), name="expiring")
    expiring_pod = _pod_of(fake_runpod, expiring)
    Sandbox.attach(expiring).exec(_WORK.replace("{tag}", "expired"), timeout=60, check=True)
    kept = tmp_path / "outputs" / terminated
    assert (kept / "leftover-terminated.ipynb").is_file()
    assert (kept / "outputs" / "leftover-terminated.txt").read_text() == "result\n"
    ended = lambda: expiring_pod.terminated_by is not None  # noqa: E731
    wait_for(ended, timeout=120, what="the pod to end itself", interval=0.5)
    assert expiring_pod.terminated_by == f"pod:{expiring_pod.id}"
    assert at_termination[f"seer-{expiring}"].split() == [".lock", "meta.json"]
    # a second pod on the same volume, root as every agent is, reads what the first two left
    with Sandbox(runpod_config(volume)).start(name="reader") as reader:
        found = reader.exec(
            f"grep -rIl -- {SECRET} {mount} ; find {mount} -name 'leftover-*' -o -name env.sh "
            f"-o -path '*/sandboxes/{terminated}*' -o -path '*/sandboxes/{expiring}*' "
            f"-o -path '*/outputs/{expiring}*'",
            timeout=120,
        )
        assert found.stdout == "", f"left on the network volume:\n{found.stdout}"
        # the volume still holds what is meant to be shared: the environments
        assert reader.exec(f"ls {mount}/.seer/envs", timeout=60, check=True).stdout.strip()
        # and this pod's own sandbox folder is not on it
        assert not reader.machine.dir.startswith(mount + "/")


def test_hidden_models_with_a_network_volume_are_refused_before_anything_is_rented(
    fake_runpod: FakeRunPod, volume: str
) -> None:
    hidden = [{"name": "org/secret-model", "hidden": True}]
    deploys = _deploys(fake_runpod)
    with pytest.raises(ConfigError) as info:
        Sandbox(runpod_config(volume, models=hidden)).start()
    assert "provider_options.network_volume_id" in info.value.fields
    message = str(info.value)
    assert "hidden" in message and "shared model cache" in message
    assert _deploys(fake_runpod) == deploys
    # without a network volume (the pod's own volume goes with the pod) it is accepted
    problems = RunPodProvider.check_config(runpod_config(models=hidden))
    assert [p for p in problems if "network_volume" in p.field] == []


def _seer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seer", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SEER_HOME": str(home), "SEER_OUTPUTS_DIR": str(home / "outputs")},
    )


def _as_pod(fake: FakeRunPod, pod: Any, query: str) -> dict[str, Any]:
    """A GraphQL call with the pod's own key, as an agent in the pod can make."""
    request = urllib.request.Request(
        fake.url + "/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {pod.api_key}"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


@pytest.mark.slow
def test_a_pod_its_agent_stopped_is_listed_and_terminable_from_another_home(
    fake_runpod: FakeRunPod, volume: str, tmp_path: Path
) -> None:
    sandbox_id = killed_client(runpod_config(volume), name="stopped-by-agent")  # the volume's environment
    pod = _pod_of(fake_runpod, sandbox_id)
    other = tmp_path / "other-home"  # a seer home that never saw it: only the API key
    # the agent stops its own pod with the pod's key; the watchdog dies with the container
    answer = _as_pod(fake_runpod, pod, f'mutation {{ podStop(input: {{podId: "{pod.id}"}}) {{ id }} }}')
    assert not answer.get("errors"), answer
    assert fake_runpod.pods[pod.id].desired_status == "EXITED"
    listed = {m["sandbox_id"]: m for m in json.loads(_seer(other, "ls", "--json").stdout)}
    assert listed[sandbox_id]["status"] == "stopped"
    table = _seer(other, "ls")
    assert sandbox_id in table.stdout and "stopped" in table.stdout, table.stdout + table.stderr
    # not deleted without a copy of its notebooks and outputs, unless asked to
    refused = _seer(other, "down", sandbox_id)
    assert refused.returncode == 1 and "no sandbox" not in refused.stderr, refused.stderr
    assert "stopped" in refused.stderr and "--force" in refused.stderr, refused.stderr
    assert pod.terminated_by is None
    done = _seer(other, "down", "--force", sandbox_id)
    assert done.returncode == 0 and f"{sandbox_id}: terminated" in done.stdout, done.stderr
    assert pod.terminated_by == "user"
    # and the home that started it sees it ended (how, the API no longer says: a pod it did not end)
    assert not {m.id: m for m in RunPodProvider().list()}[sandbox_id].status.alive


@pytest.mark.parametrize(
    "path", ['/work"space', "/work\\space", "/work space", "/work\nspace", "/work}space", "relative"]
)
def test_a_volume_mount_path_that_would_reach_graphql_unescaped_is_refused(
    fake_runpod: FakeRunPod, path: str
) -> None:
    deploys = _deploys(fake_runpod)
    with pytest.raises(ConfigError) as info:
        Sandbox(runpod_config(provider_options={"volume_mount_path": path})).start()
    assert info.value.fields == ["provider_options.volume_mount_path"]
    assert _deploys(fake_runpod) == deploys


def test_the_pods_own_termination_passes_the_pod_id_as_a_graphql_variable(
    fake_runpod: FakeRunPod, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pod id that is not one (quotes, braces) is a value the API looks up, never GraphQL."""
    monkeypatch.setenv("RUNPOD_API_KEY", fake_runpod.api_key)
    calls = len(fake_runpod.calls)
    assert watchdog.terminate(fake_runpod.url, 'x"}) { podTerminate(input: {podId: "y', attempts=1) == 1
    (call,) = fake_runpod.calls[calls:]
    assert call.fields == ("podTerminate",) and call.caller == "user"
    assert call.error is not None and "not found" in call.error
