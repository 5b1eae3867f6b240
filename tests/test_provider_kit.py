"""The provider kit (:mod:`seer.providers.kit`): its pieces on their own, and what it gives a
provider built on it (the toy provider, tests/plugins/seer-toy-provider).

The kit's machine-level promises (exec, background processes, files, status) are judged by the
conformance suite, which local, docker and the toy all pass; here: the output pump's deadlines
over real processes, the ledger's statuses, privacy and expiry, the starter watch ending a toy
sandbox whose starting client was killed, and the size the kit leaves a provider at.
"""

from __future__ import annotations

import ast
import json
import os
import secrets
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest
from seer.errors import ExecTimeoutError
from seer.providers import kit, starter
from seer.providers.base import MachineInfo, MachineStatus, Provider
from seer.state import RECORD_TTL
from seer.testing.conformance import live_processes, wait_for

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]


def _popen(script: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["bash", "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


# --- the output pump ---------------------------------------------------------------------------
@pytest.mark.e2e
def test_pump_deadline_kills_the_group_and_keeps_partial_output() -> None:
    token = f"kitpump{secrets.token_hex(4)}"
    proc = _popen(
        f"echo partial; echo err >&2; {sys.executable} -c 'import time; time.sleep(600)' {token} & wait"
    )
    pump = kit.OutputPump("the command", timeout=1.5)
    started = time.monotonic()
    with pytest.raises(ExecTimeoutError) as info:
        kit.pump_popen(proc, pump)
    assert time.monotonic() - started < 10
    assert (info.value.stdout, info.value.stderr, info.value.timeout) == ("partial\n", "err\n", 1.5)
    wait_for(lambda: not live_processes(token), timeout=10, what="the timed-out command's child to die")


@pytest.mark.e2e
def test_pump_does_not_wait_for_a_background_child_holding_the_streams() -> None:
    token = f"kitlinger{secrets.token_hex(4)}"
    proc = _popen(f"echo done; {sys.executable} -c 'import time; time.sleep(600)' {token} & exit 3")
    pump = kit.OutputPump("the command", timeout=60)
    started = time.monotonic()
    try:
        code = kit.pump_popen(proc, pump)
        assert time.monotonic() - started < 5, "a background child holding stdout held exec up"
        assert (code, pump.result(code).stdout) == (3, "done\n")
    finally:
        for pid in live_processes(token):
            os.kill(pid, signal.SIGKILL)


def test_pump_keeps_output_that_arrives_after_the_exit_status() -> None:
    # A command silent for longer than the linger, whose output and stream end reach the pump only
    # after its exit status did (separate calls to a remote API, or reader threads run late): the
    # quiet that lets the pump stop early counts from the exit, so the output is kept.
    pump = kit.OutputPump("the command", timeout=30)
    started = time.monotonic()
    exit_seen: list[float] = []

    def exited(seconds: float) -> bool:
        if time.monotonic() - started < 1.5:  # more than the linger, all of it silent
            time.sleep(min(seconds, 0.02))
            return False
        exit_seen.append(time.monotonic())
        return True

    def stream(data: bytes) -> Callable[[], bytes | None]:
        chunks = [data, b""]

        def read() -> bytes | None:
            if not exit_seen or time.monotonic() < exit_seen[0] + 0.3:
                time.sleep(0.02)
                return None
            return chunks.pop(0)

        return read

    pump.read_stream(stream(b"the tail\n"), "stdout")
    pump.read_stream(stream(b"not found\n"), "stderr")
    pump.wait(exited)
    result = pump.result(127)
    assert (result.stdout, result.stderr) == ("the tail\n", "not found\n")


@pytest.mark.e2e
def test_pump_streams_text_and_keeps_raw_bytes() -> None:
    seen: list[tuple[str, str]] = []
    proc = _popen(r"printf 'a\303'; sleep 0.3; printf '\251\377z'; printf e >&2")
    pump = kit.OutputPump("printf", timeout=30, on_output=lambda stream, text: seen.append((stream, text)))
    result = pump.result(kit.pump_popen(proc, pump))
    assert pump.data("stdout") == b"a\xc3\xa9\xffz"  # what a file read over exec needs
    assert result.stdout == "aé\ufffdz" == "".join(t for s, t in seen if s == "stdout")
    assert result.stderr == "e"


@pytest.mark.e2e
def test_pump_feeds_stdin() -> None:
    data = os.urandom(3 * 1024 * 1024)
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, hashlib; print(len(sys.stdin.buffer.read()))"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    pump = kit.OutputPump("count", timeout=60)
    assert pump.result(kit.pump_popen(proc, pump, data)).stdout == f"{len(data)}\n"


# --- GPUs --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("wanted", "found", "matches"),
    [
        ("A100", "NVIDIA A100-SXM4-80GB", True),
        ("A100-80GB", "NVIDIA A100-SXM4-80GB", True),
        ("A100-40GB", "NVIDIA A100-SXM4-80GB", False),
        ("H100", "NVIDIA H100 80GB HBM3", True),
        ("H200", "NVIDIA H200", True),
        ("H100", "NVIDIA H200", False),
        ("T4", "NVIDIA A10G", False),
    ],
)
def test_gpu_matches(wanted: str, found: str, matches: bool) -> None:
    assert kit.gpu_matches(wanted, found) is matches


def test_local_and_docker_share_the_kit_gpu_check() -> None:
    from seer.providers.local import provider as local

    assert local.detect_gpus is kit.detect_gpus
    # providers never import each other: docker borrowed the check from the local provider
    for path in (REPO / "providers" / "docker" / "src" / "seer_docker").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("seer.providers.local"), (
                    f"{path.name} imports the local provider"
                )


# --- the ledger --------------------------------------------------------------------------------
class _Fake(Provider):
    name: ClassVar[str] = "kit-fake"
    id_pattern: ClassVar[str] = r"fake-[0-9a-f]{6}"

    def create(self, spec):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def attach(self, machine_id):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def list(self):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def terminate(self, machine_id):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def _fake_id() -> str:
    return f"fake-{secrets.token_hex(3)}"


def test_ledger_records_are_private() -> None:
    ledger = kit.Ledger(_Fake)
    sandbox_id = _fake_id()
    ledger.begin(sandbox_id, name="n", timeout=60, labels={"seer.name": "n"}, watch=False, workdir="/w")
    path = ledger.path(sandbox_id)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert ledger.read(sandbox_id)["workdir"] == "/w"  # type: ignore[index]


def test_ledger_tells_how_a_gone_machine_ended() -> None:
    ledger = kit.Ledger(_Fake)
    ended, overdue, vanished = _fake_id(), _fake_id(), _fake_id()
    for sandbox_id in (ended, overdue, vanished):
        ledger.begin(sandbox_id, name=sandbox_id, timeout=600, labels={}, watch=False)
    ledger.end(ended)
    ledger.end(ended, MachineStatus.LOST)  # the first end is the one kept
    ledger.update(overdue, expires_at=time.time() - 1)
    assert ledger.status(ended, alive=False) is MachineStatus.TERMINATED
    assert ledger.status(overdue, alive=False) is MachineStatus.EXPIRED
    assert ledger.status(vanished, alive=False) is MachineStatus.LOST
    assert ledger.status(vanished, alive=True) is MachineStatus.RUNNING
    # once settled, a status stays what it was first seen as
    ledger.update(vanished, expires_at=time.time() - 1)
    assert ledger.status(vanished, alive=False) is MachineStatus.LOST
    assert "ended_at" in ledger.read(vanished)  # type: ignore[operator]


def test_ledger_machines_starting_running_ended_and_expired(seer_home: Path) -> None:
    ledger = kit.Ledger(_Fake)
    starting, running, gone, old, live = (_fake_id() for _ in range(5))
    for sandbox_id in (starting, running, gone, old):
        ledger.begin(sandbox_id, name=sandbox_id, timeout=600, labels={"k": "v"}, watch=False)
    ledger.started(running)
    ledger.end(old)
    ledger.update(old, ended_at=time.time() - RECORD_TTL - 1)
    (ledger.dir / "not-an-id.json").write_text(json.dumps({"created_at": 1}))
    found = ledger.machines(
        [MachineInfo(live, "kit-fake", "live", MachineStatus.RUNNING, time.time())],
        alive=lambda sandbox_id: sandbox_id in (starting, running),
    )
    status = {m.id: m.status for m in found}
    assert status[starting] is MachineStatus.STARTING  # its starter (this process) lives
    assert status[running] is MachineStatus.RUNNING
    assert status[gone] is MachineStatus.LOST
    assert status[live] is MachineStatus.RUNNING
    assert old not in status and not ledger.path(old).exists(), "an ended record outlived RECORD_TTL"
    assert "not-an-id" not in status and (ledger.dir / "not-an-id.json").exists()
    assert {m.labels.get("k") for m in found if m.id in (starting, running, gone)} == {"v"}


# --- a provider built on the kit: the toy ------------------------------------------------------
def test_toy_provider_is_small() -> None:
    src = REPO / "tests" / "plugins" / "seer-toy-provider" / "src"
    lines = sum(len(p.read_text().splitlines()) for p in src.rglob("*.py"))
    assert lines <= 150, f"the toy provider is {lines} lines; the kit should keep it within 150"


_KILLED_START = """
import sys, time
from seer_toy_provider import ToyProvider
from seer.providers.base import MachineSpec
machine = ToyProvider().create(MachineSpec(name="killed", timeout=600))
machine.start_process([sys.executable, "-c", "import time; time.sleep(600)", sys.argv[1]], name="bg")
print(machine.id, flush=True)
time.sleep(600)
"""


@pytest.mark.e2e
def test_toy_sandbox_ends_when_its_starter_dies() -> None:
    from seer_toy_provider import LEDGER, ToyProvider

    token = f"kitstarter{secrets.token_hex(4)}"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_START, token],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        sandbox_id = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert sandbox_id, "the starting client made no sandbox"
        assert {m.id: m.status for m in ToyProvider().list()}[sandbox_id] is MachineStatus.STARTING
        assert live_processes(token)
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: not live_processes(token), timeout=15, what="the half-made sandbox's processes to die")
    assert ToyProvider().attach(sandbox_id).status() is MachineStatus.LOST
    assert LEDGER.read(sandbox_id)["starter"] is None  # type: ignore[index]


