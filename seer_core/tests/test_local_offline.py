"""The local provider where no package index can be reached (an offline GPU box, a compute node).

With ``$SEER_OFFLINE`` (and pip's and uv's own offline switches) set, a sandbox whose packages the
running Python has starts on that Python, says so, and runs a notebook cell; one that names a
package it lacks is refused by name before anything is made, and so is any lack under
``provider_options={"python": "system"}``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from seer import Sandbox, SandboxConfig
from seer.errors import ConfigError
from seer.execution import create_notebook_session
from seer.preflight import preflight
from seer.providers.base import MachineSpec
from seer.providers.local.provider import LocalProvider, sandbox_dir
from seer.state import seer_home

pytestmark = pytest.mark.e2e

MISSING = "no-such-package-seer-offline>=1"


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No index: seer's switch, pip's and uv's; and no folder of wheels to fall back on."""
    for name in ("SEER_OFFLINE", "PIP_NO_INDEX", "UV_OFFLINE"):
        monkeypatch.setenv(name, "1")
    for name in ("PIP_FIND_LINKS", "UV_FIND_LINKS"):
        monkeypatch.delenv(name, raising=False)


def _sandboxes() -> set[str]:
    root = seer_home() / "local"
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


def _envs() -> set[str]:
    root = seer_home() / "envs"
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


def test_offline_a_notebook_starts_on_this_python_and_runs_a_cell(
    offline: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    envs_before = _envs()
    config = SandboxConfig(execution_mode="notebook", python_packages=["torch", "pytest"], timeout=300)
    with Sandbox(config, progress=True).start() as sandbox:
        err = capfd.readouterr().err
        assert "no environment to build: using this machine's Python" in err, err
        assert "offline: $SEER_OFFLINE is set" in err
        with create_notebook_session(sandbox, outputs_dir=tmp_path) as session:
            cell = session.exec(
                "import sys, torch, seer\nprint(torch.__version__)\nprint(sys.prefix)\nprint(seer.__file__)"
            )
    assert cell.ok, cell
    version, prefix, seer_file = cell.stdout.split()
    import seer
    import torch

    assert version == torch.__version__
    assert seer_file == seer.__file__  # the client's own seer, not a copy installed for the sandbox
    assert Path(prefix).name == "venv" and sandbox.sandbox_id in prefix  # the sandbox's thin venv
    assert _envs() == envs_before  # no layer was built


def test_offline_a_package_this_python_lacks_is_refused_by_name_before_anything_is_made(
    offline: None,
) -> None:
    before = _sandboxes()
    config = SandboxConfig(execution_mode="cli", python_packages=["torch", MISSING])
    with pytest.raises(ConfigError) as info:
        Sandbox(config, progress=False).start()
    assert info.value.fields == ["python_packages"]
    message = str(info.value)
    assert MISSING in message and "$SEER_OFFLINE is set" in message and sys.executable in message
    assert "torch" not in message.split("lacks:")[1].split(",")[0]
    assert _sandboxes() == before


def test_offline_what_only_the_execution_mode_needs_is_refused_when_the_machine_is_made(
    offline: None,
) -> None:
    """The requirements core adds (the mode's, huggingface_hub for models) reach only ``create``:
    it refuses them before it makes a folder or starts a supervisor."""
    before = _sandboxes()
    spec = MachineSpec(name="offline", timeout=60, python_packages=["pytest", MISSING])
    with pytest.raises(ConfigError, match="no-such-package-seer-offline"):
        LocalProvider().create(spec)
    assert _sandboxes() == before


def test_system_python_refuses_what_it_lacks_even_with_an_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SEER_OFFLINE", raising=False)
    monkeypatch.delenv("PIP_NO_INDEX", raising=False)
    config = SandboxConfig(
        execution_mode="cli", python_packages=[MISSING], provider_options={"python": "system"}
    )
    with pytest.raises(ConfigError) as info:
        Sandbox(config, progress=False).start()
    assert info.value.fields == ["provider_options.python"]
    assert MISSING in str(info.value) and "python='system'" in str(info.value)


def test_system_python_starts_a_sandbox_on_this_python(tmp_path: Path) -> None:
    config = SandboxConfig(
        execution_mode="cli", python_packages=["pytest"], provider_options={"python": "system"}, timeout=120
    )
    with Sandbox(config, progress=False).start() as sandbox:
        out = sandbox.exec("python -c 'import pytest, seer; print(seer.__file__)'")
    import seer

    assert out.exit_code == 0, out
    assert out.stdout.strip() == seer.__file__


def test_an_unknown_local_option_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        preflight(SandboxConfig(provider_options={"pyhton": "system"}))
    assert info.value.fields == ["provider_options.pyhton"]


# --- a configured interpreter: provider_options={"python": "/path/to/python"} ------------------
def _base_python() -> str:
    """The interpreter this venv was made from: no seer in it."""
    for name in (f"python{sys.version_info.major}.{sys.version_info.minor}", "python3"):
        path = Path(sys.base_prefix) / "bin" / name
        if path.is_file():
            return str(path)
    pytest.skip(f"no interpreter found under {sys.base_prefix}/bin")


def test_a_configured_interpreter_runs_the_sandbox(offline: None) -> None:
    config = SandboxConfig(
        execution_mode="cli",
        python_packages=["pytest"],
        provider_options={"python": sys.executable},
        timeout=120,
    )
    with Sandbox(config, progress=False).start() as sandbox:
        out = sandbox.exec("python -c 'import sys, pytest, seer; print(sys.prefix); print(seer.__file__)'")
        setup = (sandbox_dir(sandbox.sandbox_id) / "logs" / "setup.log").read_text()
    import seer

    assert out.exit_code == 0, out
    prefix, seer_file = out.stdout.split()
    assert sandbox.sandbox_id in prefix and seer_file == seer.__file__
    assert "using the configured Python, which has all" in setup and sys.executable in setup


def test_a_configured_interpreter_without_seer_is_refused_naming_it() -> None:
    python = _base_python()
    before = _sandboxes()
    config = SandboxConfig(execution_mode="cli", provider_options={"python": python})
    with pytest.raises(ConfigError) as info:
        Sandbox(config, progress=False).start()
    assert info.value.fields == ["provider_options.python"]
    message = str(info.value)
    assert python in message and "lacks: " in message and "seer-core==" in message
    assert _sandboxes() == before


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("python3", "absolute path"),
        ("/no/such/python", "not an executable file"),
        ("/etc", "not an executable"),
    ],
)
def test_a_configured_interpreter_must_be_an_executable_path(value: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        preflight(SandboxConfig(provider_options={"python": value}))
    assert info.value.fields == ["provider_options.python"] and says in str(info.value)
