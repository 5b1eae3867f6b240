"""Capabilities, not silence: what a provider cannot honour is refused before anything is made.

``RepoConfig.dockerfile`` needs a provider that builds images (``dockerfile_repos``: docker);
``SandboxConfig.debug`` needs one that starts a VS Code server (``code_server``: none of seer's own
yet). Before, the local provider ignored a Dockerfile and ``debug=True`` started nothing, silently.
The conformance suite checks the same of every provider that lacks either capability.
"""

from __future__ import annotations

import pytest
from seer import Sandbox, SandboxConfig
from seer.errors import ConfigError
from seer.preflight import preflight
from seer.providers.base import Capabilities
from seer.providers.local.provider import LocalProvider

pytestmark = pytest.mark.unit

DOCKERFILE_REPO = {"url": "example-org/example-repo", "dockerfile": "docker/Dockerfile"}


def running_local_sandboxes() -> list[str]:
    return [m.id for m in LocalProvider().list() if m.status.alive]


def test_local_refuses_a_repo_dockerfile_before_provisioning() -> None:
    before = running_local_sandboxes()
    config = SandboxConfig(repos=["example-org/other", DOCKERFILE_REPO], execution_mode="cli")
    with pytest.raises(ConfigError) as info:
        Sandbox(config).start()
    assert info.value.fields == ["repos[1].dockerfile"]
    message = str(info.value)
    assert "'local'" in message and "capability: dockerfile_repos" in message
    assert running_local_sandboxes() == before


def test_debug_is_refused_where_no_code_server_is_offered() -> None:
    before = running_local_sandboxes()
    with pytest.raises(ConfigError) as info:
        Sandbox(SandboxConfig(debug=True, execution_mode="cli")).start()
    assert info.value.fields == ["debug"]
    assert "VS Code server" in str(info.value) and "capability: code_server" in str(info.value)
    assert running_local_sandboxes() == before


def test_both_refusals_reported_together() -> None:
    with pytest.raises(ConfigError) as info:
        preflight(SandboxConfig(debug=True, repos=[DOCKERFILE_REPO]), dotenv=None)
    assert info.value.fields == ["repos[0].dockerfile", "debug"]


@pytest.mark.e2e
def test_docker_honours_dockerfiles_and_refuses_debug() -> None:
    from seer_docker.provider import DockerProvider

    caps = DockerProvider.capabilities
    assert caps.dockerfile_repos and not caps.code_server
    config = SandboxConfig(debug=True, repos=[DOCKERFILE_REPO], provider="docker")
    fields = [p.field for p in DockerProvider.check_config(config)]
    assert "debug" in fields and "repos[0].dockerfile" not in fields


def test_capabilities_default_to_not_offered() -> None:
    assert not Capabilities().dockerfile_repos and not Capabilities().code_server