def test_starter_watch_loads_no_provider_while_the_start_runs() -> None:
    """The watch runs beside every start: until the starter dies it imports only
    seer.providers.starter, without site-packages (no provider module, no pydantic: ~0.6 s of CPU
    for docker's; not even pathlib), and it exits once the record says the start finished."""
    ledger = kit.Ledger(_Fake)
    sandbox_id = _fake_id()
    ledger.begin(sandbox_id, name="n", timeout=60, labels={}, watch=False)
    argv = ledger._watch_argv(sandbox_id)
    assert argv[1:3] == ["-S", "-c"]
    argv[3] += "print(' '.join(sorted(sys.modules)))\n"
    watch = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)  # this process: its starter
    try:
        time.sleep(2 * starter.WATCH_INTERVAL)
        assert watch.poll() is None, "the watch left while its starter (this process) lives"
        ledger.started(sandbox_id)
        out, _ = watch.communicate(timeout=10)
    finally:
        watch.kill()
        watch.wait()
    assert watch.returncode == 0
    loaded = set(out.split())
    assert "seer.providers.starter" in loaded
    assert not {"site", "pathlib", "pydantic", "seer.providers.base", "seer.providers.kit"} & loaded, loaded
    assert MachineStatus.RUNNING.value == starter.RUNNING


