"""Docker tests run on a real engine: the one ``scripts/docker-engine`` starts (``.ci/run`` runs it).

Every test here skips, saying why, when no engine answers or the engine lacks the test base image
(no image can be pulled here: the script builds one with debootstrap). Containers use host
networking (the test engine has no bridge). Each run gets a model-cache volume of its own, removed
at the end; at the end no sandbox container this run started may still exist.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from _docker_kit import MODEL_VOLUME, engine_problem, run_containers
from _model_kit import MODEL_ID, tiny_dirs


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Any]:
    """The Docker client, or a skip saying why there is none."""
    problem = engine_problem()
    if problem:
        pytest.skip(f"no Docker engine for the tests: {problem}")
    from seer_docker.provider import docker_client

    client = docker_client()
    yield client
    from docker.errors import APIError, NotFound

    with contextlib.suppress(NotFound, APIError):
        client.volumes.get(MODEL_VOLUME).remove(force=True)


@pytest.fixture(autouse=True)
def _needs_engine(docker_engine: Any) -> None:
    """Every Docker test needs the engine."""


@pytest.fixture(scope="module", autouse=True)
def _no_leaked_containers(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if engine_problem():
        return
    from seer_docker.provider import DockerProvider, docker_client

    leaked = run_containers(docker_client())
    for sandbox_id in leaked:
        DockerProvider().terminate(sandbox_id)
    assert not leaked, f"{request.module.__name__} left docker sandboxes: {leaked}"


@pytest.fixture(scope="module")
def volume(docker_engine: Any) -> Iterator[str]:
    """A model-cache volume of this module's own, so what it downloads is measured from empty."""
    name = f"seer-test-models-{secrets.token_hex(4)}"
    yield name
    from docker.errors import NotFound

    try:
        docker_engine.volumes.get(name).remove(force=True)
    except NotFound:
        pass


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Any]:
    """The tiny model served on 127.0.0.1 (host networking lets containers reach it)."""
    from seer.testing.hub_server import HubServer

    dirs = tiny_dirs(tmp_path_factory, worker_id)
    with HubServer({MODEL_ID: dirs.model}) as server:
        yield server
