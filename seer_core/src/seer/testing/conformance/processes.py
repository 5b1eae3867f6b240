"""Background processes and ports: started, logged, stopped with their children, a port exposed as
a URL the client reaches, and all of it ended by terminate."""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Callable

import pytest

from seer.errors import SandboxError
from seer.sandbox import Sandbox
from seer.testing.conformance.base import ConformanceBase
from seer.testing.conformance.helpers import (
    answers,
    fetch,
    live_processes,
    unique_token,
    wait_for,
)


class ProcessTests(ConformanceBase):
    """Background processes and ports: started, logged, stopped with their children, a port exposed as
    a URL the client reaches, and all of it ended by terminate."""

    def test_background_process(self, sandbox: Sandbox, scratch: str) -> None:
        machine = sandbox.machine
        token = unique_token()
        name = f"bg-{token}"
        sandbox.ensure_dir(f"{scratch}/bgcwd")
        code = (
            "import os, time\nprint('ready', os.environ.get('BG_VAR'), os.getcwd(), flush=True)\n"
            "time.sleep(600)\n"
        )
        info = machine.start_process(
            [machine.python, "-u", "-c", code, token],
            name=name,
            env={"BG_VAR": "bg-value"},
            cwd=f"{scratch}/bgcwd",
        )
        try:
            assert info.name == name
            assert info.log_path == machine.log_path(name)
            assert machine.process_running(name)
            wait_for(
                lambda: "ready" in machine.process_log(name), timeout=30, what="the background process's log"
            )
            log = machine.process_log(name)
            assert "bg-value" in log and "bgcwd" in log
            assert "ready" in sandbox.read_file(info.log_path)
            # the handle is not needed: another one sees it too
            assert Sandbox.attach(sandbox.sandbox_id).machine.process_running(name)
            with pytest.raises((ValueError, SandboxError)):
                machine.start_process(["sleep", "5"], name=name)
            assert self.live_in_sandbox(sandbox, token)
        finally:
            machine.stop_process(name, grace=5)
        assert not machine.process_running(name)
        wait_for(lambda: not self.live_in_sandbox(sandbox, token), timeout=15, what="the process to die")
        machine.stop_process(name)
        machine.stop_process(f"never-started-{token}")

    def test_background_process_that_exits(self, sandbox: Sandbox) -> None:
        machine = sandbox.machine
        name = f"short-{secrets.token_hex(3)}"
        machine.start_process("echo first; echo second", name=name)
        wait_for(lambda: not machine.process_running(name), timeout=30, what="the process to exit")
        assert machine.process_log(name).splitlines()[-2:] == ["first", "second"]
        assert machine.process_log(name, lines=1) == "second"
        assert name in machine.log_names()
        # the name is free again once the process has ended
        machine.start_process(["echo", "again"], name=name)
        wait_for(lambda: not machine.process_running(name), timeout=30, what="the process to exit")
        assert machine.process_log(name, lines=1) == "again"
        machine.stop_process(name)

    def test_stop_process_kills_its_children(self, sandbox: Sandbox) -> None:
        machine = sandbox.machine
        token = unique_token()
        py = shlex.quote(machine.python)
        sleeper = f"{py} -c 'import time; time.sleep(600)' {token}"
        name = f"family-{token}"
        machine.start_process(f"{sleeper} & {sleeper}; wait", name=name)
        try:
            wait_for(
                lambda: len(self.live_in_sandbox(sandbox, token)) >= 3,
                timeout=30,
                what="the process and its children to start",
            )
        finally:
            machine.stop_process(name, grace=2)
        wait_for(
            lambda: not self.live_in_sandbox(sandbox, token),
            timeout=15,
            what="stop_process to kill the process's children",
        )

    # === ports ===================================================================================
    def test_expose_port(self, sandbox: Sandbox, scratch: str) -> None:
        body = f"served {secrets.token_hex(4)}\n"
        sandbox.write_file(f"{scratch}/www/hello.txt", body)
        name = f"http-{secrets.token_hex(3)}"
        url = self.serve_http(sandbox, f"{scratch}/www", name)
        try:
            try:
                got = fetch(f"{url}/hello.txt")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nserver log:\n{sandbox.machine.process_log(name)}") from None
            assert got.decode() == body
        finally:
            sandbox.machine.stop_process(name)

    def test_terminate_kills_background_processes(self, start_sandbox: Callable[..., Sandbox]) -> None:
        sb = start_sandbox()
        token = unique_token()
        sb.write_file(f"www-{token}/ping.txt", "pong")
        url = self.serve_http(sb, f"www-{token}", "http")
        sb.machine.start_process(
            [sb.machine.python, "-c", "import time; time.sleep(600)", token], name="sleeper"
        )
        assert fetch(f"{url}/ping.txt") == b"pong"
        assert len(self.live_in_sandbox(sb, token)) >= 2
        sb.terminate()
        # Processes on this host (local-style providers) must be gone; elsewhere this is vacuous.
        wait_for(lambda: not live_processes(token), timeout=15, what="the sandbox's processes to die")
        wait_for(lambda: not answers(f"{url}/ping.txt"), timeout=15, what="the server to stop answering")
