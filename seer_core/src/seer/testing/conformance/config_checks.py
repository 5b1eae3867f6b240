"""Registration and config checks: a provider is registered as named, and refuses what it cannot do
before anything is provisioned."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from seer import plugins
from seer.config import GPU_CATALOGUE, SandboxConfig
from seer.errors import ConfigError
from seer.providers.base import Capabilities, Provider
from seer.sandbox import Sandbox
from seer.testing.conformance.base import ConformanceBase
from seer.testing.conformance.helpers import alive_ids


class ConfigChecks(ConformanceBase):
    """Registration and config checks: a provider is registered as named, and refuses what it cannot do
    before anything is provisioned."""

    def test_provider_is_registered(self, provider: Provider) -> None:
        reg = plugins.providers()[self.provider_name]
        cls = type(provider)
        assert reg.cls is cls
        assert cls.name == self.provider_name
        assert isinstance(cls.capabilities, Capabilities)
        assert cls.capabilities.port_exposure in ("loopback", "published", "ssh-forward", "tunnel")
        avail = cls.availability()
        assert avail.usable, f"provider {self.provider_name!r} is not usable here: {avail.reason}"

    def test_base_config_accepted(self, provider: Provider, sandbox_config: SandboxConfig) -> None:
        assert type(provider).check_config(self.derive(sandbox_config)) == []

    def test_gpu_not_offered_fails_before_provisioning(
        self, provider: Provider, capabilities: Capabilities, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        missing = sorted(set(GPU_CATALOGUE) - set(capabilities.gpu_types))
        if not missing:
            pytest.skip("provider offers every GPU in the catalogue")
        before = alive_ids(provider)
        with pytest.raises(ConfigError) as info:
            start_sandbox(gpu=missing[0])
        assert "gpu" in info.value.fields
        assert alive_ids(provider) == before

    def test_timeout_over_max_lifetime_fails_before_provisioning(
        self, provider: Provider, capabilities: Capabilities, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        limit = capabilities.max_lifetime
        if limit is None or limit >= 7 * 24 * 3600:
            pytest.skip("provider has no lifetime limit below seer's own")
        before = alive_ids(provider)
        with pytest.raises(ConfigError) as info:
            start_sandbox(timeout=limit + 1)
        assert "timeout" in info.value.fields
        assert alive_ids(provider) == before

    def test_dockerfile_repo_without_capability_fails_before_provisioning(
        self, provider: Provider, capabilities: Capabilities, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        """A provider that cannot build an image from a repository's Dockerfile refuses a config
        naming one, rather than ignoring the file."""
        if capabilities.dockerfile_repos:
            pytest.skip("provider has capability: dockerfile_repos")
        before = alive_ids(provider)
        with pytest.raises(ConfigError) as info:
            start_sandbox(repos=[{"url": "example-org/example-repo", "dockerfile": "Dockerfile"}])
        assert info.value.fields == ["repos[0].dockerfile"]
        assert "dockerfile_repos" in str(info.value) and repr(self.provider_name) in str(info.value)
        assert alive_ids(provider) == before

    def test_debug_without_capability_fails_before_provisioning(
        self, provider: Provider, capabilities: Capabilities, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        """``debug=True`` asks for a VS Code server: refused where the provider starts none."""
        if capabilities.code_server:
            pytest.skip("provider has capability: code_server")
        before = alive_ids(provider)
        with pytest.raises(ConfigError) as info:
            start_sandbox(debug=True)
        assert info.value.fields == ["debug"]
        assert "code_server" in str(info.value) and repr(self.provider_name) in str(info.value)
        assert alive_ids(provider) == before
