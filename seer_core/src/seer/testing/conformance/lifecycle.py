"""Lifecycle: start, status, attach, list, terminate (idempotent, from anywhere), a sandbox
outliving its killed client, expiry, isolation, and clean-up after a failed start."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from seer.config import SandboxConfig
from seer.errors import (
    InvalidSandboxIdError,
    SandboxNotFoundError,
    SandboxNotRunningError,
    SandboxStartError,
)
from seer.providers.base import MachineStatus, Provider
from seer.sandbox import Sandbox
from seer.testing.clients import killed_client
from seer.testing.conformance.base import ConformanceBase
from seer.testing.conformance.helpers import (
    alive_ids,
    live_processes,
    unique_token,
    wait_for,
)


class LifecycleTests(ConformanceBase):
    """Lifecycle: start, status, attach, list, terminate (idempotent, from anywhere), a sandbox
    outliving its killed client, expiry, isolation, and clean-up after a failed start."""

    def test_start_status_terminate(self, provider: Provider, start_sandbox: Callable[..., Sandbox]) -> None:
        sb = start_sandbox(name="conformance-life")
        assert isinstance(sb.sandbox_id, str) and sb.sandbox_id
        assert sb.provider == self.provider_name
        assert sb.status is MachineStatus.RUNNING
        assert sb.exec("echo alive", timeout=60).stdout == "alive\n"
        sb.terminate()
        assert sb.status is MachineStatus.TERMINATED
        try:
            machine = provider.attach(sb.sandbox_id)
        except SandboxNotFoundError:
            pass  # forgetting a terminated machine is allowed
        else:
            assert machine.status() is MachineStatus.TERMINATED

    def test_attach_finds_sandbox(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.write_file(f"{scratch}/first.txt", "from the first handle")
        again = Sandbox.attach(sandbox.sandbox_id)
        assert again.sandbox_id == sandbox.sandbox_id
        assert again.provider == self.provider_name
        assert again.status is MachineStatus.RUNNING
        assert again.workdir == sandbox.workdir
        assert again.read_file(f"{scratch}/first.txt") == "from the first handle"
        again.write_file(f"{scratch}/second.txt", "from the second handle")
        assert sandbox.read_file(f"{scratch}/second.txt") == "from the second handle"

    def test_provider_attach(self, provider: Provider, sandbox: Sandbox) -> None:
        machine = provider.attach(sandbox.sandbox_id)
        assert machine.id == sandbox.sandbox_id
        assert machine.workdir == sandbox.workdir
        assert machine.status() is MachineStatus.RUNNING
        assert machine.exec(["echo", "attached"], timeout=60).stdout == "attached\n"

    def test_attach_from_another_process(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.write_file(f"{scratch}/cross.txt", "cross-process")
        code = (
            "import sys\nfrom seer import Sandbox\n"
            "sb = Sandbox.attach(sys.argv[1])\n"
            "print(sb.status.value, sb.read_file(sys.argv[2]))\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code, sandbox.sandbox_id, f"{scratch}/cross.txt"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "running cross-process\n"

    def test_attach_unknown_id(self, provider: Provider) -> None:
        unknown = f"{self.provider_name}-no-such-sandbox-{secrets.token_hex(4)}"
        with pytest.raises(SandboxNotFoundError):
            provider.attach(unknown)
        with pytest.raises(SandboxNotFoundError):
            Sandbox.attach(unknown)

    def test_list_reports_sandbox(self, provider: Provider, sandbox: Sandbox) -> None:
        infos = {m.id: m for m in provider.list()}
        assert sandbox.sandbox_id in infos, f"list() misses {sandbox.sandbox_id}: {sorted(infos)}"
        info = infos[sandbox.sandbox_id]
        assert info.provider == self.provider_name
        assert info.status is MachineStatus.RUNNING
        assert info.name == "conformance-shared"
        assert info.labels.get("seer.name") == "conformance-shared"
        assert abs(time.time() - info.created_at) < self.sandbox_timeout
        if info.expires_at is not None:
            lifetime = info.expires_at - info.created_at
            assert abs(lifetime - sandbox.config.timeout) < 120, f"expires {lifetime:.0f}s after creation"
        json.dumps(info.to_dict())

    def test_list_after_terminate(self, provider: Provider, start_sandbox: Callable[..., Sandbox]) -> None:
        sb = start_sandbox()
        assert sb.sandbox_id in alive_ids(provider)
        sb.terminate()
        assert sb.sandbox_id not in alive_ids(provider)

    def test_terminate_is_idempotent(
        self, provider: Provider, sandbox_config: SandboxConfig, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        sb = start_sandbox()
        sb.terminate()
        sb.terminate()
        provider.terminate(sb.sandbox_id)
        provider.terminate(sb.sandbox_id)
        assert sb.status is MachineStatus.TERMINATED
        # An unknown id of the provider's own form is no error; a malformed one is refused.
        last = sb.sandbox_id[-1]
        provider.terminate(sb.sandbox_id[:-1] + ("1" if last == "0" else "0"))
        with pytest.raises(InvalidSandboxIdError):
            provider.terminate(f"../{sb.sandbox_id}")
        assert Sandbox(self.derive(sandbox_config)).terminate() is None

    def test_terminate_from_another_handle(
        self, provider: Provider, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        sb = start_sandbox()
        provider.terminate(sb.sandbox_id)
        assert sb.status is MachineStatus.TERMINATED
        with pytest.raises(SandboxNotRunningError):
            sb.exec("echo still-here", timeout=60)

    def test_outlives_a_killed_client(
        self, provider: Provider, sandbox_config: SandboxConfig, secret_value: str
    ) -> None:
        """A client killed with SIGKILL once ``start()`` returned (a crashed script) leaves its
        sandbox running, to its own lifetime limit: another process finds it in ``list()``,
        attaches and runs commands in it, and ``terminate`` (``seer down``) ends it."""
        sandbox_id = killed_client(self.derive(sandbox_config), name="conformance-orphan")
        try:
            time.sleep(self.orphan_settle)
            assert sandbox_id in alive_ids(provider), f"list() misses the orphan {sandbox_id}"
            orphan = Sandbox.attach(sandbox_id)
            assert orphan.status is MachineStatus.RUNNING
            assert orphan.exec(["echo", "still", "here"], timeout=60).stdout == "still here\n"
        finally:
            provider.terminate(sandbox_id)
        assert sandbox_id not in alive_ids(provider)

    def test_operations_after_terminate_raise(
        self, start_sandbox: Callable[..., Sandbox], tmp_path: Path
    ) -> None:
        sb = start_sandbox()
        sb.write_file("kept.txt", "x")
        sb.ensure_dir("somedir")
        sb.terminate()
        local_file = tmp_path / "f.txt"
        local_file.write_text("f")
        ops: dict[str, Callable[[], object]] = {
            "exec(str)": lambda: sb.exec("echo x", timeout=30),
            "exec(argv)": lambda: sb.exec(["echo", "x"], timeout=30),
            "exec_python": lambda: sb.exec_python("print(1)", timeout=30),
            "write_file": lambda: sb.write_file("new.txt", "x"),
            "read_file": lambda: sb.read_file("kept.txt"),
            "read_bytes": lambda: sb.read_bytes("kept.txt"),
            "ensure_dir": lambda: sb.ensure_dir("other"),
            "upload_file": lambda: sb.upload_file(local_file, "up.txt"),
            "upload_dir": lambda: sb.upload_dir(tmp_path, "updir"),
            "download_dir": lambda: sb.download_dir("somedir", tmp_path / "down"),
            "start_process": lambda: sb.machine.start_process(["sleep", "5"], name="late"),
        }
        wrong = {}
        for what, op in ops.items():
            try:
                op()
            except SandboxNotRunningError:
                continue
            except Exception as exc:
                wrong[what] = f"raised {type(exc).__name__}: {exc}"
            else:
                wrong[what] = "did not raise"
        assert not wrong, f"after terminate, expected SandboxNotRunningError from: {wrong}"

    def test_expires_on_its_own(self, provider: Provider, start_sandbox: Callable[..., Sandbox]) -> None:
        if self.expiry_timeout is None:
            pytest.skip("expiry test disabled for this provider (expiry_timeout = None)")
        token = unique_token()
        sb = start_sandbox(timeout=self.expiry_timeout)
        sb.machine.start_process(
            [sb.machine.python, "-c", "import time; time.sleep(600)", token], name="marked"
        )
        wait_for(lambda: not sb.status.alive, timeout=self.expiry_timeout + 60, what="the sandbox to expire")
        assert sb.status is MachineStatus.EXPIRED
        assert sb.sandbox_id not in alive_ids(provider)
        with pytest.raises(SandboxNotRunningError):
            sb.exec("echo x", timeout=30)
        # Processes on this host (local-style providers) must be gone; elsewhere this is vacuous.
        wait_for(lambda: not live_processes(token), timeout=15, what="the sandbox's processes to die")

    def test_sandboxes_are_isolated(self, sandbox: Sandbox, start_sandbox: Callable[..., Sandbox]) -> None:
        other = start_sandbox()
        assert other.sandbox_id != sandbox.sandbox_id
        path = f"conformance/isolation-{secrets.token_hex(3)}.txt"
        sandbox.write_file(path, "shared")
        other.write_file(path, "other")
        assert sandbox.read_file(path) == "shared"
        assert other.read_file(path) == "other"
        other.terminate()
        assert sandbox.status is MachineStatus.RUNNING
        assert sandbox.read_file(path) == "shared"

    def test_failed_start_cleans_up(self, provider: Provider, start_sandbox: Callable[..., Sandbox]) -> None:
        before = alive_ids(provider)
        missing_repo = f"file:///nonexistent/seer-conformance-{secrets.token_hex(4)}.git"
        with pytest.raises(SandboxStartError) as info:
            start_sandbox(name="conformance-fail", repos=[missing_repo])
        err = info.value
        assert err.step == "repos"
        assert "repos" in str(err)
        assert err.sandbox_id, "the failure came after provisioning, so a machine was made"
        after = alive_ids(provider)
        assert err.sandbox_id not in after
        assert after <= before, f"a failed start left machines running: {sorted(after - before)}"
