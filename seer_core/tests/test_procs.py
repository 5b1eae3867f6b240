"""seer.providers.procs: teardown's SIGKILL reaches the sandbox's process groups that are still
its own, never a group number another process took after the sandbox's group ended (PIDs wrap:
at 32768 on many machines, within a busy test run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

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
