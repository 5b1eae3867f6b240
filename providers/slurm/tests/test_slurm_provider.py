"""seer-slurm's own promises, on the real test cluster: GRES and --time as asked, bad options
refused before anything is submitted, a queued job's reason as progress and a clean cancel, an
orphaned sandbox found and ended from a fresh ``$SEER_HOME``, a second start that downloads and
builds nothing."""

from __future__ import annotations

import json
import os
import posixpath
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _model_kit import MODEL_ID
from seer import Sandbox
from seer.config import SandboxConfig
from seer.errors import ConfigError
from seer.providers.base import MachineSpec, MachineStatus
from seer.testing.clients import killed_client
from seer_slurm.provider import SlurmProvider, job_minutes
from seer_slurm.testing import SlurmCluster

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_leaked_jobs")]


def _config(cluster: SlurmCluster, **changes: Any) -> SandboxConfig:
    options = cluster.options(**changes.pop("provider_options", {}))
    data: dict[str, Any] = {"provider": "slurm", "execution_mode": "cli", "timeout": 600}
    data.update(changes)
    return SandboxConfig.model_validate({**data, "provider_options": options})


def _next_job_id(cluster: SlurmCluster) -> int:
    """The id the next job gets, by submitting (and cancelling) a probe job."""
    out = cluster.run("sbatch --parsable --hold --job-name=probe --wrap true").check().stdout
    job = int(out.strip().split(";")[0])
    cluster.run(f"scancel {job}").check()
    return job + 1


def _seer_jobs(cluster: SlurmCluster) -> list[dict[str, str]]:
    return [j for j in cluster.jobs() if j["name"].startswith("seer-")]


def _job_field(cluster: SlurmCluster, job_id: str, name: str) -> str:
    out = cluster.run(f"scontrol show job -o {job_id}").check().stdout
    for item in out.split():
        key, _, value = item.partition("=")
        if key == name:
            return value
    raise AssertionError(f"no {name} in {out}")


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        (
            {"provider_options": {"partition": "nosuch"}},
            "provider_options.partition",
            "its partitions: debug, gpu",
        ),
        ({"gpu": "H100"}, "gpu", "offers gpu:a100:2"),
        ({"gpu": "A100", "gpu_count": 4}, "gpu_count", "at most 2"),
        ({"timeout": 3600, "provider_options": {"partition": "debug"}}, "timeout", "limit of 10:00"),
        ({"provider_options": {"constraint": "nosuchfeature"}}, "provider_options", "sbatch --test-only"),
        ({"provider_options": {"queue": "x"}}, "provider_options", "queue"),
        ({"provider_options": {"sbatch_args": ["--time=5"]}}, "provider_options", "--time is seer's"),
        # jobs run as the login user on the shared filesystem: a hidden model cannot stay hidden
        ({"models": [{"name": MODEL_ID, "hidden": True}]}, "models[0].hidden", "slurm provider cannot hide"),
    ],
)
def test_bad_options_refused_before_anything_is_submitted(
    slurm_cluster: SlurmCluster, changes: dict[str, Any], field: str, says: str
) -> None:
    before = _next_job_id(slurm_cluster)
    with pytest.raises(ConfigError) as info:
        Sandbox(_config(slurm_cluster, **changes)).start()
    assert any(f == field or f.startswith(field + ".") for f in info.value.fields), str(info.value)
    assert says in str(info.value)
    # nothing was submitted in between: no job has an id between the probes' (sbatch --test-only
    # takes an id of its own, but makes no job)
    after = _next_job_id(slurm_cluster)
    for job in range(before, after - 1):
        shown = slurm_cluster.run(f"scontrol show job -o {job}")
        assert shown.exit_code != 0 and "Invalid job id" in shown.stderr + shown.stdout, shown


