"""Teardown on Docker keeps the agent's record: ``terminate()`` and ``seer down`` copy the
sandbox's notebooks (with their cells) and ``outputs/`` to the client folder over the container's
primitives before the container is removed, and say where. (A Docker sandbox that reaches its
timeout with no client is removed by the engine with its files: see docs/docker.md.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from _docker_kit import docker_config
from _teardown_kit import seer_down_from
from seer import Sandbox

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NOTEBOOK = {
    "nbformat": 4,
    "nbformat_minor": 5,
    "metadata": {},
    "cells": [
        {"cell_type": "markdown", "id": "a", "metadata": {}, "source": "## Finding"},
        {
            "cell_type": "code",
            "id": "b",
            "metadata": {},
            "execution_count": 1,
            "source": "print(6 * 7)",
            "outputs": [{"output_type": "stream", "name": "stdout", "text": "42\n"}],
        },
    ],
}


def _research(sandbox: Sandbox) -> None:
    sandbox.write_file("notebooks/research.ipynb", json.dumps(NOTEBOOK))
    sandbox.write_file("notebooks/.ipynb_checkpoints/research-checkpoint.ipynb", "{}")
    sandbox.write_file("outputs/plots/loss.svg", "<svg/>")


def _assert_kept(folder: Path) -> None:
    assert json.loads((folder / "research.ipynb").read_text())["cells"] == NOTEBOOK["cells"]
    assert (folder / "outputs" / "plots" / "loss.svg").read_text() == "<svg/>"
    assert not (folder / ".ipynb_checkpoints").exists()


def _containers(client: Any, sandbox_id: str) -> list[Any]:
    return client.containers.list(all=True, filters={"label": f"seer.sandbox={sandbox_id}"})


def test_terminate_copies_notebooks_and_outputs_out_of_the_container(
    docker_engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEER_OUTPUTS_DIR", str(tmp_path / "kept"))
    sandbox = Sandbox(docker_config()).start(name="teardown")
    try:
        _research(sandbox)
        capsys.readouterr()
        sandbox.terminate()
    finally:
        sandbox.terminate(force=True)
    folder = tmp_path / "kept" / sandbox.sandbox_id
    _assert_kept(folder)
    assert f"kept in {folder}" in capsys.readouterr().err
    assert not [c for c in _containers(docker_engine, sandbox.sandbox_id) if c.status == "running"]


def test_seer_down_copies_them_to_where_the_sandbox_started(
    docker_engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SEER_OUTPUTS_DIR")
    (tmp_path / "project").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    sandbox = Sandbox(docker_config()).start(name="teardown-down")
    try:
        _research(sandbox)
        down = seer_down_from(tmp_path / "elsewhere", sandbox.sandbox_id)
    finally:
        sandbox.terminate(force=True)
    folder = tmp_path / "project" / "seer-outputs" / sandbox.sandbox_id
    assert (down.returncode, down.stdout) == (0, f"{sandbox.sandbox_id}: terminated\n"), down.stderr
    assert f"kept in {folder}" in down.stderr
    _assert_kept(folder)


def test_the_folders_teardown_copies_are_found_without_a_process(docker_engine: Any) -> None:
    """``existing_dirs`` asks the engine's archive stat: a folder, a file, nothing; and a container
    gone meanwhile is an error, never "no folder" (teardown would then delete without a copy)."""
    from seer.errors import SandboxNotRunningError

    sandbox = Sandbox(docker_config()).start(quiet=True)
    try:
        machine = sandbox.machine
        container = docker_engine.containers.get(sandbox.sandbox_id)

        def execs_during(work: Any) -> tuple[Any, int]:
            time.sleep(1.1)  # events carry whole seconds: the window opens after what came before
            start = int(time.time())
            out = work()
            time.sleep(1.1)  # and closes after the call
            events = docker_engine.events(
                since=start,
                until=int(time.time()),
                filters={"type": "container", "container": container.id},
                decode=True,
            )
            return out, sum(1 for e in events if str(e.get("Action", "")).startswith("exec_create"))

        sandbox.write_file("outputs/a.txt", "a")
        links = "mkdir -p elsewhere && ln -s elsewhere linked && ln -s outputs/a.txt filelink"
        sandbox.exec(links, check=True)
        _, made = execs_during(lambda: sandbox.exec("true"))
        assert made >= 1  # the count sees an exec when there is one
        paths = [machine.resolve(p) for p in ("outputs", "outputs/a.txt", "notebooks")]
        found, made = execs_during(lambda: machine.existing_dirs(paths))
        assert found == {machine.resolve("outputs")}
        assert made == 0
        # a link to a folder counts as the folder (the shell's test, for that path alone)
        linked = [machine.resolve(p) for p in ("linked", "filelink")]
        assert machine.existing_dirs(linked) == {machine.resolve("linked")}
        container.remove(force=True)
        with pytest.raises(SandboxNotRunningError):
            machine.existing_dirs(paths)
    finally:
        sandbox.terminate(force=True)
