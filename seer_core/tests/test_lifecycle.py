"""Sandbox lifecycle on the local provider: outliving the client, dying on time, never lying.

These are the promises that make the seed workflow (a setup script prints JSON and exits) safe:
a sandbox outlives the script that started it, tears itself down when its timeout passes even if
that script was killed with SIGKILL, and ``seer ls`` never reports a dead sandbox as running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _teardown_kit import wait_for as _wait_for
from seer import ExecutionMode, Sandbox, SandboxConfig
from seer.errors import SandboxNotRunningError
from seer.providers import procs
from seer.providers.base import MachineStatus
from seer.providers.local.provider import LocalProvider, sandbox_dir

pytestmark = pytest.mark.e2e

#: Bounds for waits on teardown. They only bound a loop that returns as soon as the condition
#: holds; they are generous because a loaded 2-core CI box can take seconds to start a supervisor.
SLOW = 60


def _listed_status(sandbox_id: str) -> MachineStatus | None:
    for info in LocalProvider().list():
        if info.id == sandbox_id:
            return info.status
    return None


CLIENT = textwrap.dedent(
    """
    import json, sys, time
    from seer import Sandbox, SandboxConfig

    sb = Sandbox(SandboxConfig(timeout={timeout})).start(name="killed-client")
    bg = sb.machine.start_process("sleep 600", name="sleeper")
    # A grandchild that leaves the process group and session: only the env marker finds it.
    sb.exec("setsid sleep 600 > /dev/null 2>&1 < /dev/null &")
    print(json.dumps({{"id": sb.sandbox_id, "bg": bg.pid}}), flush=True)
    time.sleep(600)
    """
)


def _start_client(timeout: int) -> tuple[subprocess.Popen[str], dict[str, object]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CLIENT.format(timeout=timeout)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else "client printed nothing"
    return proc, json.loads(line)


def test_sigkilled_client_leaves_nothing_after_timeout() -> None:
    client, info = _start_client(timeout=6)
    sandbox_id = str(info["id"])
    try:
        assert procs.marked_pids(sandbox_id), "the sandbox's processes should be running"
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)

        # The client is gone; the sandbox is not (it outlives its client until its timeout).
        assert _listed_status(sandbox_id) is MachineStatus.RUNNING
        assert procs.alive(int(info["bg"]))  # type: ignore[arg-type]
        meta = json.loads((sandbox_dir(sandbox_id) / "meta.json").read_text())
        supervisor = meta["supervisor"]["pid"]

        # Once the timeout passes, the supervisor tears everything down by itself.
        assert _wait_for(lambda: not procs.marked_pids(sandbox_id), timeout=SLOW), (
            f"processes left behind: {procs.marked_pids(sandbox_id)}"
        )
        assert _wait_for(lambda: not procs.alive(supervisor), timeout=SLOW)
        assert not procs.alive(int(info["bg"]))  # type: ignore[arg-type]
        assert _listed_status(sandbox_id) is MachineStatus.EXPIRED
        assert not (sandbox_dir(sandbox_id) / "root").exists()
    finally:
        if client.poll() is None:
            client.kill()
        LocalProvider().terminate(sandbox_id)


def test_dead_supervisor_is_reported_lost_and_cleaned_up() -> None:
    sb = Sandbox(SandboxConfig(timeout=300)).start()
    try:
        sb.machine.start_process("sleep 600", name="sleeper")
        meta = json.loads((sandbox_dir(sb.sandbox_id) / "meta.json").read_text())
        os.kill(meta["supervisor"]["pid"], signal.SIGKILL)
        assert _wait_for(lambda: not procs.alive(meta["supervisor"]["pid"]), timeout=SLOW)

        # Its supervisor died without tearing down: listing must not call it running, and
        # must clean up what it left.
        assert _listed_status(sb.sandbox_id) is MachineStatus.LOST
        assert not procs.marked_pids(sb.sandbox_id)
        assert sb.status is MachineStatus.LOST
        with pytest.raises(SandboxNotRunningError):
            sb.exec("true")
    finally:
        sb.terminate()


def _supervisor(sandbox_id: str) -> int:
    return int(json.loads((sandbox_dir(sandbox_id) / "meta.json").read_text())["supervisor"]["pid"])


def _recorded_status(sandbox_id: str) -> str:
    """The status in ``meta.json`` as it is: read without ``list()``, whose reaping would hide
    a sandbox nobody tore down."""
    return str(json.loads((sandbox_dir(sandbox_id) / "meta.json").read_text())["status"])


def _notebook_sandbox(name: str) -> Sandbox:
    """A sandbox whose Jupyter server runs a kernel that has run a cell (mirrored to the client)."""
    pytest.importorskip("websocket")
    from seer.execution import create_notebook_session

    sb = Sandbox(SandboxConfig(timeout=300)).start()
    session = create_notebook_session(sb, name=name)
    assert session.exec("print(6 * 7)").ok
    assert _wait_for(lambda: len(procs.marked_pids(sb.sandbox_id)) >= 2, timeout=SLOW)  # server, kernel
    return sb


def test_a_jupyter_server_sent_sigterm_exits_by_itself() -> None:
    """Every provider's teardown stops the Jupyter server with SIGTERM first. It used to stop
    serving and then wait forever for anyio's idle worker threads, living on until SIGKILL."""
    sb = _notebook_sandbox("jupyter-term")
    try:
        server = int(json.loads((sandbox_dir(sb.sandbox_id) / "procs" / "jupyter.json").read_text())["pid"])
        os.kill(server, signal.SIGTERM)
        assert _wait_for(lambda: not procs.alive(server), timeout=SLOW), "the server outlived its SIGTERM"
    finally:
        LocalProvider().terminate(sb.sandbox_id)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_supervisor_tears_its_sandbox_down(sig: signal.Signals) -> None:
    """The supervisor signalled by hand (or by a service manager) tears the sandbox down as
    ``terminate()`` does: nothing of the sandbox is left, none of it needed the SIGKILL after the
    grace, and the notebook is kept."""
    sb = _notebook_sandbox("signalled")
    try:
        supervisor = _supervisor(sb.sandbox_id)
        os.kill(supervisor, sig)
        assert _wait_for(lambda: not procs.alive(supervisor), timeout=SLOW)
        assert not procs.marked_pids(sb.sandbox_id)
        assert _recorded_status(sb.sandbox_id) == MachineStatus.TERMINATED.value
        log = (sandbox_dir(sb.sandbox_id) / "logs" / "supervisor.log").read_text()
        assert "tearing down: terminated" in log
        assert "killed, having not ended" not in log, log
        kept = Path(json.loads((sandbox_dir(sb.sandbox_id) / "meta.json").read_text())["kept"])
        assert "print(6 * 7)" in (kept / "signalled.ipynb").read_text()
    finally:
        LocalProvider().terminate(sb.sandbox_id)