def test_gres_time_and_listing(slurm_cluster: SlurmCluster) -> None:
    sb = Sandbox(_config(slurm_cluster, gpu="A100", gpu_count=2, timeout=300)).start(quiet=True)
    try:
        job_id = sb.machine.job_id  # type: ignore[attr-defined]
        assert "gres:gpu:a100:2" in _job_field(slurm_cluster, job_id, "TresPerNode")
        assert _job_field(slurm_cluster, job_id, "TimeLimit") == f"00:{job_minutes(300):02d}:00"
        assert _job_field(slurm_cluster, job_id, "Comment") == "seer"
        info = next(m for m in SlurmProvider().list() if m.id == sb.sandbox_id)
        assert info.status is MachineStatus.RUNNING
        assert info.labels["slurm.job_id"] == job_id
        node = info.labels["slurm.node"]
        assert node in slurm_cluster.node_names
        assert info.labels["slurm.state"] == "RUNNING"
        assert info.labels["slurm.limit"] == f"{job_minutes(300)}:00"
        assert ":" in info.labels["slurm.elapsed"]
        detail = f"job {job_id} RUNNING on {info.labels['slurm.node']}, "
        assert info.labels["seer.detail"].startswith(detail) and info.labels["seer.detail"].endswith(
            " of 6:00"
        )
        # commands run on the job's node, which has no route out
        assert sb.exec("hostname").stdout.strip() == info.labels["slurm.node"]
        assert "00000000" not in sb.exec("awk 'NR>1 {print $2}' /proc/net/route").stdout.split()
    finally:
        sb.terminate()
    assert sb.status is MachineStatus.TERMINATED
    # terminate returns once the job has left the queue (scancel alone returns while the job's
    # supervisor still ends the sandbox): nothing of the sandbox runs on the node any more
    assert not [j for j in _seer_jobs(slurm_cluster) if sb.sandbox_id in j["name"]]
    assert not [cmd for _, cmd in slurm_cluster.user_processes(node) if sb.sandbox_id in cmd]
    # the supervisor removed its job script, node file and output as its job ended
    left = f"ls ~/.seer-slurm/slurm/ | grep {sb.sandbox_id} || true"
    _wait(lambda: not slurm_cluster.run(left).stdout.strip(), "the job's files to be removed")


def test_queued_job_reports_its_reason_and_cancels_cleanly(slurm_cluster: SlurmCluster) -> None:
    blockers = [
        slurm_cluster.run("sbatch --parsable --job-name=blocker --gres=gpu:a100:2 --wrap 'sleep 600'")
        .check()
        .stdout.strip()
        for _ in slurm_cluster.node_names
    ]
    try:
        for job in blockers:  # every GPU of the cluster is held
            _wait(
                lambda job=job: _job_field(slurm_cluster, job, "JobState") == "RUNNING", "the blockers to run"
            )
        seen: list[str] = []

        def progress(line: str) -> None:
            seen.append(line)
            if "waiting in the queue: Resources" in line:
                raise KeyboardInterrupt  # Ctrl-C while it waits

        config = _config(slurm_cluster, gpu="A100")
        provider = SlurmProvider()
        spec = MachineSpec(
            name="queued",
            timeout=300,
            gpu="A100",
            gpu_count=1,
            options=provider.parse_options(config),
            progress=progress,
        )
        with pytest.raises(KeyboardInterrupt):
            provider.create(spec)
        assert any("waiting in the queue: Resources" in line for line in seen), seen
        _wait(lambda: not _seer_jobs(slurm_cluster), "the queued job to be cancelled")
    finally:
        slurm_cluster.run(f"scancel {' '.join(blockers)}")


