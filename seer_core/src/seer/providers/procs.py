"""Processes on this machine: liveness that survives PID reuse (for the local provider and the
starting client's watch, :mod:`seer.providers.starter`), and killing everything a local sandbox
started, wherever it wandered (new sessions included)."""

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
    fields = _stat_fields(pid)
    # Field 22 (starttime).
    return fields[19] if fields is not None else None


def alive(pid: int | None, started: str | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, if ``started`` is given, is the same process."""
    if not pid:
        return False
    if sys.platform.startswith("linux"):
        fields = _stat_fields(pid)
        if fields is None:
            return False
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


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` from field 3 (state) on; the command name may hold spaces and ``)``."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def marked_groups(sandbox_id: str) -> set[int]:
    """The process groups with at least one live member carrying ``SEER_SANDBOX_ID=<sandbox_id>``."""
    groups = set()
    for pid in marked_pids(sandbox_id):
        fields = _stat_fields(pid)
        if fields is not None:
            groups.add(int(fields[2]))
    return groups


def sandbox_groups(sandbox_id: str, pgids: list[int]) -> list[int]:
    """Those of ``pgids`` (read from records on disk, which anyone with the disk can plant) that
    belong to the sandbox: a live member carries its marker. Where there is no ``/proc`` to
    check, the records are all there is to go on."""
    if not _PROC.is_dir():
        return list(pgids)
    ours = marked_groups(sandbox_id)
    return [g for g in pgids if g in ours]


def runs(pid: int | None, *needles: str) -> bool:
    """Whether ``pid``'s command line holds each of ``needles`` as an argument (or, where there is
    no ``/proc``, whether it is alive at all)."""
    if not pid:
        return False
    if not _PROC.is_dir():
        return alive(pid)
    try:
        argv = (_PROC / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    return all(n in argv for n in needles)


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a process group, ignoring one that is gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_groups(pgids: list[int], born: dict[int, str | None], sig: int = signal.SIGKILL) -> None:
    """Signal the process groups ``pgids`` whose leaders are the processes they were when ``born``
    (each leader's :func:`start_time`, None: already gone) was taken, or are gone: a group that
    ended meanwhile may have its number taken by another process's new session (PIDs wrap, at
    32768 on many machines), which is left alone."""
    for pgid in pgids:
        now = start_time(pgid)
        if now is not None and now != born.get(pgid):
            continue
        kill_group(pgid, sig)


def kill_sandbox_processes(sandbox_id: str, pgids: list[int], *, grace: float = 2.0) -> list[int]:
    """TERM the sandbox's process groups and marked processes, then KILL what is left. Only the
    groups of ``pgids`` that :func:`sandbox_groups` finds the sandbox's are signalled. Returns
    the pids still running after the ``grace`` (killed, having not ended on SIGTERM)."""
    pgids = sandbox_groups(sandbox_id, pgids)
    born = {pgid: start_time(pgid) for pgid in pgids}
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
            return []
        time.sleep(0.05)
    stubborn = sorted(set(marked_pids(sandbox_id)) | {g for g in pgids if _group_alive(g)})
    kill_groups(pgids, born)
    # A process may fork while we look; a few rounds catch the stragglers.
    for _ in range(20):
        pids = marked_pids(sandbox_id)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
    return stubborn


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # A group whose only members are zombies still answers; treat a zombie leader as gone.
    return alive(pgid)
