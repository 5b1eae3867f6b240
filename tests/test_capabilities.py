"""Capabilities, not silence: what a provider cannot honour is refused before anything is made.

``RepoConfig.dockerfile`` needs a provider that builds images (``dockerfile_repos``: docker);
``SandboxConfig.debug`` needs one that starts a VS Code server (``code_server``: local, docker,
ssh, slurm, runpod and modal; the toy provider refuses it). Before, the local provider ignored a
Dockerfile and ``debug=True`` started nothing, silently.
The conformance suite checks the same of every provider that lacks either capability.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from seer import Sandbox, SandboxConfig
from seer.errors import ConfigError
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


@pytest.mark.parametrize("name", ["toy"])
def test_debug_is_refused_where_no_code_server_is_offered(name: str) -> None:
    from seer import plugins

    provider = plugins.providers()[name].cls
    assert not provider.capabilities.code_server  # type: ignore[attr-defined]
    problems = provider.check_config(SandboxConfig(debug=True, provider=name))  # type: ignore[attr-defined]
    debug = [p.message for p in problems if p.field == "debug"]
    assert len(debug) == 1 and "VS Code server" in debug[0] and "capability: code_server" in debug[0]


@pytest.mark.parametrize("name", ["runpod", "modal"])
def test_debug_is_offered_by_the_cloud_providers(name: str) -> None:
    from seer import plugins

    provider = plugins.providers()[name].cls
    assert provider.capabilities.code_server  # type: ignore[attr-defined]
    assert "code_server_from" in provider.options_model.model_fields  # type: ignore[attr-defined]


def test_both_refusals_reported_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # local offers debug, but not where code-server is missing and cannot be installed (offline)
    monkeypatch.setenv("SEER_TOOLS_DIR", str(tmp_path))
    monkeypatch.setenv("SEER_OFFLINE", "1")
    before = running_local_sandboxes()
    with pytest.raises(ConfigError) as info:
        Sandbox(SandboxConfig(debug=True, repos=[DOCKERFILE_REPO], execution_mode="cli")).start()
    assert info.value.fields == ["repos[0].dockerfile", "debug"]
    assert running_local_sandboxes() == before


@pytest.mark.e2e
def test_docker_honours_dockerfiles_and_debug() -> None:
    from seer_docker.provider import DockerProvider

    caps = DockerProvider.capabilities
    assert caps.dockerfile_repos and caps.code_server
    config = SandboxConfig(debug=True, repos=[DOCKERFILE_REPO], provider="docker")
    fields = [p.field for p in DockerProvider.check_config(config)]
    assert "debug" not in fields and "repos[0].dockerfile" not in fields


def test_capabilities_default_to_not_offered() -> None:
    assert not Capabilities().dockerfile_repos and not Capabilities().code_server


@pytest.mark.parametrize("name", ["docker", "ssh", "slurm", "runpod", "modal"])
def test_code_server_from_without_debug_is_named_as_ignored(name: str, tmp_path: Path) -> None:
    """Every provider taking ``code_server_from`` warns, naming the field, when debug is off (one
    options block often serves runs with and without debug, so it is not refused)."""
    import warnings

    from seer import plugins
    from seer.providers import code_server as installer

    provider = plugins.providers()[name].cls
    assert "code_server_from" in provider.options_model.model_fields  # type: ignore[attr-defined]
    complete = Path(installer.layout(str(tmp_path))["complete"])
    complete.parent.mkdir(parents=True)
    complete.write_text(installer.VERSION)
    options = {"code_server_from": str(tmp_path)}
    with pytest.warns(UserWarning, match=r"provider_options\.code_server_from is ignored.*debug=True"):
        provider.check_config(SandboxConfig(provider=name, provider_options=options))  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        provider.check_config(SandboxConfig(provider=name))  # type: ignore[attr-defined]
