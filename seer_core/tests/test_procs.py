"""seer.providers.procs: teardown's SIGKILL reaches the sandbox's process groups that are still
its own, never a group number another process took after the sandbox's group ended (PIDs wrap:
at 32768 on many machines, within a busy test run)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from seer.providers import procs

SANDBOX = "local-0123456789"

#: Ignores SIGTERM, as a stuck process does: only the SIGKILL after the grace ends it.
_STUBBORN = (
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint(flush=True)\ntime.sleep(60)\n"
)
#: Ends on SIGTERM.
_OBEDIENT = "import time\nprint(flush=True)\ntime.sleep(60)\n"


@pytest.fixture
def group() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _start(code: str, started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """A process in a session (and group) of its own, carrying the sandbox's marker, once it runs."""
    env = {**os.environ, procs.MARKER: SANDBOX}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, start_new_session=True, stdout=subprocess.PIPE
    )
    started.append(proc)
    assert proc.stdout is not None and proc.stdout.readline() == b"\n"  # its handler is in place
    return proc


@pytest.mark.e2e
def test_teardown_kills_what_stays_and_spares_a_group_number_taken_meanwhile(
    group: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    stubborn = _start(_STUBBORN, group)
    obedient = _start(_OBEDIENT, group)
    assert sorted(procs.sandbox_groups(SANDBOX, [stubborn.pid, obedient.pid])) == sorted(
        [stubborn.pid, obedient.pid]
    )
    real_start_time, real_kill_group = procs.start_time, procs.kill_group
    signalled: list[tuple[int, int]] = []

    def start_time(pid: int) -> str | None:
        # Once the obedient group has ended, its number is a new process's: another start time.
        if pid == obedient.pid and obedient.poll() is not None:
            return "taken by another process"
        return real_start_time(pid)

    def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
        signalled.append((pgid, sig))
        real_kill_group(pgid, sig)

    monkeypatch.setattr(procs, "start_time", start_time)
    monkeypatch.setattr(procs, "kill_group", kill_group)
    stuck = procs.kill_sandbox_processes(SANDBOX, [stubborn.pid, obedient.pid], grace=1.0)

    assert obedient.wait(5) == -signal.SIGTERM
    assert stubborn.wait(5) == -signal.SIGKILL
    assert stuck == [stubborn.pid]
    assert (obedient.pid, signal.SIGTERM) in signalled and (stubborn.pid, signal.SIGKILL) in signalled
    assert (obedient.pid, signal.SIGKILL) not in signalled, "a group number another process took"


@pytest.mark.unit
def test_a_group_is_signalled_only_while_its_number_is_still_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """kill_groups: a leader that is the same process as before, or gone (its group may live on
    in its children), gets the signal; a leader with another start time, or one that appeared
    where there was none, does not."""
    sent: list[tuple[int, int]] = []
    born = {101: "500", 102: None, 103: "700", 104: None}
    now = {101: "500", 102: None, 103: "999", 104: "800"}
    monkeypatch.setattr(procs, "start_time", now.get)
    monkeypatch.setattr(procs, "kill_group", lambda pgid, sig: sent.append((pgid, sig)))
    procs.kill_groups([101, 102, 103, 104], born, signal.SIGTERM)
    assert sent == [(101, signal.SIGTERM), (102, signal.SIGTERM)]


# --- the same in the shell a kit machine runs (ssh, slurm, RunPod and Modal machines) ---------
def _bash(snippet: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", snippet, "seer", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.e2e
def test_the_kit_shell_knows_a_leader_from_a_later_process(group: list[subprocess.Popen[bytes]]) -> None:
    from seer.providers.kit import machine

    proc = _start(_OBEDIENT, group)
    started = procs.start_time(proc.pid)
    assert started is not None
    check = machine._PROC_FUNCS + '\nleader_is "$1" "$2"\n'
    assert _bash(check, str(proc.pid), started).returncode == 0  # the recorded process
    assert _bash(check, str(proc.pid), str(int(started) + 1)).returncode == 1  # a later one
    proc.kill()
    proc.wait()
    assert _bash(check, str(proc.pid), started).returncode == 0  # gone: its group may live on


@pytest.mark.e2e
def test_the_kit_stop_kills_a_group_whose_leader_left_children_behind(tmp_path: Path) -> None:
    """The leader ends on SIGTERM, its child in the same group does not: the KILL after the
    grace still reaches the group."""
    from seer.providers.kit import machine

    marker = tmp_path / "child.pid"
    leader = subprocess.Popen(
        [
            "bash",
            "-c",
            f"trap '' TERM; {sys.executable} -c 'import time; time.sleep(60)' & echo $! > {marker}; "
            "trap - TERM; sleep 60 & wait",
        ],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() or not marker.read_text().strip():
            assert time.monotonic() < deadline, "the child did not start"
            time.sleep(0.05)
        child = int(marker.read_text())
        (tmp_path / "procs").mkdir()
        (tmp_path / "procs" / "p.pid").write_text(f"{leader.pid} {procs.start_time(leader.pid)}\n")
        result = _bash(machine._STOP, str(tmp_path / "procs"), "p", "1")
        assert result.returncode == 0, result.stderr
        assert leader.wait(10) == -signal.SIGTERM
        deadline = time.monotonic() + 10
        while procs.alive(child):
            assert time.monotonic() < deadline, "the child that ignored SIGTERM outlived the stop"
            time.sleep(0.05)
        assert not (tmp_path / "procs" / "p.pid").exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
