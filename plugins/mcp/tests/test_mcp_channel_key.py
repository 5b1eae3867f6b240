"""The shared kernel-channel key of a session (``seer-mcp-<session_id>``) goes to one notebook MCP
server at a time: servers attaching at the same instant to an idle session all see no client
connected, and two taking the shared key would cut each other's running cells off (Jupyter closes
an open connection whose key a new one reuses)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest
from seer_mcp.registry import channel_key

IDLE = {"kernel": {"connections": 0}}


@pytest.mark.unit
def test_attaches_at_the_same_instant_take_the_shared_key_once() -> None:
    session_id = str(uuid.uuid4())
    barrier = threading.Barrier(4)
    keys: list[str] = []

    def attach() -> None:
        barrier.wait()
        keys.append(channel_key(session_id, IDLE))

    threads = [threading.Thread(target=attach) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(keys) == 4
    assert keys.count(f"seer-mcp-{session_id}") == 1, keys
    assert len(set(keys)) == 4
    # with a client connected, a key of its own, as before
    assert channel_key(session_id, {"kernel": {"connections": 1}}) != f"seer-mcp-{session_id}"


_SERVER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from seer_mcp.registry import channel_key
    go = Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.001)
    print(channel_key(sys.argv[1], {"kernel": {"connections": 0}}), flush=True)
    sys.stdin.read()  # holds what it took until told to exit
    """
)


@pytest.mark.e2e
def test_two_servers_attaching_at_once_and_the_next_after_they_exit(tmp_path: Path) -> None:
    """Two server processes attach at the same instant: one takes the shared key. Once both have
    exited (however: the claim is a lock the system drops), the next server takes it again, so
    it is replayed what the kernel sent meanwhile."""
    session_id = str(uuid.uuid4())
    go = tmp_path / "go"
    servers = [
        subprocess.Popen(
            [sys.executable, "-c", _SERVER, session_id, str(go)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        for _ in range(2)
    ]
    try:
        go.touch()
        keys = [s.stdout.readline().strip() for s in servers if s.stdout is not None]
        assert keys.count(f"seer-mcp-{session_id}") == 1, keys
        # while one holds it, nobody else gets it
        assert channel_key(session_id, IDLE) != f"seer-mcp-{session_id}"
    finally:
        for s in servers:
            s.kill()
            s.wait(timeout=30)
    assert channel_key(session_id, IDLE) == f"seer-mcp-{session_id}"


def _claim_file(session_id: str) -> Path:
    import hashlib

    from seer_mcp.channels import claims_dir

    return claims_dir() / hashlib.sha256(session_id.encode()).hexdigest()[:32]


@pytest.mark.e2e
def test_claim_files_are_not_left_behind(tmp_path: Path) -> None:
    """A server that exits removes its claim file; one that was killed leaves it, and the sweep run
    when a sandbox is terminated removes it, never one a live server holds."""
    from seer_mcp.channels import sweep_claims

    def server(session_id: str) -> subprocess.Popen[str]:
        go = tmp_path / "go"
        go.touch()
        proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, session_id, str(go)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"seer-mcp-{session_id}"
        return proc

    exits, killed, lives = (str(uuid.uuid4()) for _ in range(3))
    proc = server(exits)
    proc.communicate("", timeout=30)  # stdin closed: it exits
    assert proc.returncode == 0
    assert not _claim_file(exits).exists(), "an exiting server left its claim file"

    victim, living = server(killed), server(lives)
    try:
        victim.kill()
        victim.wait(timeout=30)
        assert _claim_file(killed).exists()
        assert _claim_file(lives) in sweep_claims()
        assert not _claim_file(killed).exists()
        assert _claim_file(lives).exists(), "the sweep removed a claim a live server holds"
        assert channel_key(lives, IDLE) != f"seer-mcp-{lives}", "the live server's claim still holds"
    finally:
        for p in (victim, living):
            p.kill()
            p.wait(timeout=30)
    from seer import plugins

    plugins.hook().seer_sandbox_terminating(sandbox=None)  # what terminate calls: the sweep
    assert not _claim_file(lives).exists()