def test_a_sigkilled_supervisor_is_torn_down_by_its_watch_with_no_client_looking() -> None:
    """SIGKILL leaves the supervisor no handler to run; its watch ends the sandbox's processes at
    once, though no ``list()`` or ``attach()`` comes to reap it."""
    sb = Sandbox(SandboxConfig(timeout=300, execution_mode=ExecutionMode.CLI)).start()
    try:
        sleeper = sb.machine.start_process("sleep 600", name="sleeper")
        sb.exec("setsid sleep 600 > /dev/null 2>&1 < /dev/null &")
        assert _wait_for(lambda: len(procs.marked_pids(sb.sandbox_id)) >= 2, timeout=5)
        # Its watch is forked before it logs that it is supervising (a start can return sooner).
        log = sandbox_dir(sb.sandbox_id) / "logs" / "supervisor.log"
        assert _wait_for(lambda: "supervising" in log.read_text(), timeout=SLOW)
        os.kill(_supervisor(sb.sandbox_id), signal.SIGKILL)
        assert _wait_for(lambda: not procs.marked_pids(sb.sandbox_id), timeout=SLOW), (
            f"processes left running: {procs.marked_pids(sb.sandbox_id)}"
        )
        assert not procs.alive(sleeper.pid)
        assert _wait_for(lambda: _recorded_status(sb.sandbox_id) == MachineStatus.LOST.value, timeout=SLOW)
        assert not Path(sb.workdir).exists()
    finally:
        LocalProvider().terminate(sb.sandbox_id)


