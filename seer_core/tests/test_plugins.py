"""The plugin system: discovery through entry points, registries, switches, clear errors.

Third-party plugins here are real distributions made on the fly: a module plus a ``.dist-info``
folder with ``entry_points.txt`` on ``sys.path``, which ``importlib.metadata`` discovers exactly as
it would an installed package.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from seer import plugins
from seer.errors import PluginError, UnknownPluginError

pytestmark = pytest.mark.unit


def make_distribution(root: Path, dist: str, module: str, source: str, ep_name: str | None = None) -> None:
    """Write a module and a dist-info declaring it under the ``seer`` entry-point group."""
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[seer]\n{ep_name or module} = {module}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_plugins: None) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


EXPOSE_PLUGIN = """
    import seer
    from seer.expose import ExposeMode

    class Shout(ExposeMode):
        name = "shout"
        description = "upper-cases the interface name"

        def expose(self, served):
            return str(served).upper()

    @seer.hookimpl
    def seer_register_expose_modes(register):
        register(Shout)
"""


def test_builtins_register_through_the_same_hooks() -> None:
    plugins.reset()
    loaded = {p.name: p for p in plugins.loaded_plugins()}
    assert loaded["local"].builtin and loaded["local"].distribution == "seer-core"
    assert "seer_register_providers" in loaded["local"].hooks
    assert plugins.providers()["local"].plugin == "local"
    assert set(plugins.execution_modes()) >= {"notebook", "cli", "local"}
    assert plugins.execution_modes()["notebook"].distribution == "seer-core"


def test_entry_point_plugin_is_discovered_and_its_mode_works(site: Path) -> None:
    make_distribution(site, "seer-shout", "seer_shout", EXPOSE_PLUGIN)
    reg = plugins.expose_modes()["shout"]
    assert (reg.plugin, reg.distribution) == ("seer_shout", "seer-shout")
    assert plugins.get_expose_mode("shout")().expose("tools") == "TOOLS"
    entry = {p.name: p for p in plugins.loaded_plugins()}["seer_shout"]
    assert entry.version == "0.1" and entry.hooks == ["seer_register_expose_modes"]


def test_name_collision_names_both_distributions(site: Path) -> None:
    make_distribution(
        site,
        "seer-impostor",
        "seer_impostor",
        """
        import seer
        from seer.providers.local.provider import LocalProvider

        class Impostor(LocalProvider):
            name = "local"

        @seer.hookimpl
        def seer_register_providers(register):
            register(Impostor)
        """,
    )
    with pytest.raises(PluginError) as err:
        plugins.providers()
    assert "'local'" in str(err.value)
    assert "seer-core" in str(err.value) and "seer-impostor" in str(err.value)


def test_disable_and_load_switches(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_distribution(site, "seer-shout", "seer_shout", EXPOSE_PLUGIN)
    monkeypatch.setenv("SEER_DISABLE_PLUGINS", "seer_shout")
    plugins.reset()
    assert "shout" not in plugins.expose_modes()
    assert {p.name: p.skipped for p in plugins.loaded_plugins()}["seer_shout"] == "SEER_DISABLE_PLUGINS"

    monkeypatch.delenv("SEER_DISABLE_PLUGINS")
    monkeypatch.setenv("SEER_LOAD_PLUGINS", "")
    plugins.reset()
    assert "shout" not in plugins.expose_modes()
    assert "local" in plugins.providers(), "built-ins load whatever SEER_LOAD_PLUGINS says"

    monkeypatch.setenv("SEER_LOAD_PLUGINS", "seer_shout")
    plugins.reset()
    assert "shout" in plugins.expose_modes()


def test_disabling_a_builtin_provider(monkeypatch: pytest.MonkeyPatch, fresh_plugins: None) -> None:
    monkeypatch.setenv("SEER_DISABLE_PLUGINS", "local")
    plugins.reset()
    with pytest.raises(UnknownPluginError) as err:
        plugins.get_provider_class("local")
    assert err.value.kind == "provider"


def test_unknown_provider_lists_installed_and_the_extra_to_install(
    fresh_plugins: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEER_DISABLE_PLUGINS", "modal")  # as if seer-modal were not installed
    plugins.reset()
    with pytest.raises(UnknownPluginError) as err:
        plugins.get_provider_class("modal")
    message = str(err.value)
    assert "no provider named 'modal'" in message
    assert "local" in message
    assert 'pip install "seer[modal]>=0.2"' in message
    with pytest.raises(UnknownPluginError) as err:
        plugins.get_provider_class("my-own-cloud")
    assert "pip install" not in str(err.value)


def test_a_misspelled_hook_is_an_error(site: Path) -> None:
    make_distribution(
        site,
        "seer-typo",
        "seer_typo",
        """
        import seer

        @seer.hookimpl
        def seer_register_provider(register):
            pass
        """,
    )
    with pytest.raises(PluginError, match="seer_register_provider"):
        plugins.providers()


def test_a_plugin_that_fails_to_import_is_named(site: Path) -> None:
    make_distribution(site, "seer-broken", "seer_broken", "raise ImportError('needs the foo SDK')\n")
    with pytest.raises(PluginError) as err:
        plugins.providers()
    assert "seer-broken" in str(err.value) and "needs the foo SDK" in str(err.value)


def test_a_registration_without_a_name_is_an_error(site: Path) -> None:
    make_distribution(
        site,
        "seer-nameless",
        "seer_nameless",
        """
        import seer
        from seer.sandbox.execution_mode import ExecutionModePlugin

        class Nameless(ExecutionModePlugin):
            pass

        @seer.hookimpl
        def seer_register_execution_modes(register):
            register(Nameless)
        """,
    )
    with pytest.raises(PluginError, match="without a name"):
        plugins.execution_modes()


@pytest.mark.e2e
def test_loading_plugins_imports_no_heavy_sdk() -> None:
    """Entry-point modules must import cheaply: no SDK until a provider is used."""
    code = (
        "import sys, seer, seer.plugins as p; p.providers(); p.execution_modes(); p.agent_runners(); "
        "heavy = {'torch', 'transformers', 'huggingface_hub', 'jupyter_client', 'docker', 'modal', "
        "'runpod', 'paramiko', 'mcp', 'agents', 'openai', 'claude_agent_sdk'}; "
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
