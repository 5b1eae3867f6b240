"""What the Docker provider does beyond the contract: cached images, the shared model volume,
sandboxes that outlive a killed client, config errors, repo Dockerfiles, system packages and
secrets kept out of the container's configuration."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _docker_kit import BASE_IMAGE, docker_config
from _model_kit import MODEL_ID
from _progress_kit import RecordingProgress
from seer import Sandbox
from seer.errors import ConfigError
from seer.testing import killed_client
from seer.testing.conformance import wait_for
from seer_docker.provider import DockerProvider

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _sandbox_images(client: Any) -> dict[str, str]:
    return {img.id: img.attrs["Created"] for img in client.images.list(name="seer-sandbox")}


def _alive(client: Any, sandbox_id: str) -> bool:
    found = client.containers.list(
        all=True, ignore_removed=True, filters={"label": f"seer.sandbox={sandbox_id}"}
    )
    return any(c.status == "running" for c in found)


def _containers(client: Any, sandbox_id: str) -> list[Any]:
    return client.containers.list(
        all=True, ignore_removed=True, filters={"label": f"seer.sandbox={sandbox_id}"}
    )


def _model_config(hub: Any, volume: str, **changes: Any) -> Any:
    return docker_config(
        models=[{"name": MODEL_ID}], env=hub.env(), provider_options={"model_volume": volume}, **changes
    )


# --- must show: the second start builds nothing and downloads nothing --------------------------
def test_second_start_rebuilds_nothing_and_downloads_nothing(
    docker_engine: Any, hub: Any, volume: str
) -> None:
    config = _model_config(hub, volume)
    first_progress = RecordingProgress()
    started = time.monotonic()
    with Sandbox(config, progress=first_progress).start(name="model-first") as sb:
        first_seconds = time.monotonic() - started
        first = sb.model_handles
        cache_bytes = int(sb.exec(["du", "-sb", sb.machine.model_cache_dir()], check=True).stdout.split()[0])
    served = hub.bytes_served
    assert served > 0 and first[0].bytes_downloaded > 0, "the first start fetched the model from the hub"
    images = _sandbox_images(docker_engine)

    second_progress = RecordingProgress()
    started = time.monotonic()
    with Sandbox(config, progress=second_progress).start(name="model-second") as sb:
        second_seconds = time.monotonic() - started
        second = sb.model_handles
        cache_after = int(sb.exec(["du", "-sb", sb.machine.model_cache_dir()], check=True).stdout.split()[0])
        assert sb.exec(["test", "-f", f"{second[0].path}/config.json"]).ok
        (container,) = _containers(docker_engine, sb.sandbox_id)
        ran_on = container.image
    # Nothing built: no build step ran, the second sandbox ran on an image the engine already held
    # (same id, same creation time), and no image of its tags was made since. (Other tests on the
    # shared engine may build images of their own configs meanwhile: those are not compared.)
    assert any("is cached: nothing to build" in line for line in second_progress.lines), second_progress.lines
    assert not any(line.startswith(("building", "Step ")) for line in second_progress.lines)
    assert images.get(ran_on.id) == ran_on.attrs["Created"]
    assert ran_on.tags, "the sandbox image is tagged by its config"
    for tag in ran_on.tags:
        assert {img.id for img in docker_engine.images.list(name=tag)} == {ran_on.id}, tag
    # Nothing downloaded: the hub served no more bytes, and the shared cache did not grow.
    assert hub.bytes_served == served
    assert [h.bytes_downloaded for h in second] == [0]
    assert cache_after == cache_bytes
    assert (second[0].commit, second[0].path) == (first[0].commit, first[0].path)
    print(
        f"\ndocker start with a model: first {first_seconds:.1f}s ({served} bytes downloaded), "
        f"second {second_seconds:.1f}s (0 bytes, no build)"
    )


def test_a_changed_config_builds_a_new_image_and_reports_the_build(docker_engine: Any) -> None:
    # A package nobody else asks for: this config's image cannot exist yet in this run.
    config = docker_config(python_packages=["six"], env={"MARK": secrets.token_hex(4)})
    progress = RecordingProgress()
    with Sandbox(config, progress=progress).start(name="changed") as sb:
        assert sb.exec_python("import six; print(six.__name__)", check=True).stdout == "six\n"
        tag = docker_engine.containers.get(sb.sandbox_id).labels["seer.image"]
    built = any(line.startswith("building image") for line in progress.lines)
    cached = any("is cached" in line for line in progress.lines)
    assert built != cached, progress.lines  # one or the other, said in the progress
    if built:  # the build's own output was streamed as progress
        assert any(line.startswith("Step ") for line in progress.lines)
    # env is not part of the image: the same packages with other env reuse it
    again = RecordingProgress()
    with Sandbox(docker_config(python_packages=["six"]), progress=again).start(name="changed-2") as sb:
        assert docker_engine.containers.get(sb.sandbox_id).labels["seer.image"] == tag
    assert any("is cached: nothing to build" in line for line in again.lines)


# --- must show: a killed client leaves nothing once seer down (or the timeout) runs ------------
def _seer(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SEER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "seer.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_killed_client_then_seer_down_leaves_no_container_and_keeps_the_models(
    docker_engine: Any, hub: Any, volume: str, tmp_path: Path
) -> None:
    config = _model_config(hub, volume, timeout=600)
    sandbox_id = killed_client(config, name="killed-client")
    assert _alive(docker_engine, sandbox_id), "the sandbox outlives its client"
    # Another machine's client (a fresh SEER_HOME: no ledger) finds it by its labels alone.
    elsewhere = tmp_path / "elsewhere"
    listed = _seer("ls", "--json", home=elsewhere)
    assert listed.returncode == 0, listed.stderr
    rows = {row["sandbox_id"]: row for row in json.loads(listed.stdout)}
    assert rows[sandbox_id]["status"] == "running" and rows[sandbox_id]["name"] == "killed-client"
    down = _seer("down", sandbox_id, home=elsewhere)
    assert down.returncode == 0, down.stderr
    wait_for(
        lambda: not _containers(docker_engine, sandbox_id),
        timeout=30,
        what="the container to be removed",
        interval=0.25,
    )
    # The model volume is kept, and the model in it: the next start downloads nothing.
    assert docker_engine.volumes.get(volume).attrs["Labels"]["seer.managed"] == "model-cache"
    served = hub.bytes_served
    with Sandbox(config).start(name="after-kill") as sb:
        assert [h.bytes_downloaded for h in sb.model_handles] == [0]
    assert hub.bytes_served == served


def test_killed_client_sandbox_ends_at_its_timeout(docker_engine: Any, tmp_path: Path) -> None:
    sandbox_id = killed_client(docker_config(timeout=15), name="timed-out")
    assert _alive(docker_engine, sandbox_id)
    # No client, no seer command: the container's own timer ends it, and auto-remove removes it.
    wait_for(
        lambda: not _containers(docker_engine, sandbox_id),
        timeout=60,
        what="the in-container timeout",
        interval=0.25,
    )
    listed = _seer("ls", "--json", home=tmp_path / "elsewhere")
    assert sandbox_id not in {row["sandbox_id"] for row in json.loads(listed.stdout)}


# --- config errors: named, and before anything is made ----------------------------------------
def _no_new_containers(client: Any, before: set[str]) -> None:
    now = {
        c.id for c in client.containers.list(all=True, ignore_removed=True, filters={"label": "seer.sandbox"})
    }
    assert now <= before


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        ({"netwrok": "host"}, "provider_options.netwrok", ["unknown field"]),
        ({"network": "bridge"}, "provider_options.network", ["'host'"]),
        ({"model_cache": "relative/dir"}, "provider_options.model_cache", ["absolute host path"]),
        ({"model_volume": "bad name"}, "provider_options.model_volume", ["volume name"]),
        ({"workdir": "/"}, "provider_options.workdir", ["other than '/'"]),
        ({"shm_size": "lots"}, "provider_options.shm_size", ["not a size"]),
        ({"image": "two words"}, "provider_options.image", ["not an image reference"]),
    ],
    ids=["unknown", "network", "model-cache", "volume", "workdir", "shm", "image"],
)
def test_bad_provider_options_fail_before_anything_is_made(
    docker_engine: Any, options: dict[str, Any], field: str, words: list[str]
) -> None:
    before = {
        c.id
        for c in docker_engine.containers.list(
            all=True, ignore_removed=True, filters={"label": "seer.sandbox"}
        )
    }
    with pytest.raises(ConfigError) as info:
        Sandbox(docker_config(provider_options=options)).start()
    assert field in info.value.fields, str(info.value)
    for word in words:
        assert word in str(info.value)
    _no_new_containers(docker_engine, before)


def test_gpu_on_a_host_without_gpus_is_a_config_error(docker_engine: Any) -> None:
    from seer.providers.local.provider import detect_gpus

    if detect_gpus():
        pytest.skip("this Docker host has an NVIDIA GPU")
    before = {
        c.id
        for c in docker_engine.containers.list(
            all=True, ignore_removed=True, filters={"label": "seer.sandbox"}
        )
    }
    with pytest.raises(ConfigError) as info:
        Sandbox(docker_config(gpu="A100")).start()
    assert info.value.fields == ["gpu"]
    assert "no NVIDIA GPU" in str(info.value) and "gpu=None" in str(info.value)
    _no_new_containers(docker_engine, before)


def test_only_one_repo_may_give_the_dockerfile(tmp_path: Path) -> None:
    one = _git_repo(tmp_path / "one", {"Dockerfile": f"FROM {BASE_IMAGE}\n"})
    two = _git_repo(tmp_path / "two", {"Dockerfile": f"FROM {BASE_IMAGE}\n"})
    config = docker_config(
        repos=[{"url": str(one), "dockerfile": "Dockerfile"}, {"url": str(two), "dockerfile": "Dockerfile"}]
    )
    problems = DockerProvider.check_config(config)
    assert [p.field for p in problems] == ["repos[1].dockerfile"]


# --- images from repos, system packages --------------------------------------------------------
def _git_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=path, check=True, env=env, capture_output=True)
    return path


def test_repo_dockerfile_builds_the_base_and_system_packages_are_installed(tmp_path: Path) -> None:
    marker = secrets.token_hex(6)
    repo = _git_repo(
        tmp_path / "tools",
        {
            "Dockerfile": f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\nRUN echo {marker} > /opt/from-repo.txt\n",
            "tool.py": "print('tool')\n",
        },
    )
    config = docker_config(repos=[{"url": str(repo), "dockerfile": "Dockerfile"}], system_packages=["jq"])
    with Sandbox(config).start(name="repo-image") as sb:
        assert sb.exec(["cat", "/opt/from-repo.txt"], check=True).stdout == f"{marker}\n"
        assert sb.exec("echo '{\"a\": 7}' | jq .a", check=True).stdout == "7\n"
        # core still clones the repo into the workdir
        assert sb.read_file("tools/tool.py") == "print('tool')\n"


# --- secrets stay out of what Docker keeps -----------------------------------------------------
def test_secrets_reach_commands_but_not_the_container_config_or_a_snapshot(
    docker_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = f"s3cret-{secrets.token_hex(8)}"
    monkeypatch.setenv("SEER_DOCKER_TEST_SECRET", value)
    config = docker_config(secrets=["SEER_DOCKER_TEST_SECRET"])
    provider = DockerProvider()
    with Sandbox(config).start(name="secrets") as sb:
        assert sb.exec('printf %s "$SEER_DOCKER_TEST_SECRET"', check=True).stdout == value
        again = Sandbox.attach(sb.sandbox_id)  # a new handle reads them from the container
        assert again.exec(["printenv", "SEER_DOCKER_TEST_SECRET"], check=True).stdout == f"{value}\n"
        inspected = json.dumps(docker_engine.api.inspect_container(sb.sandbox_id))
        assert value not in inspected
        snap = sb.snapshot("no secrets")
        try:
            assert value not in json.dumps(docker_engine.api.inspect_image(snap.data["image"]))
        finally:
            provider.delete_snapshot(snap)


# --- snapshots leave nothing behind once deleted -----------------------------------------------
def test_delete_snapshot_removes_its_image_and_the_images_built_on_it(docker_engine: Any) -> None:
    provider = DockerProvider()
    config = docker_config()
    with Sandbox(config).start(name="snap-source") as sb:
        sb.write_file("kept.txt", "kept")
        snap = sb.snapshot("to delete")
    with Sandbox.from_snapshot(snap, config, name="snap-restored") as restored:
        assert restored.read_file("kept.txt") == "kept"
    labelled = {"label": f"seer.snapshot={snap.id}"}
    assert len(docker_engine.images.list(filters=labelled)) >= 2  # the snapshot, and one built on it
    provider.delete_snapshot(snap)
    assert docker_engine.images.list(filters=labelled) == []
    provider.delete_snapshot(snap)  # idempotent


def test_remote_repos_get_git_in_the_image() -> None:
    from seer_docker.image import render_dockerfile

    plain = render_dockerfile(
        "base", system_packages=[], python_packages=[], wheel_name="w.whl", workdir="/w"
    )
    with_git = render_dockerfile(
        "base", system_packages=[], python_packages=[], wheel_name="w.whl", workdir="/w", needs_git=True
    )
    assert "git" not in plain.replace("seer", "")
    assert "apt-get install -y -qq --no-install-recommends git" in with_git