def test_orphan_found_used_and_ended_from_a_fresh_home(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(slurm_cluster, timeout=600)
    sandbox_id = killed_client(config, name="orphan")
    fresh = _fresh_home(slurm_cluster, tmp_path)
    env = {**os.environ, **fresh}
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "seer", "ls", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert listed.returncode == 0, listed.stderr
        assert sandbox_id in listed.stdout
        used = subprocess.run(
            [
                sys.executable,
                "-c",
                f"from seer import Sandbox; print(Sandbox.attach({sandbox_id!r}).exec('hostname').stdout)",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert used.returncode == 0, used.stderr
        node = used.stdout.strip()
        assert node in slurm_cluster.node_names
        assert any(sandbox_id in cmd for _, cmd in _marked(slurm_cluster, node, sandbox_id))
        down = subprocess.run(
            [sys.executable, "-m", "seer", "down", sandbox_id],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert down.returncode == 0, down.stderr
    finally:
        for key, value in fresh.items():
            monkeypatch.setenv(key, value)
        SlurmProvider().terminate(sandbox_id)
    _wait(lambda: not _seer_jobs(slurm_cluster), "squeue to show nothing of seer's")
    for name in slurm_cluster.node_names:
        assert not _marked(slurm_cluster, name, sandbox_id), f"processes of {sandbox_id} left on {name}"


def test_slurm_ends_an_orphan_at_its_time_limit(slurm_cluster: SlurmCluster) -> None:
    """No client and no seer watchdog needed: SLURM's own --time ends the job, and the supervisor
    ends the sandbox with it (its processes killed, its record ``expired``)."""
    sandbox_id = killed_client(_config(slurm_cluster, timeout=600), name="time-limit")
    try:
        job = next(j for j in _seer_jobs(slurm_cluster) if j["name"] == f"seer-{sandbox_id}")
        node = job["node"]
        assert _marked(slurm_cluster, node, sandbox_id), "the sandbox's watchdog runs on its node"
        # what --time does when it comes: the job's limit, lowered below its run time
        slurm_cluster.run(f"scontrol update JobId={job['id']} TimeLimit=0:01").check()
        _wait(lambda: not _seer_jobs(slurm_cluster), "SLURM to end the job at its time limit", timeout=120)
        assert not _marked(slurm_cluster, node, sandbox_id), "processes of the sandbox outlived its job"
        meta = slurm_cluster.run(f"cat ~/.seer-slurm/sandboxes/{sandbox_id}/meta.json").check().stdout
        assert json.loads(meta)["status"] == "expired"
        assert SlurmProvider().attach(sandbox_id).status() is MachineStatus.EXPIRED
    finally:
        SlurmProvider().terminate(sandbox_id)


def test_list_removes_records_of_sandboxes_ended_long_ago(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, recent = "slurm-00000000a1d0", "slurm-00000000fe57"
    for sandbox_id, ended in ((old, 1.0), (recent, time.time())):
        record = json.dumps({"id": sandbox_id, "status": "expired", "ended_at": ended})
        slurm_cluster.run(
            f"mkdir -p ~/.seer-slurm/sandboxes/{sandbox_id} ~/.seer-slurm/slurm "
            f"&& echo '{record}' > ~/.seer-slurm/sandboxes/{sandbox_id}/meta.json "
            f"&& touch ~/.seer-slurm/slurm/{sandbox_id}.log"
        ).check()
    for key, value in _fresh_home(slurm_cluster, tmp_path).items():
        monkeypatch.setenv(key, value)
    SlurmProvider().list()
    listing = slurm_cluster.run("ls ~/.seer-slurm/sandboxes ~/.seer-slurm/slurm").check().stdout
    assert old not in listing and recent in listing


def _fresh_home(cluster: SlurmCluster, tmp_path: Path) -> dict[str, str]:
    """The environment of a client that knows nothing of the cluster's sandboxes (a fresh
    ``$SEER_HOME``) and names the cluster in ``$SEER_SLURM_HOSTS``, by an entry of its SSH hosts
    file that holds the cluster's key, as on another machine of the user's."""
    hosts = tmp_path / "ssh-hosts.toml"
    # JSON's strings, numbers and booleans are TOML's too
    entries = "".join(f"{k} = {json.dumps(v)}\n" for k, v in cluster.options().items())
    hosts.write_text("[hosts.cluster]\n" + entries)
    return {
        "SEER_HOME": str(tmp_path / "fresh-home"),
        "SEER_SSH_HOSTS_FILE": str(hosts),
        "SEER_SLURM_HOSTS": "cluster",
    }


def _marked(cluster: SlurmCluster, node: str, sandbox_id: str) -> list[tuple[int, str]]:
    """Processes on ``node`` carrying the sandbox's mark (its id, in their environment)."""
    out = (
        cluster.node(node)
        .exec(f"grep -l 'SEER_SSH_SANDBOX={sandbox_id}' /proc/[0-9]*/environ 2>/dev/null || true")
        .stdout
    )
    pids = [int(p.split("/")[2]) for p in out.split() if p.count("/") == 3]
    return [(pid, str(sandbox_id)) for pid in pids]


def test_second_start_downloads_nothing_and_builds_nothing(slurm_cluster: SlurmCluster, hub: Any) -> None:
    config = _config(
        slurm_cluster,
        models=[{"name": MODEL_ID}],
        env=hub.env(),
        python_packages=["msgpack"],
        provider_options={"base_dir": "~/.seer-slurm-second-start"},
    )
    envs = "/home/seer/.seer-slurm-second-start/envs"
    first = Sandbox(config).start(quiet=True)
    try:
        assert first.model_handles[0].bytes_downloaded > 0
    finally:
        first.terminate()
    built = slurm_cluster.run(f"stat -c '%n %Y' {envs}/*/.seer-env-complete").check().stdout
    second = Sandbox(config).start(quiet=True)
    try:
        assert second.model_handles[0].bytes_downloaded == 0
        assert slurm_cluster.run(f"stat -c '%n %Y' {envs}/*/.seer-env-complete").check().stdout == built
        # the model was fetched on the login node; the offline node reads it from the shared cache
        path = second.model_handles[0].path
        assert posixpath.isabs(path)
        assert second.exec(["test", "-d", path]).exit_code == 0
    finally:
        second.terminate()


def _wait(check: Any, what: str, timeout: float = 60) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)
