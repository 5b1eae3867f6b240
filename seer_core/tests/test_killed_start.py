"""A client SIGKILLed before ``Sandbox.start()`` returned leaves nothing behind (local provider).

Before, a start killed while the Python environment was built left ``local/<id>/`` without a
``meta.json``: invisible to ``seer ls --all``, and ``seer down <id>`` said "no sandbox"; killed
during or after the models step, Jupyter and a kernel ran until the timeout while ``seer ls`` said
``running``. Now the half-made sandbox is listed as ``starting`` while its client lives, and its
supervisor ends it (``lost``) as soon as that client dies. The Docker counterpart is in
tests/docker/test_docker_killed_start.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from seer import SandboxConfig, cli
from seer.providers import procs
from seer.providers.local.provider import sandbox_dir
from seer.state import seer_home
from typer.testing import CliRunner

from tests._killed_start import PausedClient, wait_for
from tests._model_kit import MODEL_ID

pytestmark = pytest.mark.e2e

#: Bounds a wait for the supervisor to notice (it looks twice a second); generous for a loaded box,
#: and far below the sandboxes' own 600 s timeout, which is what used to end them.
PROMPTLY = 30

#: Each step of a start, and where the client stops in it.
STEPS: dict[str, tuple[dict[str, Any], tuple[str, str]]] = {
    # in provider.create, before the environment is built (a requirement the client lacks)
    "env build": (
        {"python_packages": ["seer-killed-start-probe==0.1"]},
        ("update", "building a Python environment"),
    ),
    "models": ({"models": [MODEL_ID]}, ("enter", "Fetching")),
    # Jupyter and its warm kernel are up; start() has not returned
    "jupyter": ({"execution_mode": "notebook"}, ("exit", "Preparing notebook mode")),
}


def _ls(*args: str) -> dict[str, str]:
    result = CliRunner().invoke(cli.create_app(), ["ls", "--json", *args], prog_name="seer")
    assert result.exit_code == 0, result.output
    return {m["sandbox_id"]: m["status"] for m in json.loads(result.stdout)}


def _folders() -> set[str]:
    root = seer_home() / "local"
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


@pytest.mark.parametrize("step", list(STEPS))
def test_a_start_killed_at_any_step_leaves_nothing(step: str) -> None:
    changes, stop = STEPS[step]
    config = SandboxConfig(**{"provider": "local", "execution_mode": "cli", "timeout": 600, **changes})
    before = _folders()
    with PausedClient(config, stop, name=f"killed-at-{step.replace(' ', '-')}") as client:
        (sandbox_id,) = _folders() - before
        assert _ls()[sandbox_id] == "starting", f"paused at {client.step!r}"
        if step == "jupyter":
            assert procs.marked_pids(sandbox_id), "the Jupyter server should be running"
        supervisor = json.loads((sandbox_dir(sandbox_id) / "meta.json").read_text())["supervisor"]["pid"]
        client.kill()

        assert wait_for(lambda: _ls("--all").get(sandbox_id) == "lost", PROMPTLY), _ls("--all")
    assert wait_for(lambda: not procs.marked_pids(sandbox_id), PROMPTLY), procs.marked_pids(sandbox_id)
    assert wait_for(lambda: not procs.alive(supervisor), PROMPTLY)
    folder: Path = sandbox_dir(sandbox_id)
    assert not (folder / "root").exists() and not (folder / "venv").exists()
    assert not (folder / "secrets.json").exists()
    assert sandbox_id not in _ls()

    down = CliRunner().invoke(cli.create_app(), ["down", sandbox_id], prog_name="seer")
    assert (down.exit_code, down.stdout) == (0, f"{sandbox_id}: already lost\n"), down.output
    assert not procs.marked_pids(sandbox_id)


def test_a_starting_sandbox_can_be_taken_down(tmp_path: Path) -> None:
    """``seer down`` ends a sandbox whose client is still starting it (paused at the models)."""
    config = SandboxConfig(provider="local", execution_mode="cli", timeout=600, models=[MODEL_ID])
    before = _folders()
    with PausedClient(config, ("enter", "Fetching"), name="taken-down-while-starting"):
        (sandbox_id,) = _folders() - before
        down = CliRunner().invoke(cli.create_app(), ["down", sandbox_id], prog_name="seer")
        assert (down.exit_code, down.stdout) == (0, f"{sandbox_id}: terminated\n"), down.output
        assert _ls("--all")[sandbox_id] == "terminated"
        assert not (sandbox_dir(sandbox_id) / "root").exists()
