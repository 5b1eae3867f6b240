"""A client SIGKILLed before ``Sandbox.start()`` returned leaves no container behind (Docker).

Before, a docker start killed during or after the models step left its container (Jupyter and a
kernel in it) running until the timeout, listed as ``running`` with no URL. Now the ledger names
the starting client and a watcher on the host removes the container as soon as that client dies
first; until then ``seer ls`` shows the sandbox as ``starting``. The local provider's counterpart
is tests/test_killed_start.py.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest
from _docker_kit import docker_config
from _killed_start import PausedClient, wait_for
from _model_kit import MODEL_ID
from seer import cli
from seer.state import seer_home
from typer.testing import CliRunner

# The jupyter case needs an image with torch and Jupyter (cached after the first build).
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

#: Bounds the wait for the watcher (it looks twice a second), far below the sandboxes' timeout.
PROMPTLY = 60
#: As the seed notebook on Docker, so the image built for it serves here too.
PACKAGES = ["torch==2.13.0", "transformers", "accelerate"]


def _ls(*args: str) -> dict[str, str]:
    result = CliRunner().invoke(cli.create_app(), ["ls", "--json", *args], prog_name="seer")
    assert result.exit_code == 0, result.output
    return {m["sandbox_id"]: m["status"] for m in json.loads(result.stdout) if m["provider"] == "docker"}


def _containers(client: Any, name: str) -> list[Any]:
    return client.containers.list(all=True, ignore_removed=True, filters={"label": f"seer.name={name}"})


def _ledger_ids() -> set[str]:
    ledger = seer_home() / "docker" / "sandboxes"
    return {p.stem for p in ledger.glob("*.json")} if ledger.is_dir() else set()


@pytest.mark.parametrize("step", ["image", "models", "jupyter"])
def test_a_docker_start_killed_at_any_step_leaves_nothing(
    step: str, docker_engine: Any, hub: Any, volume: str
) -> None:
    name = f"killed-{step}-{secrets.token_hex(3)}"
    changes: dict[str, Any] = {"provider_options": {"model_volume": volume}, "env": hub.env(), "timeout": 900}
    stop = {"image": ("update", "image "), "models": ("enter", "Fetching")}.get(step)
    if step == "models":
        changes["models"] = [MODEL_ID]
    if step == "jupyter":
        changes.update(models=[MODEL_ID], python_packages=PACKAGES, execution_mode="notebook")
        stop = ("exit", "Preparing notebook mode")
    assert stop is not None
    before = _ledger_ids()
    with PausedClient(docker_config(**changes), stop, name=name, timeout=800) as client:
        made = _ledger_ids() - before
        if step == "image":  # nothing made yet: no container, no ledger entry
            assert not made and not _containers(docker_engine, name)
        else:
            (sandbox_id,) = made
            assert _ls()[sandbox_id] == "starting", f"paused at {client.step!r}"
            assert [c.status for c in _containers(docker_engine, name)] == ["running"]
        client.kill()
        if step != "image":
            assert wait_for(lambda: not _containers(docker_engine, name), PROMPTLY), "container left"
            assert wait_for(lambda: _ls("--all").get(sandbox_id) == "lost", PROMPTLY), _ls("--all")
    assert not _containers(docker_engine, name)
    if step == "image":
        assert not _ledger_ids() - before
        return
    assert sandbox_id not in _ls()
    down = CliRunner().invoke(cli.create_app(), ["down", sandbox_id], prog_name="seer")
    assert (down.exit_code, down.stdout) == (0, f"{sandbox_id}: already lost\n"), down.output
