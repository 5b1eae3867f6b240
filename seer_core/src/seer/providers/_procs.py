"""Process helpers for the local provider: liveness that survives PID reuse, and killing
everything a sandbox started, wherever it wandered (new sessions included)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

#: Every process a local sandbox runs carries this variable; teardown hunts for it.
MARKER = "SEER_SANDBOX_ID"
_PROC = Path("/proc")


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (Linux), to tell it from a later process with its PID."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime); the command name (field 2) may hold spaces, so split after ')'.
    return stat.rsplit(")", 1)[1].split()[19]


def alive(pid: int | None, started: str | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, if ``started`` is given, is the same process."""
    if not pid:
        return False
    if sys.platform.startswith("linux"):
        try:
            stat = (_PROC / str(pid) / "stat").read_text()
        except OSError:
            return False
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):
            return False
        return started is None or fields[19] == started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def marked_pids(sandbox_id: str) -> list[int]:
    """PIDs of live processes whose environment carries ``SEER_SANDBOX_ID=<sandbox_id>``."""
    if not _PROC.is_dir():
        return []
    needle = f"{MARKER}={sandbox_id}".encode()
    me = os.getpid()
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            found.append(int(entry.name))
    return found


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a process group, ignoring one that is gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_sandbox_processes(sandbox_id: str, pgids: list[int], *, grace: float = 2.0) -> None:
    """TERM the sandbox's process groups and marked processes, then KILL what is left."""
    for pgid in pgids:
        kill_group(pgid, signal.SIGTERM)
    for pid in marked_pids(sandbox_id):
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not marked_pids(sandbox_id) and not any(_group_alive(g) for g in pgids):
            return
        time.sleep(0.05)
    for pgid in pgids:
        kill_group(pgid, signal.SIGKILL)
    # A process may fork while we look; a few rounds catch the stragglers.
    for _ in range(20):
        pids = marked_pids(sandbox_id)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # A group whose only members are zombies still answers; treat a zombie leader as gone.
    return alive(pgid)
