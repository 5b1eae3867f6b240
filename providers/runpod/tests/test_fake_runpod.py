"""The real runpod SDK, unmodified, against ``FakeRunPod``: GPUs, GPU and CPU pods, listing,
SSH into a pod, termination by the client and by the pod itself, refused keys, unknown calls."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest
import requests
import runpod
from runpod import error as runpod_error
from runpod.api.graphql import run_graphql_query
from seer_runpod.testing import NO_CAPACITY, FakeRunPod
from seer_ssh.testing import new_ed25519_key

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_leaked_pods")]

A100 = "NVIDIA A100 80GB PCIe"


@pytest.fixture(scope="module")
def user_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The researcher's SSH key: (private key file, public key line)."""
    private, public = new_ed25519_key()
    path = tmp_path_factory.mktemp("key") / "id_ed25519"
    path.write_text(private)
    path.chmod(0o600)
    return path, public


@pytest.fixture
def pods(fake_runpod: FakeRunPod) -> Iterator[list[str]]:
    """Ids of the pods a test makes; those still live at its end are terminated."""
    made: list[str] = []
    yield made
    for pod_id in made:
        pod = fake_runpod.pods.get(pod_id)
        if pod is not None and pod.terminated_by is None:
            fake_runpod.terminate(pod_id, "user")


def booted(pod_id: str, timeout: float = 300) -> dict[str, Any]:
    """The pod as ``get_pod`` shows it once its ``runtime`` is there, polled as a client must."""
    deadline = time.monotonic() + timeout
    while (pod := runpod.get_pod(pod_id))["runtime"] is None:
        assert time.monotonic() < deadline, f"pod {pod_id} has no runtime after {timeout} s"
        time.sleep(0.2)
    return pod