def test_sandbox_outlives_the_script_and_attaches_from_another_process() -> None:
    script = textwrap.dedent(
        """
        import json
        from seer import Sandbox, SandboxConfig
        sb = Sandbox(SandboxConfig(timeout=300, env={"GREETING": "hello"})).start(name="seed-flow")
        sb.write_file("note.txt", "left by the setup script")
        print(json.dumps({"sandbox_id": sb.sandbox_id}))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    sandbox_id = json.loads(out.stdout)["sandbox_id"]
    try:
        sb = Sandbox.attach(sandbox_id)
        assert sb.status is MachineStatus.RUNNING
        assert sb.name == "seed-flow"
        assert sb.read_file("note.txt") == "left by the setup script"
        assert sb.exec("echo $GREETING").stdout == "hello\n"
    finally:
        LocalProvider().terminate(sandbox_id)
    assert Sandbox.attach(sandbox_id).status is MachineStatus.TERMINATED


def test_timeout_tears_down_a_sandbox_whose_client_is_alive() -> None:
    # CLI mode: a notebook mode's Jupyter start can outlast a 2 s lifetime on a loaded machine,
    # and this test is about the teardown at the deadline, not about start-up.
    sb = Sandbox(SandboxConfig(timeout=2, execution_mode=ExecutionMode.CLI)).start()
    try:
        sb.machine.start_process("sleep 600", name="sleeper")
        assert _wait_for(lambda: sb.status is MachineStatus.EXPIRED, timeout=SLOW)
        assert not procs.marked_pids(sb.sandbox_id)
        with pytest.raises(SandboxNotRunningError):
            sb.write_file("late.txt", "too late")
    finally:
        sb.terminate()


def test_terminate_is_idempotent_and_kills_everything() -> None:
    sb = Sandbox(SandboxConfig(timeout=300)).start()
    try:
        sb.exec("setsid sleep 600 > /dev/null 2>&1 < /dev/null &")
        sb.machine.start_process(["sleep", "600"], name="sleeper")
        # /proc/<pid>/environ reads empty while a process is mid-exec: give both a moment.
        assert _wait_for(lambda: len(procs.marked_pids(sb.sandbox_id)) >= 2, timeout=5)
        workdir = Path(sb.workdir)
    finally:
        sb.terminate()
    assert not procs.marked_pids(sb.sandbox_id)
    assert not workdir.exists()
    assert sb.status is MachineStatus.TERMINATED
    sb.terminate()  # again: no error
    LocalProvider().terminate(sb.sandbox_id)
    LocalProvider().terminate("local-0000000000")  # well-formed, unknown: not an error
    assert sb.status is MachineStatus.TERMINATED


def test_context_manager_terminates_on_error() -> None:
    with pytest.raises(RuntimeError, match="boom"), Sandbox(SandboxConfig(timeout=300)) as sb:
        sandbox_id = sb.sandbox_id
        raise RuntimeError("boom")
    assert _listed_status(sandbox_id) is MachineStatus.TERMINATED


def test_a_handle_in_use_sees_another_clients_terminate_at_once() -> None:
    """A handle that ran commands checks cheaply (RunningProof) that its sandbox still runs; a
    terminate from another client must still stop its next operation."""
    sb = Sandbox(SandboxConfig(execution_mode=ExecutionMode.CLI)).start()
    try:
        sb.write_file("a.txt", "one")
        assert sb.read_file("a.txt") == "one"  # the handle now holds a proof
        LocalProvider().terminate(sb.sandbox_id)  # another handle, as `seer down` would
        with pytest.raises(SandboxNotRunningError, match="terminated"):
            sb.write_file("a.txt", "two")
    finally:
        LocalProvider().terminate(sb.sandbox_id)


def test_a_handle_in_use_finds_its_supervisor_dead_and_reaps() -> None:
    sb = Sandbox(SandboxConfig(timeout=300, execution_mode=ExecutionMode.CLI)).start()
    try:
        assert sb.exec("echo hi").stdout == "hi\n"  # the handle now holds a proof
        sb.machine.start_process("sleep 600", name="sleeper")
        pid = json.loads((sandbox_dir(sb.sandbox_id) / "meta.json").read_text())["supervisor"]["pid"]
        os.kill(pid, signal.SIGKILL)
        assert _wait_for(lambda: not procs.alive(pid), timeout=SLOW)
        with pytest.raises(SandboxNotRunningError, match="lost"):
            sb.read_file("anything.txt")  # no status query first: the proof itself must fail
        assert not procs.marked_pids(sb.sandbox_id)
    finally:
        LocalProvider().terminate(sb.sandbox_id)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="RunningProof needs pidfds (Linux)")
def test_running_proof_holds_until_the_record_changes_or_the_supervisor_exits() -> None:
    from seer.providers.local.sandbox_dir import RunningProof, SandboxDir

    sb = Sandbox(SandboxConfig(execution_mode=ExecutionMode.CLI)).start()
    try:
        folder = SandboxDir(sb.sandbox_id)
        proof = RunningProof.take(folder)
        assert proof is not None and proof.holds()
        folder.update(note="rewritten")  # any rewrite of meta.json: check in full again
        assert not proof.holds()
        again = RunningProof.take(folder)
        assert again is not None and again.holds()
        again.close()
        assert not again.holds()  # a closed proof proves nothing
        fresh = RunningProof.take(folder)
        assert fresh is not None
        LocalProvider().terminate(sb.sandbox_id)
        assert not fresh.holds()
        assert RunningProof.take(folder) is None  # not running: no proof to take
    finally:
        LocalProvider().terminate(sb.sandbox_id)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="RunningProof needs pidfds (Linux)")
def test_running_proof_is_checked_from_many_threads_at_once() -> None:
    """Handles are shared by threads (the MCP server's tools, a notebook's writer): one proof
    checked concurrently must answer every thread, not raise (a shared poll object would:
    "concurrent poll() invocation"), which left a notebook restart hanging."""
    import threading

    from seer.providers.local.sandbox_dir import RunningProof, SandboxDir

    sb = Sandbox(SandboxConfig(execution_mode=ExecutionMode.CLI)).start()
    try:
        proof = RunningProof.take(SandboxDir(sb.sandbox_id))
        assert proof is not None
        answers: list[bool] = []
        errors: list[BaseException] = []

        def check() -> None:
            try:
                answers.extend(proof.holds() for _ in range(3000))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=check) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors[:1]
        assert len(answers) == 8 * 3000 and all(answers)
    finally:
        LocalProvider().terminate(sb.sandbox_id)
