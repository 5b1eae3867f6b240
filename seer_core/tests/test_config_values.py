"""Config is values: building and loading a config imports no plugin, provider or sandbox code.

Everything that needs the plugin registry (provider names and options, execution modes, the GPU
types providers offer, secrets) is :func:`seer.preflight.preflight`, called by ``Sandbox.start()``
and the CLI; the import contracts (``core-layers`` in pyproject.toml) keep ``seer.config`` below
the registry. This checks the same at run time, in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

#: A config that touches every field a plugin could have been asked about.
SCRIPT = r"""
import json, sys
from seer import SandboxConfig, load_config

config = SandboxConfig(
    provider="docker",
    gpu="A100",
    gpu_count=2,
    execution_mode="some-plugin-mode",
    models=["gpt2"],
    repos=["org/repo"],
    python_packages=["numpy"],
    secrets=["HF_TOKEN"],
    provider_options={"image": "python:3.12"},
)
assert config.provider == "docker" and config.execution_mode == "some-plugin-mode"
loaded = load_config(sys.argv[1])
assert loaded.gpu == "H100"
if sys.argv[2] == "preflight":  # the control: the resolve step does load the plugins
    from seer.preflight import known_gpu_types
    known_gpu_types()
print(json.dumps(sorted(sys.modules)))
"""

YAML = """\
provider: ssh
gpu: H100
execution_mode: cli
models:
  - name: gpt2
    var_name: m
"""


def _modules_after(tmp_path: Path, then: str) -> set[str]:
    config = tmp_path / "seer.yaml"
    config.write_text(YAML)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(config), then],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout))


def _plugin_modules(modules: set[str]) -> set[str]:
    """The modules in ``modules`` that belong to the registry, a provider, a sandbox or any
    installed plugin (its entry point's top-level package)."""
    plugin_roots = {ep.module.split(".")[0] for ep in metadata.entry_points(group="seer")} - {"seer"}
    core = (
        "seer.plugins",
        "seer.builtin",
        "seer.preflight",
        "seer.providers",
        "seer.sandbox",
        "seer.runtime",
    )
    return {
        m
        for m in modules
        if m == "pluggy"
        or m.startswith("pluggy.")
        or m.split(".")[0] in plugin_roots
        or any(m == c or m.startswith(c + ".") for c in core)
    }


def test_validating_a_config_imports_no_plugin_module(tmp_path: Path) -> None:
    modules = _modules_after(tmp_path, "validate")
    assert {"seer.config.schema", "seer.config.files"} <= modules  # it did validate
    assert not _plugin_modules(modules), sorted(_plugin_modules(modules))


def test_the_check_sees_plugin_modules_once_preflight_runs(tmp_path: Path) -> None:
    modules = _modules_after(tmp_path, "preflight")
    found = _plugin_modules(modules)
    assert {"seer.plugins", "seer.preflight", "pluggy"} <= found
    installed = {ep.module.split(".")[0] for ep in metadata.entry_points(group="seer")} - {"seer"}
    assert installed <= {m.split(".")[0] for m in found}  # every installed plugin was loaded