def ssh(fake: FakeRunPod, pod_id: str, key: Path, tmp_path: Path) -> paramiko.SSHClient:
    """Log into a pod as root at the public SSH address its ``runtime.ports`` gives."""
    pod = booted(pod_id)
    (mapping,) = [p for p in pod["runtime"]["ports"] if p["privatePort"] == 22]
    assert mapping["type"] == "tcp" and mapping["isIpPublic"]
    known_hosts = fake.host(pod_id).write_known_hosts(tmp_path / f"known_hosts_{pod_id}")
    client = paramiko.SSHClient()
    client.load_host_keys(str(known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        mapping["ip"],
        mapping["publicPort"],
        "root",
        key_filename=str(key),
        look_for_keys=False,
        allow_agent=False,
    )
    return client


def run(client: paramiko.SSHClient, command: str) -> tuple[int, str]:
    _, out, _ = client.exec_command(command, timeout=30)
    return out.channel.recv_exit_status(), out.read().decode()


def test_gpus_are_listed_with_prices_and_stock(fake_runpod: FakeRunPod) -> None:
    ids = {gpu["id"]: gpu for gpu in runpod.get_gpus()}
    assert ids[A100] == {"id": A100, "displayName": "A100 PCIe", "memoryInGb": 80}
    assert "NVIDIA H100 80GB HBM3" in ids and "NVIDIA GeForce RTX 4090" in ids
    a100 = runpod.get_gpu(A100, 2)
    assert a100["securePrice"] == 1.64 and a100["communityPrice"] == 1.19
    assert a100["lowestPrice"]["uninterruptablePrice"] == 1.19
    assert runpod.get_gpu("NVIDIA RTX A5000")["lowestPrice"]["uninterruptablePrice"] == 0.16
    with pytest.raises(ValueError, match="No GPU found"):
        runpod.get_gpu("NVIDIA Imaginary 9000")
    stock = run_graphql_query('{ gpuTypes(input: {id: "NVIDIA RTX A5000"}) { lowestPrice { stockStatus } } }')
    assert stock["data"]["gpuTypes"][0]["lowestPrice"]["stockStatus"] is None  # out of stock


def test_gpu_pod_is_created_and_reached_over_ssh(
    fake_runpod: FakeRunPod, pods: list[str], user_key: tuple[Path, str], tmp_path: Path
) -> None:
    key, public = user_key
    made = runpod.create_pod(
        "seer-gpu",
        "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04",
        A100,
        gpu_count=2,
        ports="22/tcp,8888/http",
        env={"PUBLIC_KEY": public, "SEER_TOKEN": "tok123"},
        volume_in_gb=20,
        volume_mount_path="/workspace",
    )
    pods.append(made["id"])
    assert fake_runpod.operations()[-2:] == ["gpuTypes", "podFindAndDeployOnDemand"]
    assert "SEER_TOKEN=tok123" in made["env"] and made["machine"]["podHostId"].startswith(made["id"])
    pod = booted(made["id"])  # as on RunPod, the deploy call answers before the container runs
    assert (pod["desiredStatus"], pod["gpuCount"], pod["machine"]["gpuDisplayName"]) == (
        "RUNNING",
        2,
        "A100 PCIe",
    )
    assert pod["costPerHr"] == pytest.approx(2 * 1.19) and pod["volumeInGb"] == 20
    assert pod["lastStatusChange"].startswith("Rented by User: ")
    http = [p for p in pod["runtime"]["ports"] if p["privatePort"] == 8888]
    assert http == [
        {"ip": "127.0.0.1", "isIpPublic": False, "privatePort": 8888, "publicPort": 8888, "type": "http"}
    ]
    client = ssh(fake_runpod, made["id"], key, tmp_path)
    code, out = run(client, 'id -un; echo "$SEER_TOKEN $RUNPOD_POD_ID $RUNPOD_GPU_COUNT"; touch /workspace/x')
    client.close()
    assert (code, out) == (0, f"root\ntok123 {made['id']} 2\n")
    assert fake_runpod.host(made["id"]).exec_as_root("test -f /workspace/x").exit_code == 0


def test_cpu_pod_and_listing(fake_runpod: FakeRunPod, pods: list[str]) -> None:
    cpu = runpod.create_pod("seer-cpu", "runpod/base:0.6.2-cpu", ports="22/tcp")
    pods.append(cpu["id"])
    assert fake_runpod.operations()[-1] == "deployCpuPod"
    gpu = runpod.create_pod("seer-gpu-2", "runpod/base:0.6.2", "NVIDIA GeForce RTX 4090")
    pods.append(gpu["id"])
    listed = {pod["id"]: pod for pod in runpod.get_pods()}
    assert {cpu["id"], gpu["id"]} <= set(listed)
    assert (listed[cpu["id"]]["gpuCount"], listed[cpu["id"]]["costPerHr"]) == (0, 0.06)
    assert listed[gpu["id"]]["name"] == "seer-gpu-2" and listed[gpu["id"]]["costPerHr"] == 0.34
    time.sleep(1.1)
    assert runpod.get_pod(cpu["id"])["uptimeSeconds"] >= 1


def test_terminate_pod_removes_its_container(fake_runpod: FakeRunPod, pods: list[str]) -> None:
    made = runpod.create_pod("seer-end", "runpod/base:0.6.2-cpu")
    pods.append(made["id"])
    fake_runpod.wait_started(made["id"])
    before = len(fake_runpod.containers())
    runpod.terminate_pod(made["id"])
    assert len(fake_runpod.containers()) == before - 1
    assert runpod.get_pod(made["id"]) is None
    assert made["id"] not in {pod["id"] for pod in runpod.get_pods()}
    assert fake_runpod.pods[made["id"]].terminated_by == "user"
    assert fake_runpod.operations()[-3:] == ["podTerminate", "pod", "myself"]


def test_terminate_while_the_container_starts_leaves_no_container(
    fake_runpod: FakeRunPod, pods: list[str]
) -> None:
    made = runpod.create_pod("seer-early", "runpod/base:0.6.2-cpu", ports="22/tcp")
    pods.append(made["id"])
    starter = fake_runpod.pods[made["id"]].starter
    assert starter is not None and starter.is_alive()  # the call answered before the container runs
    runpod.terminate_pod(made["id"])
    assert runpod.get_pod(made["id"]) is None
    fake_runpod.wait_started(made["id"])  # the starter sees the pod ended and removes its container
    assert [c.name for c in fake_runpod.containers() if made["id"] in c.name] == []
    assert fake_runpod.pods[made["id"]].host is None


def test_a_pod_terminates_itself_through_the_api(
    fake_runpod: FakeRunPod, pods: list[str], user_key: tuple[Path, str], tmp_path: Path
) -> None:
    key, public = user_key
    made = runpod.create_pod(
        "seer-self",
        "runpod/base:0.6.2-cpu",
        ports="22/tcp",
        env={"PUBLIC_KEY": public, "API_URL": fake_runpod.url},
    )
    other = runpod.create_pod("seer-other", "runpod/base:0.6.2-cpu")
    pods += [made["id"], other["id"]]
    # A pod's own key reaches only its own pod.
    with pytest.raises(runpod_error.QueryError, match="may not act on pod"):
        run_graphql_query(
            f'mutation {{ podTerminate(input: {{podId: "{other["id"]}"}}) }}',
            api_key=fake_runpod.pods[made["id"]].api_key,
        )
    watchdog = (
        "import json, os, urllib.request\n"
        "q = 'mutation { podTerminate(input: {podId: \"%s\"}) }' % os.environ['RUNPOD_POD_ID']\n"
        "auth = {'Authorization': 'Bearer ' + os.environ['RUNPOD_API_KEY']}\n"
        "body = json.dumps({'query': q}).encode()\n"
        "urllib.request.urlopen(urllib.request.Request(os.environ['API_URL'] + '/graphql', body, auth))\n"
    )
    client = ssh(fake_runpod, made["id"], key, tmp_path)
    sftp = client.open_sftp()
    with sftp.open("/root/watchdog.py", "w") as f:
        f.write(watchdog)
    sftp.close()
    client.exec_command("setsid python3 /root/watchdog.py >/dev/null 2>&1 </dev/null &")
    me = f"pod:{made['id']}"
    deadline = time.monotonic() + 30
    while not [
        c for c in fake_runpod.calls if c.fields == ("podTerminate",) and c.caller == me and not c.error
    ]:
        assert time.monotonic() < deadline, "the pod did not terminate itself"
        time.sleep(0.1)
    client.close()
    assert fake_runpod.pods[made["id"]].terminated_by == me
    assert runpod.get_pod(made["id"]) is None
    assert [c.labels for c in fake_runpod.containers() if made["id"] in c.name] == []
    assert runpod.get_pod(other["id"])["desiredStatus"] == "RUNNING"


def test_missing_or_wrong_api_key_is_refused_and_nothing_is_made(
    fake_runpod: FakeRunPod, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = requests.post(f"{fake_runpod.url}/graphql", json={"query": "{ myself { id } }"}, timeout=10)
    assert missing.status_code == 401
    before = (len(fake_runpod.pods), len(fake_runpod.containers()))
    monkeypatch.setattr(runpod, "api_key", "rpa_WRONG")
    with pytest.raises(runpod_error.AuthenticationError):
        runpod.create_pod("seer-nokey", "runpod/base:0.6.2-cpu")
    with pytest.raises(runpod_error.AuthenticationError):
        runpod.get_gpus()
    assert (len(fake_runpod.pods), len(fake_runpod.containers())) == before
    refused = fake_runpod.errors[-3:]
    assert [(c.fields, c.caller) for c in refused] == [
        (("myself",), None),
        (("deployCpuPod",), None),
        (("gpuTypes",), None),
    ]


def test_unknown_operations_and_fields_fail_loudly(fake_runpod: FakeRunPod) -> None:
    with pytest.raises(runpod_error.QueryError, match="Cannot query field 'saveTemplate' on type 'Mutation'"):
        runpod.create_template("seer-template", "runpod/base:0.6.2")
    with pytest.raises(runpod_error.QueryError, match="Cannot query field 'endpoints' on type 'User'"):
        runpod.get_endpoints()
    with pytest.raises(runpod_error.QueryError, match="Cannot query field 'bogus' on type 'GpuType'"):
        run_graphql_query("{ gpuTypes { id bogus } }")
    assert [c.fields for c in fake_runpod.errors[-3:]] == [("saveTemplate",), ("myself",), ("gpuTypes",)]
    # The wire answer names it too, for any client.
    answer = requests.post(
        f"{fake_runpod.url}/graphql",
        data=json.dumps({"query": "mutation { podRent(input: {}) { id } }"}),
        headers={"Authorization": f"Bearer {fake_runpod.api_key}"},
        timeout=10,
    )
    assert "podRent" in answer.json()["errors"][0]["message"]


def test_unavailable_gpu_is_refused_and_nothing_is_made(fake_runpod: FakeRunPod) -> None:
    before = len(fake_runpod.pods)
    with pytest.raises(runpod_error.QueryError, match="no longer any instances available"):
        runpod.create_pod("seer-none", "runpod/base:0.6.2", "NVIDIA RTX A5000")
    assert fake_runpod.errors[-1].error == NO_CAPACITY and len(fake_runpod.pods) == before


def test_stop_and_resume_keep_the_pods_disk(
    fake_runpod: FakeRunPod, pods: list[str], user_key: tuple[Path, str], tmp_path: Path
) -> None:
    key, public = user_key
    made = runpod.create_pod("seer-stop", "runpod/base:0.6.2-cpu", ports="22/tcp", env={"PUBLIC_KEY": public})
    pods.append(made["id"])
    fake_runpod.host(made["id"]).exec_as_root("echo kept > /root/state").check()
    assert runpod.stop_pod(made["id"])["desiredStatus"] == "EXITED"
    assert runpod.get_pod(made["id"])["runtime"] is None
    assert runpod.resume_pod(made["id"], 0)["desiredStatus"] == "RUNNING"
    client = ssh(fake_runpod, made["id"], key, tmp_path)
    assert run(client, "cat /root/state") == (0, "kept\n")
    client.close()


def test_network_volume_outlives_its_pods(fake_runpod: FakeRunPod, pods: list[str]) -> None:
    volume = fake_runpod.add_network_volume("seer-models", size=100)
    first = runpod.create_pod("seer-nv-1", "runpod/base:0.6.2", A100, network_volume_id=volume)
    pods.append(first["id"])
    assert fake_runpod.operations()[-2:] == ["myself", "podFindAndDeployOnDemand"]  # the SDK finds its DC
    fake_runpod.host(first["id"]).exec_as_root("echo weights > /runpod-volume/model.bin").check()
    runpod.terminate_pod(first["id"])
    second = runpod.create_pod("seer-nv-2", "runpod/base:0.6.2-cpu", network_volume_id=volume)
    pods.append(second["id"])
    assert fake_runpod.host(second["id"]).exec_as_root("cat /runpod-volume/model.bin").stdout == "weights\n"


def test_delay_and_boot_delay(fake_runpod: FakeRunPod, pods: list[str]) -> None:
    fake_runpod.delay, fake_runpod.boot_delay = 0.3, 60
    try:
        started = time.monotonic()
        made = runpod.create_pod("seer-slow", "runpod/base:0.6.2-cpu", ports="22/tcp")
        pods.append(made["id"])
        assert time.monotonic() - started >= 0.3
        assert runpod.get_pod(made["id"])["runtime"] is None  # still "pulling its image"
    finally:
        fake_runpod.delay, fake_runpod.boot_delay = 0.0, 0.0
    assert booted(made["id"])["runtime"]["ports"][0]["privatePort"] == 22