def test_starter_watch_wakes_when_the_starter_closes_its_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a wake pipe the watch does not wait out its interval: the starter closing the pipe
    (start finished, the sandbox ended, the record forgotten) makes it look again at once. The
    interval here is an hour, so only the wake can end the watch within the test."""
    ledger = kit.Ledger(_Fake)
    sandbox_id = _fake_id()
    ledger.begin(sandbox_id, name="n", timeout=600, labels={}, watch=False)
    monkeypatch.setattr(starter, "WATCH_INTERVAL", 3600.0)
    wake_read, wake_write = os.pipe()
    returned: list[bool] = []
    watch = threading.Thread(
        target=lambda: returned.append(
            starter.watch_record(ledger.path(sandbox_id), parent=os.getppid(), wake=wake_read)
        ),
        daemon=True,  # a watch that never woke must not hold the test run for its hour
    )
    watch.start()
    try:
        time.sleep(0.2)
        assert watch.is_alive(), "the watch left while its starter lives and the start runs"
        ledger.update(sandbox_id, starter=None)  # what Ledger.started writes before it wakes
        os.close(wake_write)
        watch.join(timeout=30)
        assert not watch.is_alive(), "closing the wake pipe did not wake the watch"
        assert returned == [False]  # the start finished: nothing to end
    finally:
        os.close(wake_read)


def test_ledger_started_ends_its_running_watch() -> None:
    """The watch Ledger.begin starts (its real process) exits once start() finished: the
    ledger closes its wake pipe in started(), and nothing of the watch outlives the start."""
    ledger = kit.Ledger(_Fake)
    sandbox_id = _fake_id()
    ledger.begin(sandbox_id, name="n", timeout=600, labels={})
    try:
        wait_for(lambda: live_processes(str(ledger.path(sandbox_id))), timeout=15, what="the watch to start")
        assert (_Fake.name, sandbox_id) in kit.ledger._WATCH_WAKERS
    finally:
        ledger.started(sandbox_id)
    assert (_Fake.name, sandbox_id) not in kit.ledger._WATCH_WAKERS
    wait_for(lambda: not live_processes(str(ledger.path(sandbox_id))), timeout=15, what="the watch to exit")


# --- Docker's multiplexed stream -------------------------------------------------------------
def _frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


def test_stream_frames_reassemble_chunks_split_anywhere() -> None:
    """Frames arriving in chunks of any size (one byte at a time, split inside a header) come out
    whole and in order; empty frames are dropped; a partial frame waits."""
    wire = _frame(1, b"out-1") + _frame(2, b"err") + _frame(1, b"") + _frame(1, b"out-2" * 1000)
    for step in (1, 3, 7, 8, 9, len(wire)):
        seen: list[tuple[int, bytes]] = []
        frames = kit.StreamFrames(lambda stream, data, seen=seen: seen.append((stream, data)))
        for at in range(0, len(wire), step):
            frames.feed(wire[at : at + step])
        assert seen == [(1, b"out-1"), (2, b"err"), (1, b"out-2" * 1000)], step
        assert frames.pending == 0
    half = kit.StreamFrames(lambda stream, data: pytest.fail("a partial frame was delivered"))
    half.feed(_frame(2, b"abcdef")[:-2])
    assert half.pending == 12
