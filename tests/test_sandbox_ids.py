"""Sandbox ids are checked against their provider's exact format wherever they enter, and records
found on disk are not trusted to name processes outside their sandbox.

The attack these guard against (red-team issue 15): an agent with write access to a disk the
client also reads (a local sandbox's, or a Docker sandbox's host-path model cache) plants a folder
that looks like a local sandbox whose supervisor died, with ``procs/a.json`` naming an unrelated
process group. Before, ``seer down ../../x/evil``, ``Sandbox.attach`` and the notebook MCP tool
``attach_to_session`` all took the id for a path, "reaped" the planted sandbox, killed that
process group and deleted the planted ``root/``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from seer import Sandbox, cli, plugins
from seer.errors import InvalidSandboxIdError, SandboxNotFoundError
from seer.ids import check_sandbox_id
from seer.preflight import sandbox_id_providers
from seer.providers import procs
from seer.providers.local.provider import LocalProvider
from seer.state import seer_home
from typer.testing import CliRunner

from tests._mcp_client import McpClient, server_env

pytestmark = pytest.mark.e2e


@pytest.fixture
def run() -> Callable[..., Any]:
    runner = CliRunner()
    return lambda *args: runner.invoke(cli.create_app(), list(args), prog_name="seer")


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process, leader of its own process group (what the planted record names)."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _plant(folder: Path, victim: subprocess.Popen[bytes], supervisor: dict[str, Any]) -> Path:
    """A folder shaped like a running local sandbox, naming ``victim``'s group as its process."""
    (folder / "procs").mkdir(parents=True)
    (folder / "root").mkdir()
    (folder / "root" / "precious.txt").write_text("not seer's to delete")
    now = time.time()
    meta = {
        "id": folder.name,
        "name": "evil",
        "status": "running",
        "created_at": now,
        "expires_at": now + 3600,
        "timeout": 3600,
        "python": "/usr/bin/python3",
        "env": {},
        "labels": {},
        "supervisor": supervisor,
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / "procs" / "a.json").write_text(json.dumps({"pgid": victim.pid, "pid": victim.pid}))
    return folder / "root"


@pytest.fixture
def outside(tmp_path: Path, victim: subprocess.Popen[bytes]) -> tuple[str, Path]:
    """``(id, root)``: a planted sandbox outside seer's home, named by a relative path."""
    root = _plant(tmp_path / "x" / "evil", victim, {"pid": _dead_pid(), "started": None})
    return os.path.relpath(root.parent, seer_home() / "local"), root


def _unharmed(victim: subprocess.Popen[bytes], root: Path) -> None:
    time.sleep(0.2)  # a kill, had one been sent, lands at once
    assert victim.poll() is None, "the unrelated process was killed"
    assert (root / "precious.txt").is_file(), "the planted root/ was deleted"


def test_seer_down_refuses_a_path_as_an_id(run, outside, victim) -> None:
    sandbox_id, root = outside
    assert sandbox_id.startswith("..")
    result = run("down", sandbox_id)
    assert result.exit_code == 2, result.output
    assert "not a valid sandbox id" in result.stderr and "Traceback" not in result.output
    for command in (["exec", sandbox_id, "--", "true"], ["logs", sandbox_id]):
        refused = run(*command)
        assert refused.exit_code == 2 and "not a valid sandbox id" in refused.stderr, refused.output
    _unharmed(victim, root)


def test_seer_down_checks_every_id_before_terminating_any(run, outside, victim) -> None:
    sandbox_id, root = outside
    result = run("down", "local-0000000000", sandbox_id)
    assert result.exit_code == 2 and "not a valid sandbox id" in result.stderr
    assert "local-0000000000" not in result.stdout
    _unharmed(victim, root)


def test_python_api_refuses_a_path_as_an_id(outside, victim) -> None:
    sandbox_id, root = outside
    with pytest.raises(InvalidSandboxIdError, match="not a valid sandbox id"):
        Sandbox.attach(sandbox_id)
    provider = LocalProvider()
    for call in (provider.attach, provider.terminate):
        with pytest.raises(InvalidSandboxIdError, match="not a valid sandbox id"):
            call(sandbox_id)
    provider.list()
    _unharmed(victim, root)


def test_mcp_attach_to_session_refuses_a_path_as_an_id(outside, victim) -> None:
    pytest.importorskip("seer_mcp")
    sandbox_id, root = outside
    with McpClient(["-m", "seer_mcp.notebook"], server_env()) as client:
        result = client.call("attach_to_session", {"sandbox_id": sandbox_id})
    assert result.is_error
    message = " ".join(getattr(item, "text", "") for item in result.content)
    assert "not a valid sandbox id" in message and sandbox_id in message
    _unharmed(victim, root)


def test_a_planted_record_in_seer_home_cannot_name_other_processes(run, victim) -> None:
    """A well-formed id inside seer's home, whose records name an unrelated process as both its
    supervisor (with that process's real start time) and its process group: nothing unrelated
    is signalled, and the fake sandbox is reported as what it is, a lost one."""
    sandbox_id = "local-0123456789"
    folder = seer_home() / "local" / sandbox_id
    supervisor = {"pid": victim.pid, "started": procs.start_time(victim.pid)}
    _plant(folder, victim, supervisor)
    try:
        listed = {m.id: m.status.value for m in LocalProvider().list()}
        assert listed[sandbox_id] == "lost"
        result = run("down", sandbox_id)
        assert result.exit_code == 0, result.output
        assert f"{sandbox_id}: already lost" in result.stdout
        time.sleep(0.2)
        assert victim.poll() is None, "a process named by a planted record was killed"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.unit
def test_the_helper_knows_each_providers_exact_format() -> None:
    local = plugins.get_provider_class("local")
    assert check_sandbox_id("local-0a1b2c3d4e", local) == "local-0a1b2c3d4e"
    assert "local" in sandbox_id_providers("local-0a1b2c3d4e")
    bad = ["../x", "local-0a1b2c3d4e/..", "local-0A1B2C3D4E", "local-0a1b", "-rf", "", " local-0a1b2c3d4e"]
    for sandbox_id in [*bad, None, 7]:
        with pytest.raises(InvalidSandboxIdError) as info:
            check_sandbox_id(sandbox_id, local, argument="ID")
        assert info.value.fields == ["ID"]
        with pytest.raises(SandboxNotFoundError):  # the errors callers already handle
            sandbox_id_providers(sandbox_id)


@pytest.mark.unit
def test_an_unknown_but_well_formed_id_is_still_not_found(run) -> None:
    result = run("down", "local-0000000000")
    assert result.exit_code == 1 and "local-0000000000" in result.stderr
    with pytest.raises(SandboxNotFoundError) as info:
        Sandbox.attach("local-0000000000")
    assert not isinstance(info.value, InvalidSandboxIdError)
