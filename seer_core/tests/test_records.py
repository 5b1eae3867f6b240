"""Records holding tokens are private to the user, and ended sandboxes' records expire.

Before, ``$SEER_HOME/sandboxes/<id>.json`` (Jupyter and RPC tokens, the full config) and
Jupyter's ``jpserver-*-open.html`` were mode 0644 under 0755 folders, and a record was deleted
only when its start failed: they piled up, each keeping hidden model names and old tokens.
"""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from seer import Sandbox, SandboxConfig, cli
from seer.providers.local.provider import sandbox_dir
from seer.state import RECORD_TTL, prune_records, record_path, seer_home
from typer.testing import CliRunner

from tests._killed_start import wait_for

pytestmark = pytest.mark.e2e


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def notebook_sandbox() -> Iterator[Sandbox]:
    sandbox = Sandbox(SandboxConfig(provider="local", execution_mode="notebook", timeout=600)).start()
    yield sandbox
    sandbox.terminate()


def test_records_folders_and_jupyter_runtime_files_are_private(notebook_sandbox: Sandbox) -> None:
    sandbox_id = notebook_sandbox.sandbox_id
    folder = sandbox_dir(sandbox_id)
    folders = [seer_home(), seer_home() / "sandboxes", seer_home() / "local", folder]
    folders += [folder / name for name in ("root", "logs", "procs")]
    files = [record_path(sandbox_id), folder / "meta.json", folder / "secrets.json"]
    files += [*folder.glob("procs/*.json"), *folder.glob("logs/*.log")]
    assert any(p.name == "jupyter.log" for p in files), "the Jupyter log (its URL holds the token)"

    runtime = Path(notebook_sandbox._services["jupyter"]["runtime_dir"])
    folders.append(runtime)
    runtime_files = [p for p in runtime.rglob("*") if p.is_file()]
    assert any(p.name.startswith("jpserver-") for p in runtime_files), sorted(runtime.iterdir())
    files += runtime_files

    assert {str(p): oct(_mode(p)) for p in folders if _mode(p) != 0o700} == {}
    assert {str(p): oct(_mode(p)) for p in files if _mode(p) != 0o600} == {}


def test_a_terminated_sandboxs_record_loses_its_tokens_at_once() -> None:
    sandbox = Sandbox(SandboxConfig(provider="local", execution_mode="notebook", timeout=600)).start()
    token = sandbox._services["jupyter"]["token"]
    path = record_path(sandbox.sandbox_id)
    assert token in path.read_text()
    sandbox.terminate()

    record = json.loads(path.read_text())
    assert token not in path.read_text()
    assert not {"config", "services", "env"} & set(record)
    assert record["status"] == "terminated" and record["ended_at"] <= time.time()
    # still enough to find it again: `seer down` answers, attach works
    assert Sandbox.attach(sandbox.sandbox_id).status.value == "terminated"
    down = CliRunner().invoke(cli.create_app(), ["down", sandbox.sandbox_id], prog_name="seer")
    assert down.stdout == f"{sandbox.sandbox_id}: already terminated\n", down.output

    # expired as the providers' ledgers are: RECORD_TTL after the sandbox ended
    prune_records(now=record["ended_at"] + RECORD_TTL - 60)
    assert path.is_file()
    prune_records(now=record["ended_at"] + RECORD_TTL + 60)
    assert not path.exists()


def test_a_sandbox_that_ended_by_itself_loses_its_tokens_and_expires() -> None:
    """No terminate() call: the sandbox times out. `seer ls` finds it ended and scrubs its record."""
    sandbox = Sandbox(SandboxConfig(provider="local", execution_mode="cli", timeout=2)).start()
    path = record_path(sandbox.sandbox_id)
    assert "config" in json.loads(path.read_text())
    assert wait_for(lambda: not sandbox.status.alive, 60)
    listed = CliRunner().invoke(cli.create_app(), ["ls", "--all", "--json"], prog_name="seer")
    assert listed.exit_code == 0
    record = json.loads(path.read_text())
    assert record["status"] == "expired" and "config" not in record
    prune_records(now=record["ended_at"] + RECORD_TTL + 60)
    assert not path.exists()


def test_records_past_their_deadline_are_scrubbed_without_asking_any_provider(tmp_path: Path) -> None:
    """A record whose sandbox is past its timeout (it cannot be alive) is scrubbed by the next
    start or `seer ls`, and a record left world-readable by an older seer is made private."""
    sandbox = Sandbox(SandboxConfig(provider="local", execution_mode="cli", timeout=600)).start()
    try:
        path = record_path(sandbox.sandbox_id)
        path.chmod(0o644)
        record = json.loads(path.read_text())
        prune_records(now=record["expires_at"] - 1)
        assert _mode(path) == 0o600 and "config" in json.loads(path.read_text())
        prune_records(now=record["expires_at"] + 1)
        assert "config" not in json.loads(path.read_text())
    finally:
        sandbox.terminate()


def test_older_records_without_a_deadline_are_pruned_whatever_they_hold() -> None:
    """Records written by older seer versions have no ``expires_at``: one with its config expires
    by its timeout, and a scrubbed one (no config left) by its ``ended_at``, without an error."""
    now = time.time()
    old = {"created_at": now - 7200, "config": {"timeout": 60}, "services": {"jupyter": {"token": "t"}}}
    scrubbed = {"created_at": now - 3 * RECORD_TTL, "ended_at": now - 2 * RECORD_TTL, "status": "terminated"}
    paths = {}
    for name, record in (("local-00000000aa", old), ("local-00000000bb", scrubbed)):
        paths[name] = record_path(name)
        paths[name].parent.mkdir(parents=True, exist_ok=True)
        paths[name].write_text(json.dumps(record))
    prune_records(now=now)
    assert not {"config", "services"} & json.loads(paths["local-00000000aa"].read_text()).keys()
    assert not paths["local-00000000bb"].exists()


def test_pruning_hands_each_ended_record_to_the_sweep_in_the_same_pass() -> None:
    """``prune_records(ended=...)`` calls back for every record kept whose sandbox has ended (by
    ``ended_at``, or past its deadline and scrubbed now), not for a running one or one deleted
    past its time; a record that is not an object is passed over, not an error."""
    now = time.time()
    records = {
        "local-00000000c1": {"ended_at": now - 60, "status": "terminated", "outputs_dir": "/a"},
        "local-00000000c2": {"expires_at": now - 60, "config": {"timeout": 60}, "outputs_dir": "/b"},
        "local-00000000c3": {"expires_at": now + 600, "outputs_dir": "/c"},
        "local-00000000c4": {"ended_at": now - 2 * RECORD_TTL, "outputs_dir": "/d"},
        "local-00000000c5": ["not", "a", "record"],
    }
    paths = {}
    for name, record in records.items():
        paths[name] = record_path(name)
        paths[name].parent.mkdir(parents=True, exist_ok=True)
        paths[name].write_text(json.dumps(record))
    seen: list[str] = []
    try:
        prune_records(now=now, ended=lambda record: seen.append(record.get("outputs_dir")))
        # (other tests' sandboxes that ended may be in the records too)
        assert sorted(str(d) for d in seen if d in {"/a", "/b", "/c", "/d"}) == ["/a", "/b"]
        assert "config" not in json.loads(paths["local-00000000c2"].read_text())
        assert not paths["local-00000000c4"].exists()
        assert paths["local-00000000c3"].exists() and paths["local-00000000c5"].exists()
    finally:
        for path in paths.values():
            path.unlink(missing_ok=True)
