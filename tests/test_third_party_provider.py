"""A provider seer did not write plugs in through its entry point and passes the contract.

``seer-toy-provider`` (tests/plugins/seer-toy-provider) is a separate distribution that must be
installed for these tests: ``uv pip install -e tests/plugins/seer-toy-provider``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from seer import SandboxConfig, plugins
from seer.errors import ConfigError, UnknownPluginError
from seer.preflight import preflight
from seer.testing import ProviderConformance

pytestmark = pytest.mark.e2e


def _toy_sandboxes_running() -> list[str]:
    from seer_toy_provider import ToyProvider

    return [m.id for m in ToyProvider().list() if m.status.alive]


@pytest.fixture(scope="module", autouse=True)
def _no_leaked_toy_sandboxes() -> Iterator[None]:
    yield
    leaked = _toy_sandboxes_running()
    for sandbox_id in leaked:
        plugins.get_provider("toy").terminate(sandbox_id)
    assert not leaked, f"tests left toy sandboxes running: {leaked}"


@pytest.mark.unit
def test_discovered_through_entry_point() -> None:
    registration = plugins.providers().get("toy")
    assert registration is not None, (
        "provider 'toy' is not registered; install tests/plugins/seer-toy-provider into the environment"
    )
    assert registration.distribution == "seer-toy-provider"
    assert registration.plugin == "toy"
    assert registration.cls.__module__ == "seer_toy_provider"
    loaded = {p.name: p for p in plugins.loaded_plugins()}["toy"]
    assert not loaded.builtin and loaded.skipped is None
    assert loaded.version == "0.1.0"
    assert loaded.hooks == ["seer_register_providers"]


@pytest.mark.unit
def test_disable_plugins_hides_it(fresh_plugins: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEER_DISABLE_PLUGINS", "toy")
    assert "toy" not in plugins.providers()
    assert "local" in plugins.providers()
    assert {p.name: p for p in plugins.loaded_plugins()}["toy"].skipped == "SEER_DISABLE_PLUGINS"


@pytest.mark.unit
def test_empty_load_plugins_hides_it(fresh_plugins: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEER_LOAD_PLUGINS", "")
    assert "toy" not in plugins.providers()
    assert "local" in plugins.providers()  # built-ins are not third-party plugins
    assert {p.name: p for p in plugins.loaded_plugins()}["toy"].skipped == "not in SEER_LOAD_PLUGINS"


@pytest.mark.unit
def test_load_plugins_naming_it_keeps_it(fresh_plugins: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEER_LOAD_PLUGINS", "toy")
    assert plugins.providers()["toy"].distribution == "seer-toy-provider"


@pytest.mark.unit
def test_unknown_provider_lists_installed_names() -> None:
    with pytest.raises(UnknownPluginError) as info:
        plugins.get_provider_class("no-such-provider")
    assert "no-such-provider" in str(info.value)
    assert "installed: " in str(info.value)
    assert {"local", "toy"} <= set(info.value.known)
    assert "local" in str(info.value) and "toy" in str(info.value)
    # a config naming it fails at preflight (before anything is made), with the same list
    with pytest.raises(ConfigError) as config_info:
        preflight(SandboxConfig(provider="no-such-provider"))
    assert config_info.value.fields == ["provider"]
    assert "local" in str(config_info.value) and "toy" in str(config_info.value)


@pytest.mark.unit
def test_unknown_provider_error_omits_disabled_one(
    fresh_plugins: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEER_DISABLE_PLUGINS", "toy")
    with pytest.raises(UnknownPluginError) as info:
        plugins.get_provider_class("toy")
    assert "toy" not in info.value.known and "local" in info.value.known


class TestToyConformance(ProviderConformance):
    provider_name = "toy"
