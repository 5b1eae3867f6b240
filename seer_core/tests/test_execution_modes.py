"""Execution modes are open: a plugin's registered mode is selected by name, like the built-ins.

The third-party mode here is a real distribution made on the fly (a module plus a ``.dist-info``
with an ``entry_points.txt`` on ``sys.path``), found through the ``seer`` entry-point group exactly
as an installed package is; the config naming it is a YAML file read by ``seer.load_config``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from seer import ExecutionMode, Sandbox, SandboxConfig, load_config, plugins
from seer.errors import ConfigError
from seer.preflight import preflight
from test_plugins import make_distribution

pytestmark = pytest.mark.unit

#: A mode that leaves a mark in the sandbox it prepares: proof that its hook ran there.
MARKER_PLUGIN = """
    import seer
    from seer.sandbox.execution_mode import ExecutionModePlugin

    class MarkerMode(ExecutionModePlugin):
        name = "marker"
        description = "writes a marker file into the sandbox"

        def prepare(self, sandbox):
            sandbox.write_file("marker.txt", "prepared by the marker mode")
            sandbox.set_service("marker", {"prepared": True})

    @seer.hookimpl
    def seer_register_execution_modes(register):
        register(MarkerMode)
"""


@pytest.fixture
def marker_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_plugins: None) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    make_distribution(site, "seer-marker-mode", "seer_marker_mode", MARKER_PLUGIN, ep_name="marker-mode")
    return site


@pytest.mark.slow
@pytest.mark.e2e
def test_third_party_mode_selected_from_a_yaml_config(marker_mode: Path, tmp_path: Path) -> None:
    path = tmp_path / "experiment.yaml"
    path.write_text("name: marker-run\nexecution_mode: marker\ngpu: null\ntimeout: 300\n")
    config = load_config(path)
    assert config.execution_mode == "marker"
    assert plugins.execution_modes()["marker"].distribution == "seer-marker-mode"
    with Sandbox(config).start() as sandbox:
        assert sandbox.read_file("marker.txt") == "prepared by the marker mode"
        assert sandbox.services["marker"] == {"prepared": True}
        assert sandbox.jupyter_url is None  # the notebook mode's hook did not run


def test_mode_names_are_matched_case_insensitively(marker_mode: Path) -> None:
    config = SandboxConfig(execution_mode="MARKER")  # a plugin's mode: resolved at preflight
    assert config.execution_mode == "MARKER"
    assert preflight(config).config.execution_mode == "marker"


def test_unknown_mode_lists_registered_ones_including_plugins(marker_mode: Path, tmp_path: Path) -> None:
    path = tmp_path / "experiment.yaml"
    path.write_text("execution_mode: jupyter\n")
    config = load_config(path)  # a value: whether a plugin registers it is the preflight's question
    with pytest.raises(ConfigError) as info:
        preflight(config)
    assert info.value.fields == ["execution_mode"]
    message = str(info.value)
    assert "unknown execution mode 'jupyter'" in message
    assert "'notebook', 'cli', 'local', 'marker'" in message
    assert "experiment.yaml:1" in message


def test_unknown_mode_says_which_extra_installs_a_known_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(plugins.KNOWN_EXTRAS, "gpu-shell", "seer[gpu-shell]")
    monkeypatch.setitem(plugins.KNOWN_KINDS, "gpu-shell", "execution mode")
    with pytest.raises(ConfigError, match=r'pip install "seer\[gpu-shell\]>=0\.2"'):
        preflight(SandboxConfig(execution_mode="gpu-shell"))
    # a known name of another kind (mcp is an expose mode) gets no misleading hint
    with pytest.raises(ConfigError) as info:
        preflight(SandboxConfig(execution_mode="mcp"))
    assert "pip install" not in str(info.value)


@pytest.mark.e2e
def test_builtin_modes_stay_enum_members() -> None:
    """The seeds' API: ``ExecutionMode`` members, equal to their names, found without plugins."""
    config = SandboxConfig(execution_mode="Cli")
    assert config.execution_mode is ExecutionMode.CLI
    assert ExecutionMode.NOTEBOOK == "notebook" and SandboxConfig().execution_mode is ExecutionMode.NOTEBOOK
    code = (
        "import sys; from seer import SandboxConfig; SandboxConfig(execution_mode='local'); "
        "print('seer.plugins' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
