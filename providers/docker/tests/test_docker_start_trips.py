"""What a start, an exec and a teardown ask of a real Docker engine (#27), counted on the SDK's
HTTP session: nothing beyond the hand-written ``containers.run`` + ``exec_run`` + ``remove`` but
the guarantees named in docs/benchmarks.md; and the paths that keep those guarantees when a
process's memory of the engine is stale: an image removed between two starts is made again, and a
sandbox this process did not make is found by seer's label before anything is removed."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from _docker_kit import BASE_IMAGE, docker_config
from seer import Sandbox
from seer.progress import Progress
from seer.providers.base import MachineStatus
from seer_docker import provider as docker_provider
from seer_docker.provider import DockerProvider

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The engine calls this process makes, as ``METHOD /path`` (the API version left out)."""
    made: list[str] = []
    real = requests.Session.request

    def counting(self: requests.Session, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        path = url.split("/v1.", 1)[-1].split("/", 1)[-1] if "/v1." in url else url
        made.append(f"{method} /{path.split('?')[0]}")
        return real(self, method, url, *args, **kwargs)

    monkeypatch.setattr(requests.Session, "request", counting)
    yield made


def _shapes(made: list[str], cid: str) -> list[str]:
    return [c.replace(cid, "{id}") for c in made]


class _Lines(Progress):
    def __init__(self) -> None:
        super().__init__(enabled=False)
        self.lines: list[str] = []

    def update(self, text: str) -> None:
        self.lines.append(text)


def test_a_cycle_asks_the_engine_only_what_its_guarantees_need(calls: list[str]) -> None:
    config = docker_config()
    Sandbox(config).start(quiet=True).terminate()  # this process has seen the image now
    calls.clear()
    sandbox = Sandbox(config).start(quiet=True)
    try:
        cid = sandbox.machine._cid  # type: ignore[attr-defined]
        start = _shapes(calls, cid)
        calls.clear()
        assert sandbox.exec("true").exit_code == 0
        calls.clear()
    finally:
        sandbox.terminate()
    teardown = _shapes(calls, cid)
    # the engine's ping (a clear error when there is none), the base image looked up by its
    # (movable) name, then what the hand-written containers.run does less its reload
    assert start[0] == "GET /_ping", start
    assert start[1] == f"GET /images/{BASE_IMAGE}/json", start
    assert start[2:] == ["POST /containers/create", "POST /containers/{id}/start"], start
    assert not any(c.startswith(("GET /volumes", "GET /images/seer-sandbox")) for c in start), start
    # teardown: the two folders' archive stats, the status check that tells "no folder" from
    # "no container" (neither folder exists here), the removal; no list by label, no status after
    assert teardown == [
        "HEAD /containers/{id}/archive",
        "HEAD /containers/{id}/archive",
        "GET /containers/{id}/json",
        "DELETE /containers/{id}",
    ], teardown
    assert sandbox.machine.status() is MachineStatus.TERMINATED
    assert DockerProvider().attach(sandbox.sandbox_id).status() is MachineStatus.TERMINATED


def test_an_image_removed_between_two_starts_is_made_again(docker_engine: Any) -> None:
    # a workdir nobody else uses: an image of this test's own (its layers come from the build cache)
    config = docker_config(provider_options={"workdir": f"/work-{secrets.token_hex(4)}"})
    first = Sandbox(config).start(quiet=True)
    try:
        tag = docker_engine.containers.get(first.sandbox_id).labels["seer.image"]
    finally:
        first.terminate()
    try:
        docker_engine.images.remove(tag)
        progress = _Lines()
        again = Sandbox(config, progress=progress).start()
        try:
            assert again.exec("pwd", check=True).stdout.strip() == config.provider_options["workdir"]
            assert docker_engine.containers.get(again.sandbox_id).labels["seer.image"] == tag
        finally:
            again.terminate()
        # this process remembered the image: it learnt of the removal from the create, and built
        assert any(line.startswith("building image") for line in progress.lines), progress.lines
        assert docker_engine.images.get(tag).tags == [tag]
    finally:
        from docker.errors import ImageNotFound

        try:
            docker_engine.images.remove(tag)
        except ImageNotFound:
            pass


def test_a_sandbox_this_process_did_not_make_is_found_by_label_before_removal(
    docker_engine: Any, calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a container named like a sandbox but not seer's: terminate must never remove it
    decoy_id = f"docker-{secrets.token_hex(5)}"
    decoy = docker_engine.containers.run(
        BASE_IMAGE, ["sleep", "300"], name=decoy_id, detach=True, auto_remove=True, network_mode="host"
    )
    try:
        sandbox = Sandbox(docker_config()).start(quiet=True)
        cid = sandbox.machine._cid  # type: ignore[attr-defined]
        # as another process: it knows no container ids of this one's
        monkeypatch.setattr(docker_provider, "_made", {})
        calls.clear()
        DockerProvider().terminate(sandbox.sandbox_id)
        assert _shapes(calls, cid) == ["GET /containers/json", "DELETE /containers/{id}"], calls
        assert sandbox.machine.status() is MachineStatus.TERMINATED
        sandbox.terminate()  # idempotent: nothing left to copy or remove

        DockerProvider().terminate(decoy_id)
        decoy.reload()
        assert decoy.status == "running", "terminate removed a container that is not seer's"
    finally:
        decoy.remove(force=True)
