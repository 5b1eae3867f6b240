"""What a start and a teardown send to a real sshd (#27): a start on a host that has the
environment opens one channel (the agent's ``begin``, which starts the watchdog too); teardown's look at
the folders to copy is SFTP stats, no process; the connection sends without Nagle's delay."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from _ssh_kit import Box
from seer import Sandbox
from seer.errors import SandboxNotRunningError
from seer_ssh.connection import Connection
from seer_ssh.machine import SshMachine, agent

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def channels(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The session channels this process opens (each a process started on the host)."""
    opened: list[str] = []
    real = Connection.open_session

    def counting(self: Connection) -> Any:
        opened.append(self.options.address)
        return real(self)

    monkeypatch.setattr(Connection, "open_session", counting)
    yield opened


def test_a_start_where_the_environment_is_ready_is_one_channel(box: Box, channels: list[str]) -> None:
    config = box.config()
    Sandbox(config).start(quiet=True).terminate()  # the host has this package set's environment now
    channels.clear()
    sandbox = Sandbox(config).start(quiet=True)
    try:
        # begin: folders, record, environment file, the environment found, the watchdog started
        assert len(channels) == 1, channels
        machine = sandbox.machine
        assert machine.process_running("watchdog")
        # the watchdog is a sandbox process: it carries the sandbox's mark, as teardown kills by
        found = sandbox.exec(
            f"tr '\\0' '\\n' < /proc/$(cut -d' ' -f1 {machine.procs_dir}/watchdog.pid)/environ", check=True
        )
        assert f"SEER_SSH_SANDBOX={machine.id}" in found.stdout.splitlines()
        watchdog = sandbox.exec(f"cut -d' ' -f1 {machine.procs_dir}/watchdog.pid", check=True).stdout.strip()
        # the environment file begin completed puts the environment and the runtime first
        out = sandbox.exec('echo "$VIRTUAL_ENV"; command -v python; echo "$PYTHONPATH"', check=True)
        venv, python, runtime = out.stdout.split()
        assert python == f"{venv}/bin/python" == machine.python
        assert "/runtime/" in runtime
    finally:
        sandbox.terminate()
    # teardown ended the watchdog with the sandbox's other processes
    assert machine.conn.run(f"kill -0 {watchdog}")[0] != 0


def test_the_folders_teardown_copies_are_found_without_a_process(box: Box, channels: list[str]) -> None:
    """``existing_dirs`` by SFTP: a folder, a link to one, a file, nothing; and a sandbox that
    ended meanwhile is an error, never "no folder" (teardown would delete without a copy)."""
    sandbox = Sandbox(box.config()).start(quiet=True)
    try:
        machine = sandbox.machine
        assert isinstance(machine, SshMachine)
        sandbox.write_file("outputs/a.txt", "a")
        sandbox.exec(
            "mkdir -p elsewhere && ln -s elsewhere linked && ln -s outputs/a.txt filelink", check=True
        )
        paths = [machine.resolve(p) for p in ("outputs", "outputs/a.txt", "notebooks", "linked", "filelink")]
        channels.clear()
        assert machine.existing_dirs(paths) == {machine.resolve("outputs"), machine.resolve("linked")}
        assert channels == []  # no command ran
        agent(machine.conn, "end", machine.base, machine.id, "lost")  # its watchdog would do this
        with pytest.raises(SandboxNotRunningError):
            machine.existing_dirs(paths)
    finally:
        sandbox.terminate(force=True)


def test_the_connection_sends_each_packet_at_once(box: Box) -> None:
    sandbox = Sandbox(box.config()).start(quiet=True)
    try:
        machine = sandbox.machine
        assert isinstance(machine, SshMachine)
        sock = machine.conn.transport.sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        sandbox.terminate()


def test_a_provider_step_gets_all_its_output_however_the_exit_status_races_it(box: Box) -> None:
    """sshd may send a command's exit status before the last of its output: ``Connection.run``
    (the agent's calls) reads to the streams' end, and a moment past the exit where a background
    child holds them open."""
    import time

    from seer_ssh.connection import connect
    from seer_ssh.options import SshOptions

    conn = connect(SshOptions.model_validate(box.options()))
    for _ in range(20):
        code, out, _err = conn.run("seq 1 20000; echo end")
        assert code == 0 and out.splitlines()[-1] == "end" and len(out.splitlines()) == 20001
    started = time.monotonic()
    code, out, _err = conn.run("sleep 30 & echo $!")
    assert code == 0 and out.strip().isdigit(), out
    assert time.monotonic() - started < 10  # not the background child's 30 s
    assert conn.run(f"kill {out.strip()}")[0] == 0
