"""Helpers shared by the Docker tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import os
import secrets
from typing import Any

from seer.config import SandboxConfig

#: The base image the tests build sandbox images on (scripts/docker-engine makes it).
BASE_IMAGE = os.environ.get("SEER_DOCKER_TEST_IMAGE", "seer-test-base:bookworm")
#: This run's model-cache volume (one per test process).
MODEL_VOLUME = f"seer-test-models-{secrets.token_hex(4)}"


def engine_problem() -> str | None:
    """Why the Docker tests cannot run here, or None."""
    from seer_docker.provider import DockerProvider, docker_client

    availability = DockerProvider.availability()
    if not availability.usable:
        return f"{availability.reason}; start one with scripts/docker-engine (as root)"
    from docker.errors import ImageNotFound

    try:
        docker_client().images.get(BASE_IMAGE)
    except ImageNotFound:
        return f"the Docker engine has no test base image {BASE_IMAGE}; build it with scripts/docker-engine"
    return None


def docker_config(**changes: Any) -> SandboxConfig:
    """A docker sandbox config on the test base image, host networking and this run's volume."""
    options = {"image": BASE_IMAGE, "network": "host", "model_volume": MODEL_VOLUME}
    options.update(changes.pop("provider_options", {}))
    data: dict[str, Any] = {"provider": "docker", "execution_mode": "cli", "timeout": 900}
    data.update(changes)
    data["provider_options"] = options
    return SandboxConfig.model_validate(data)


def run_containers(client: Any) -> list[str]:
    """Names of the sandbox containers this run started that still exist."""
    from seer.state import seer_home

    ledger = seer_home() / "docker" / "sandboxes"
    mine = {p.stem for p in ledger.glob("*.json")} if ledger.is_dir() else set()
    found = client.containers.list(all=True, ignore_removed=True, filters={"label": "seer.sandbox"})
    return sorted(c.labels["seer.sandbox"] for c in found if c.labels["seer.sandbox"] in mine)
