"""The provider conformance suite: the contract every provider passes, as pytest tests.

A provider package subclasses :class:`ProviderConformance` in its tests, names its provider and
inherits every test (the pattern of langchain's standard tests and tox's test kit)::

    from seer.testing import ProviderConformance

    class TestMyProviderConformance(ProviderConformance):
        provider_name = "my-provider"

To start the suite's sandboxes with more than the defaults (an image, a region, provider options),
override the class-scoped ``sandbox_config`` fixture; every sandbox the suite starts is derived
from it (with the suite's own env and secret added)::

    class TestMyProviderConformance(ProviderConformance):
        provider_name = "my-provider"
        expiry_timeout = 60  # the class attributes below tune the suite to the provider

        @pytest.fixture(scope="class")
        @classmethod
        def sandbox_config(cls):
            return SandboxConfig(provider="my-provider", execution_mode="cli", timeout=900,
                                 provider_options={"image": "python:3.12-slim"})

What is tested goes through the public surface (:class:`~seer.sandbox.Sandbox`, and
``sandbox.machine`` for the primitives ``Sandbox`` does not wrap): lifecycle, exec semantics,
files, background processes, port exposure, clean-up after a failed start, a sandbox outliving
its killed client, errors after terminate, and, gated on the provider class's ``capabilities``,
snapshots and GPUs. A test gated on a capability the provider lacks skips with ``provider lacks
capability: <name>``.

Most tests share one sandbox per class (each works in its own scratch directory), so the suite
stays fast; tests that end a sandbox start their own. Every sandbox is terminated in a fixture
finalizer, pass or fail. The suite assumes a Linux machine with bash and the sandbox's Python.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

from seer import plugins
from seer.config import GPU_CATALOGUE, ExecutionMode, SandboxConfig
from seer.errors import (
    CapabilityError,
    ConfigError,
    ExecError,
    ExecTimeoutError,
    InvalidSandboxIdError,
    SandboxError,
    SandboxNotFoundError,
    SandboxNotRunningError,
    SandboxStartError,
)
from seer.providers.base import Capabilities, ExecResult, MachineStatus, Provider, Snapshot
from seer.sandbox import Sandbox
from seer.testing.clients import killed_client

__all__ = ["ProviderConformance", "live_processes", "wait_for"]

#: Set in every suite sandbox's ``env``: commands must see it.
ENV_NAME = "SEER_CONFORMANCE_ENV"
ENV_VALUE = "from-config"
#: Named in every suite sandbox's ``secrets``; its value is set in the client's environment.
SECRET_NAME = "SEER_CONFORMANCE_SECRET"
#: Set in the client's environment but named nowhere: no sandbox may see it.
CLIENT_ONLY_NAME = "SEER_CONFORMANCE_CLIENT_ONLY"

T = TypeVar("T")


# --- helpers ---------------------------------------------------------------------------------
def live_processes(token: str) -> list[int]:
    """PIDs of running (not zombie) processes whose command line contains ``token``.

    Self-contained: the suite also runs its source inside the sandbox to look there.
    """
    import os
    import subprocess

    me = os.getpid()
    found = []
    if os.path.isdir("/proc"):
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmdline = fh.read()
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    state = fh.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if token.encode() in cmdline and state not in (b"Z", b"X"):
                found.append(int(entry))
        return found
    out = subprocess.run(["ps", "-axo", "pid=,stat=,args="], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and token in parts[2] and not parts[1].startswith("Z") and int(parts[0]) != me:
            found.append(int(parts[0]))
    return found


def wait_for(check: Callable[[], T], *, timeout: float, what: str, interval: float = 0.1) -> T:
    """Poll ``check`` until it returns something truthy (returned), failing after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def _opener(url: str) -> urllib.request.OpenerDirector:
    host = urllib.parse.urlsplit(url).hostname or ""
    # A loopback URL must not go through a proxy from the environment.
    if host in ("127.0.0.1", "localhost", "::1"):
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


def fetch(url: str, *, attempts: int = 60, delay: float = 0.25, timeout: float = 5.0) -> bytes:
    """GET ``url``, retrying a bounded number of times while the server comes up."""
    opener = _opener(url)
    last: Exception | None = None
    for _ in range(attempts):
        try:
            with opener.open(url, timeout=timeout) as resp:
                return resp.read()
        except (urllib.error.URLError, OSError) as exc:
            last = exc
            time.sleep(delay)
    raise AssertionError(f"GET {url} failed {attempts} times; last error: {last!r}")


def _answers(url: str) -> bool:
    """Whether one GET of ``url`` succeeds."""
    try:
        with _opener(url).open(url, timeout=3) as resp:
            resp.read()
        return True
    except (urllib.error.URLError, OSError):
        return False


def _token() -> str:
    return f"seerconf{secrets.token_hex(6)}"


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root``: relative path -> file bytes (None for a directory)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        out[rel] = None if path.is_dir() else path.read_bytes()
    return out


def _alive_ids(provider: Provider) -> set[str]:
    return {m.id for m in provider.list() if m.status.alive}


# --- the suite -------------------------------------------------------------------------------
class ProviderConformance:
    """The provider contract. Subclass it (as ``Test...``) and set :attr:`provider_name`."""

    #: the registered name of the provider under test
    provider_name: ClassVar[str]
    #: ``timeout`` of the suite's sandboxes: longer than the whole class takes to run
    sandbox_timeout: ClassVar[int] = 600
    #: ``timeout`` of the sandbox that must expire on its own: longer than a start takes, short
    #: enough to wait for; None skips that test (for providers that cannot make it short)
    expiry_timeout: ClassVar[int | None] = 3
    #: how long a sandbox must go on running after its client was killed before it is looked at:
    #: longer than the provider takes to notice a client that died *during* ``start()`` (seer's
    #: starter watch polls twice a second), so a sandbox wrongly ended for its client's death is seen
    orphan_settle: ClassVar[float] = 3.0
    #: size of the large-file round trip
    large_file_size: ClassVar[int] = 32 * 1024 * 1024 + 7
    #: GPU type for the GPU test (None: the first of the provider's types its check accepts)
    gpu_type: ClassVar[str | None] = None
    gpu_count: ClassVar[int] = 1

    # --- fixtures -----------------------------------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def provider(cls) -> Provider:
        """The provider instance under test."""
        name = getattr(cls, "provider_name", None)
        if not name:
            raise TypeError(f"{cls.__name__} must set provider_name")
        return plugins.get_provider(name)

    @pytest.fixture(scope="class")
    @classmethod
    def capabilities(cls, provider: Provider) -> Capabilities:
        return type(provider).capabilities

    @pytest.fixture(scope="class")
    @classmethod
    def sandbox_config(cls) -> SandboxConfig:
        """The config every sandbox in the suite starts from. Override it (class-scoped)."""
        return SandboxConfig(
            provider=cls.provider_name, execution_mode=ExecutionMode.CLI, timeout=cls.sandbox_timeout
        )

    @pytest.fixture(scope="class")
    @classmethod
    def secret_value(cls) -> Iterator[str]:
        """The value of the suite's secret, set in this client's environment for the class,
        next to a variable no sandbox may see (only secrets named in the config cross)."""
        value = f"secret-{secrets.token_hex(8)}"
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(SECRET_NAME, value)
            mp.setenv(CLIENT_ONLY_NAME, "must-not-cross")
            yield value

    @pytest.fixture(scope="class")
    @classmethod
    def sandbox(cls, sandbox_config: SandboxConfig, secret_value: str) -> Iterator[Sandbox]:
        """One sandbox shared by the tests of a class that leave it running."""
        sb = Sandbox(cls.derive(sandbox_config))
        try:
            sb.start(name="conformance-shared")
            yield sb
        finally:
            sb.terminate()

    @pytest.fixture
    def start_sandbox(
        self, sandbox_config: SandboxConfig, secret_value: str
    ) -> Iterator[Callable[..., Sandbox]]:
        """``start_sandbox(name=..., snapshot=..., **config_changes)``: a started sandbox of its
        own, terminated when the test ends."""
        made: list[Sandbox] = []

        def start(name: str = "conformance", snapshot: Any = None, **changes: Any) -> Sandbox:
            config = self.derive(sandbox_config, **changes)
            if snapshot is not None:
                sb = Sandbox.from_snapshot(snapshot, config, name=name)
                made.append(sb)
            else:
                sb = Sandbox(config)
                made.append(sb)  # before start(), so a half-started one is still ended
                sb.start(name=name)
            return sb

        yield start
        errors = []
        for sb in made:
            try:
                sb.terminate()
            except Exception as exc:  # terminate them all, then report
                errors.append(exc)
        if errors:
            raise errors[0]

    @pytest.fixture
    def scratch(self, request: pytest.FixtureRequest) -> str:
        """A relative directory of this test's own in the shared sandbox (not yet created)."""
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:60]
        return f"conformance/{stem}-{secrets.token_hex(3)}"

    # --- helpers for subclasses and tests -------------------------------------------------------
    @classmethod
    def derive(cls, base: SandboxConfig, **changes: Any) -> SandboxConfig:
        """``base`` plus the suite's env and secret, plus ``changes`` (validated again)."""
        data = base.model_dump()
        data["env"] = {**data.get("env", {}), ENV_NAME: ENV_VALUE, **changes.pop("env", {})}
        data["secrets"] = [*[s for s in data.get("secrets", []) if s != SECRET_NAME], SECRET_NAME]
        data.update(changes)
        return type(base).model_validate(data)

    @staticmethod
    def live_in_sandbox(sandbox: Sandbox, token: str) -> list[int]:
        """PIDs of live processes in the sandbox whose command line holds ``token``."""
        code = inspect.getsource(live_processes) + f"\nprint(*live_processes({token!r}))\n"
        result = sandbox.exec_python(code, timeout=60).check()
        return [int(p) for p in result.stdout.split()]

    @staticmethod
    def free_port(sandbox: Sandbox) -> int:
        """A TCP port free on 127.0.0.1 inside the sandbox."""
        code = "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\nprint(s.getsockname()[1])"
        return int(sandbox.exec_python(code, timeout=60).check().stdout)

    def serve_http(self, sandbox: Sandbox, directory: str, name: str) -> str:
        """Start ``python -m http.server`` on a free loopback port in the sandbox, serving
        ``directory``, as background process ``name``; return the client-side URL."""
        port = self.free_port(sandbox)
        machine = sandbox.machine
        machine.start_process(
            [
                machine.python,
                "-u",
                "-m",
                "http.server",
                str(port),
                "--bind",
                "127.0.0.1",
                "--directory",
                machine.resolve(directory),
            ],
            name=name,
        )
        url = machine.expose_port(port)
        assert re.match(r"^https?://", url), f"expose_port returned {url!r}, not an http(s) URL"
        return url.rstrip("/")

    # === provider registration and config checks ================================================
    def test_provider_is_registered(self, provider: Provider) -> None:
        reg = plugins.providers()[self.provider_name]
        cls = type(provider)
        assert reg.cls is cls
        assert cls.name == self.provider_name
        assert isinstance(cls.capabilities, Capabilities)
        assert cls.capabilities.port_exposure in ("loopback", "published", "ssh-forward", "tunnel")
        avail = cls.availability()
        assert avail.usable, f"provider {self.provider_name!r} is not usable here: {avail.reason}"

    def test_base_config_accepted(self, provider: Provider, sandbox_config: SandboxConfig) -> None:
        assert type(provider).check_config(self.derive(sandbox_config)) == []

    def test_gpu_not_offered_fails_before_provisioning(
        self, provider: Provider, capabilities: Capabilities, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        missing = sorted(set(GPU_CATALOGUE) - set(capabilities.gpu_types))
        if not missing:
            pytest.skip("provider offers every GPU in the catalogue")
        before = _alive_ids(provider)
        with pytest.raises(ConfigError) as info:
            start_sandbox(gpu=missing[0])
        assert "gpu" in info.value.fields
        assert _alive_ids(provider) == before

    def test_timeout_over_max_lifetime_fails_before_provisioning(
        self, provider: Provider, capabilities: Capabilities, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        limit = capabilities.max_lifetime
        if limit is None or limit >= 7 * 24 * 3600:
            pytest.skip("provider has no lifetime limit below seer's own")
        before = _alive_ids(provider)
        with pytest.raises(ConfigError) as info:
            start_sandbox(timeout=limit + 1)
        assert "timeout" in info.value.fields
        assert _alive_ids(provider) == before

    def test_dockerfile_repo_without_capability_fails_before_provisioning(
        self, provider: Provider, capabilities: Capabilities, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        """A provider that cannot build an image from a repository's Dockerfile refuses a config
        naming one, rather than ignoring the file."""
        if capabilities.dockerfile_repos:
            pytest.skip("provider has capability: dockerfile_repos")
        before = _alive_ids(provider)
        with pytest.raises(ConfigError) as info:
            start_sandbox(repos=[{"url": "example-org/example-repo", "dockerfile": "Dockerfile"}])
        assert info.value.fields == ["repos[0].dockerfile"]
        assert "dockerfile_repos" in str(info.value) and repr(self.provider_name) in str(info.value)
        assert _alive_ids(provider) == before

    def test_debug_without_capability_fails_before_provisioning(
        self, provider: Provider, capabilities: Capabilities, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        """``debug=True`` asks for a VS Code server: refused where the provider starts none."""
        if capabilities.code_server:
            pytest.skip("provider has capability: code_server")
        before = _alive_ids(provider)
        with pytest.raises(ConfigError) as info:
            start_sandbox(debug=True)
        assert info.value.fields == ["debug"]
        assert "code_server" in str(info.value) and repr(self.provider_name) in str(info.value)
        assert _alive_ids(provider) == before

    # === lifecycle ===============================================================================
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
        assert sb.sandbox_id in _alive_ids(provider)
        sb.terminate()
        assert sb.sandbox_id not in _alive_ids(provider)

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
            assert sandbox_id in _alive_ids(provider), f"list() misses the orphan {sandbox_id}"
            orphan = Sandbox.attach(sandbox_id)
            assert orphan.status is MachineStatus.RUNNING
            assert orphan.exec(["echo", "still", "here"], timeout=60).stdout == "still here\n"
        finally:
            provider.terminate(sandbox_id)
        assert sandbox_id not in _alive_ids(provider)

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
        token = _token()
        sb = start_sandbox(timeout=self.expiry_timeout)
        sb.machine.start_process(
            [sb.machine.python, "-c", "import time; time.sleep(600)", token], name="marked"
        )
        wait_for(lambda: not sb.status.alive, timeout=self.expiry_timeout + 60, what="the sandbox to expire")
        assert sb.status is MachineStatus.EXPIRED
        assert sb.sandbox_id not in _alive_ids(provider)
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

    # === exec ===================================================================================
    def test_exec_stdout(self, sandbox: Sandbox) -> None:
        result = sandbox.exec("echo hello", timeout=60)
        assert isinstance(result, ExecResult)
        assert (result.stdout, result.stderr, result.exit_code) == ("hello\n", "", 0)
        assert result.ok
        assert str(result) == "hello\n"

    def test_exec_stderr_is_separate(self, sandbox: Sandbox) -> None:
        result = sandbox.exec("echo out; echo err >&2; echo out2", timeout=60)
        assert result.stdout == "out\nout2\n"
        assert result.stderr == "err\n"

    def test_exec_exit_codes(self, sandbox: Sandbox) -> None:
        assert sandbox.exec("exit 3", timeout=60).exit_code == 3
        assert not sandbox.exec("exit 3", timeout=60).ok
        assert sandbox.exec("exit 255", timeout=60).exit_code == 255
        assert sandbox.exec(["false"], timeout=60).exit_code == 1
        assert sandbox.exec(["true"], timeout=60).exit_code == 0

    def test_exec_missing_command_is_127(self, sandbox: Sandbox) -> None:
        missing = f"no-such-command-{secrets.token_hex(3)}"
        as_string = sandbox.exec(missing, timeout=60)
        assert as_string.exit_code == 127
        assert missing in as_string.stderr
        as_argv = sandbox.exec([missing, "--flag"], timeout=60)
        assert as_argv.exit_code == 127, as_argv.output

    def test_exec_string_runs_through_bash(self, sandbox: Sandbox) -> None:
        result = sandbox.exec('[[ -n "$BASH_VERSION" ]] && echo "$((6 * 7))" | tr 4 x', timeout=60)
        assert result.stdout == "x2\n", result.output

    def test_exec_argv_is_not_through_a_shell(self, sandbox: Sandbox) -> None:
        args = ["a b", "$HOME", "*", "'q'", '"dq"', "x;y", "`id`", "$(id)", ""]
        result = sandbox.exec(["printf", "%s|", *args], timeout=60)
        assert result.stdout == "|".join(args) + "|", result.output

    def test_exec_unicode_and_undecodable_output(self, sandbox: Sandbox) -> None:
        assert sandbox.exec(r"printf 'h\303\251llo \342\234\223'", timeout=60).stdout == "héllo ✓"
        bad = sandbox.exec(r"printf 'ok\377\376end'", timeout=60)
        assert bad.exit_code == 0
        assert bad.stdout.startswith("ok") and bad.stdout.endswith("end")

    def test_exec_large_interleaved_output(self, sandbox: Sandbox) -> None:
        code = (
            "import sys\nfor _ in range(2000):\n"
            "    sys.stdout.write('o' * 999 + '\\n'); sys.stderr.write('e' * 999 + '\\n')\n"
        )
        result = sandbox.exec([sandbox.machine.python, "-c", code], timeout=120)
        assert result.exit_code == 0, result.stderr[-2000:]
        assert result.stdout == ("o" * 999 + "\n") * 2000
        assert result.stderr == ("e" * 999 + "\n") * 2000

    def test_config_env_and_secrets_visible(self, sandbox: Sandbox, secret_value: str) -> None:
        assert sandbox.exec(f"echo ${ENV_NAME}", timeout=60).stdout == f"{ENV_VALUE}\n"
        assert sandbox.exec(["printenv", ENV_NAME], timeout=60).stdout == f"{ENV_VALUE}\n"
        assert sandbox.exec(f'printf %s "${SECRET_NAME}"', timeout=60).stdout == secret_value
        # the client's other variables stay out
        leaked = sandbox.exec(["printenv", CLIENT_ONLY_NAME], timeout=60)
        assert leaked.exit_code != 0, f"the client's {CLIENT_ONLY_NAME} crossed into the sandbox"

    def test_exec_env_argument(self, sandbox: Sandbox) -> None:
        result = sandbox.exec(
            f'echo "$SEER_CONFORMANCE_FOO:${ENV_NAME}"', env={"SEER_CONFORMANCE_FOO": "bar baz"}, timeout=60
        )
        assert result.stdout == f"bar baz:{ENV_VALUE}\n"
        # an argv command still finds programs on PATH when env= is given
        assert (
            sandbox.exec(
                ["printenv", "SEER_CONFORMANCE_FOO"], env={"SEER_CONFORMANCE_FOO": "1"}, timeout=60
            ).stdout
            == "1\n"
        )
        over = sandbox.exec(["printenv", ENV_NAME], env={ENV_NAME: "overridden"}, timeout=60)
        assert over.stdout == "overridden\n"
        # env= applies to that one command only
        assert sandbox.exec(["printenv", ENV_NAME], timeout=60).stdout == f"{ENV_VALUE}\n"
        assert sandbox.exec(["printenv", "SEER_CONFORMANCE_FOO"], timeout=60).exit_code != 0

    def test_exec_cwd(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.write_file(f"{scratch}/where/here.txt", "marker")
        # the default cwd is the workdir
        assert sandbox.exec(f"cat {scratch}/where/here.txt", timeout=60).stdout == "marker"
        assert sandbox.exec("cat here.txt", cwd=f"{scratch}/where", timeout=60).stdout == "marker"
        absolute = sandbox.machine.resolve(f"{scratch}/where")
        assert sandbox.exec(["cat", "here.txt"], cwd=absolute, timeout=60).stdout == "marker"

    def test_exec_stdin(self, sandbox: Sandbox) -> None:
        machine = sandbox.machine
        assert machine.exec(["cat"], stdin=b"line1\nline2\n", timeout=60).stdout == "line1\nline2\n"
        data = bytes(range(256)) * 4096 + os.urandom(3 * 1024 * 1024)
        digest = "import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"
        result = machine.exec([machine.python, "-c", digest], stdin=data, timeout=120)
        assert result.stdout.strip() == hashlib.sha256(data).hexdigest(), result.stderr
        # without stdin, a command reading it sees end-of-file at once rather than hanging
        assert machine.exec(["cat"], timeout=30).stdout == ""

    def test_exec_streams_output(self, sandbox: Sandbox) -> None:
        seen: list[tuple[float, str, str]] = []
        started = time.monotonic()
        result = sandbox.exec(
            "echo first; sleep 1; echo second; echo err >&2; sleep 0.5; echo third",
            on_output=lambda stream, text: seen.append((time.monotonic(), stream, text)),
            timeout=60,
        )
        elapsed = time.monotonic() - started
        assert result.stdout == "first\nsecond\nthird\n"
        assert "".join(t for _, s, t in seen if s == "stdout") == result.stdout
        assert "".join(t for _, s, t in seen if s == "stderr") == result.stderr == "err\n"
        first = next(at for at, _, text in seen if "first" in text)
        assert first - started < elapsed - 0.75, "on_output saw nothing until the command ended"

    def test_exec_check_raises(self, sandbox: Sandbox) -> None:
        with pytest.raises(ExecError) as info:
            sandbox.exec("echo out; echo oops >&2; exit 4", check=True, timeout=60)
        err = info.value
        assert err.exit_code == 4
        assert err.stdout == "out\n" and err.stderr == "oops\n"
        assert "exit 4" in err.command
        assert sandbox.exec("echo fine", check=True, timeout=60).stdout == "fine\n"
        with pytest.raises(ExecError):
            sandbox.exec(["false"], timeout=60).check()

    def test_exec_timeout_kills_command_and_children(self, sandbox: Sandbox) -> None:
        token = _token()
        py = shlex.quote(sandbox.machine.python)
        command = (
            f"echo partial-out; echo partial-err >&2; "
            f"{py} -c 'import time; time.sleep(600)' {token} & sleep 600; wait"
        )
        started = time.monotonic()
        with pytest.raises(ExecTimeoutError) as info:
            sandbox.exec(command, timeout=2)
        elapsed = time.monotonic() - started
        err = info.value
        assert isinstance(err, TimeoutError)
        assert err.timeout == 2
        assert "partial-out" in err.stdout
        assert "partial-err" in err.stderr
        assert elapsed < 30, f"the timeout of 2s took {elapsed:.1f}s to fire"
        wait_for(
            lambda: not self.live_in_sandbox(sandbox, token),
            timeout=15,
            what="the timed-out command's child to be killed",
        )
        assert sandbox.exec("echo still-usable", timeout=60).stdout == "still-usable\n"

    def test_exec_argv_timeout(self, sandbox: Sandbox) -> None:
        with pytest.raises(ExecTimeoutError):
            sandbox.exec(["sleep", "60"], timeout=1)

    def test_exec_waits_for_a_command_that_closed_its_output(self, sandbox: Sandbox) -> None:
        # the output ends long before the command does: its exit code (and deadline) still count
        result = sandbox.exec("echo early; exec >&- 2>&-; sleep 3; exit 5", timeout=60)
        assert (result.stdout, result.exit_code) == ("early\n", 5)
        with pytest.raises(ExecTimeoutError) as info:
            sandbox.exec("echo early; exec >&- 2>&-; sleep 60", timeout=2)
        assert info.value.stdout == "early\n"

    def test_exec_on_output_error_stops_the_command(self, sandbox: Sandbox) -> None:
        token = _token()
        py = shlex.quote(sandbox.machine.python)

        class Enough(Exception):
            pass

        def on_output(stream: str, text: str) -> None:
            if "started" in text:
                raise Enough

        started = time.monotonic()
        with pytest.raises(Enough):
            sandbox.machine.exec(
                f"echo started; {py} -c 'import time; time.sleep(600)' {token}",
                on_output=on_output,
                timeout=20,
            )
        assert time.monotonic() - started < 15, "exec went on after on_output raised"
        wait_for(
            lambda: not self.live_in_sandbox(sandbox, token),
            timeout=15,
            what="the command whose on_output raised to be killed",
        )

    def test_exec_timeout_spares_background_processes(self, sandbox: Sandbox) -> None:
        machine = sandbox.machine
        token = _token()
        name = f"survivor-{token}"
        machine.start_process([machine.python, "-c", "import time; time.sleep(600)", token], name=name)
        try:
            with pytest.raises(ExecTimeoutError):
                machine.exec(["sleep", "60"], timeout=1)
            # a background process outlives the exec that started it and the timeout of another
            assert machine.process_running(name)
            assert self.live_in_sandbox(sandbox, token)
            assert machine.status() is MachineStatus.RUNNING
            assert sandbox.exec("echo still-usable", timeout=60).stdout == "still-usable\n"
        finally:
            machine.stop_process(name, grace=2)
        assert not machine.process_running(name)
        assert name in machine.log_names()

    # === exec_python ============================================================================
    def test_exec_python(self, sandbox: Sandbox) -> None:
        code = f"import os, sys\nprint(os.environ[{ENV_NAME!r}])\nprint('to-stderr', file=sys.stderr)\n"
        result = sandbox.exec_python(code, timeout=60)
        assert (result.stdout, result.stderr, result.exit_code) == (f"{ENV_VALUE}\n", "to-stderr\n", 0)
        assert sandbox.exec_python("raise SystemExit(5)", timeout=60).exit_code == 5
        crash = sandbox.exec_python("1 / 0", timeout=60)
        assert crash.exit_code == 1 and "ZeroDivisionError" in crash.stderr
        with pytest.raises(ExecError):
            sandbox.exec_python("raise SystemExit(2)", check=True, timeout=60)

    def test_exec_python_large_source(self, sandbox: Sandbox) -> None:
        code = "x = '" + "a" * 1_000_000 + "'\nprint(len(x))\n"
        assert sandbox.exec_python(code, timeout=120).stdout == "1000000\n"

    def test_exec_python_timeout(self, sandbox: Sandbox) -> None:
        with pytest.raises(ExecTimeoutError):
            sandbox.exec_python("import time; time.sleep(60)", timeout=1)

    def test_python_has_seer_runtime(self, sandbox: Sandbox) -> None:
        import seer

        result = sandbox.exec_python("import seer; print(seer.__version__)", timeout=120)
        assert result.stdout.strip() == seer.__version__, result.output

    # === files ==================================================================================
    def test_awkward_paths(self, sandbox: Sandbox, scratch: str, tmp_path: Path) -> None:
        awkward = f'{scratch}/with space/it\'s "ü" $x;'
        sandbox.write_file(f"{awkward}/file name.txt", "awkward")
        assert sandbox.read_file(f"{awkward}/file name.txt") == "awkward"
        assert sandbox.exec(["cat", "file name.txt"], cwd=awkward, timeout=60).stdout == "awkward"
        sandbox.ensure_dir(f"{awkward}/made dir")
        assert sandbox.exec(["test", "-d", f"{awkward}/made dir"], timeout=60).exit_code == 0
        src = tmp_path / "a dir"
        src.mkdir()
        (src / "in it.txt").write_text("inside")
        sandbox.upload_dir(src, f"{awkward}/up loaded")
        assert sandbox.read_file(f"{awkward}/up loaded/in it.txt") == "inside"
        sandbox.download_dir(f"{awkward}/up loaded", tmp_path / "back again")
        assert (tmp_path / "back again" / "in it.txt").read_text() == "inside"

    def test_text_round_trip(self, sandbox: Sandbox, scratch: str) -> None:
        text = "héllo wörld ✓\nsecond line\n"
        sandbox.write_file(f"{scratch}/hello.txt", text)
        assert sandbox.read_file(f"{scratch}/hello.txt") == text
        assert sandbox.exec(["cat", f"{scratch}/hello.txt"], timeout=60).stdout == text

    def test_overwrite_truncates(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.write_file(f"{scratch}/f.txt", "a much longer first version")
        sandbox.write_file(f"{scratch}/f.txt", "short")
        assert sandbox.read_file(f"{scratch}/f.txt") == "short"

    def test_binary_every_byte(self, sandbox: Sandbox, scratch: str) -> None:
        data = bytes(range(256)) * 64 + b"\r\n\x00\r"
        sandbox.write_file(f"{scratch}/all.bin", data)
        assert sandbox.read_bytes(f"{scratch}/all.bin") == data
        check = (
            f"import hashlib; print(hashlib.sha256(open({f'{scratch}/all.bin'!r}, 'rb').read()).hexdigest())"
        )
        assert sandbox.exec_python(check, timeout=60).stdout.strip() == hashlib.sha256(data).hexdigest()

    def test_large_file(self, sandbox: Sandbox, scratch: str) -> None:
        data = os.urandom(self.large_file_size)
        path = f"{scratch}/large.bin"
        sandbox.write_file(path, data)
        code = (
            f"import hashlib, os\np = {path!r}\n"
            "print(os.path.getsize(p), hashlib.sha256(open(p, 'rb').read()).hexdigest())"
        )
        assert sandbox.exec_python(code, timeout=300).stdout.split() == [
            str(len(data)),
            hashlib.sha256(data).hexdigest(),
        ]
        assert sandbox.read_bytes(path) == data

    def test_write_creates_parents(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.write_file(f"{scratch}/a/b/c/d.txt", "deep")
        assert sandbox.exec(["test", "-d", f"{scratch}/a/b/c"], timeout=60).exit_code == 0
        assert sandbox.read_file(f"{scratch}/a/b/c/d.txt") == "deep"

    def test_relative_paths_resolve_against_workdir(self, sandbox: Sandbox, scratch: str) -> None:
        workdir = sandbox.workdir
        assert workdir.startswith("/")
        sandbox.write_file(f"{scratch}/rel.txt", "relative")
        absolute = f"{workdir.rstrip('/')}/{scratch}/rel.txt"
        assert sandbox.machine.resolve(f"{scratch}/rel.txt") == absolute
        assert sandbox.read_file(absolute) == "relative"
        assert sandbox.exec(["cat", absolute], timeout=60).stdout == "relative"
        sandbox.write_file(f"{workdir.rstrip('/')}/{scratch}/abs.txt", "absolute")
        assert sandbox.read_file(f"{scratch}/abs.txt") == "absolute"

    def test_write_mode(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.machine.write_bytes(f"{scratch}/private.txt", b"p", mode=0o600)
        sandbox.machine.write_bytes(f"{scratch}/tool.sh", b"#!/bin/sh\necho tool-ran\n", mode=0o755)
        code = f"import os; print(oct(os.stat({f'{scratch}/private.txt'!r}).st_mode & 0o777))"
        assert sandbox.exec_python(code, timeout=60).stdout == "0o600\n"
        tool = sandbox.machine.resolve(f"{scratch}/tool.sh")
        assert sandbox.exec([tool], timeout=60).stdout == "tool-ran\n"

    def test_read_missing_file(self, sandbox: Sandbox, scratch: str) -> None:
        with pytest.raises(FileNotFoundError):
            sandbox.read_file(f"{scratch}/missing.txt")
        with pytest.raises(FileNotFoundError):
            sandbox.read_bytes(sandbox.machine.resolve(f"{scratch}/nowhere/missing.bin"))

    def test_upload_file(self, sandbox: Sandbox, scratch: str, tmp_path: Path) -> None:
        tool = tmp_path / f"tool-{secrets.token_hex(3)}.sh"
        tool.write_text("#!/bin/sh\necho uploaded-tool\n")
        tool.chmod(0o755)
        remote = sandbox.upload_file(tool, f"{scratch}/bin/tool.sh")
        assert remote == sandbox.machine.resolve(f"{scratch}/bin/tool.sh")
        assert sandbox.exec([remote], timeout=60).stdout == "uploaded-tool\n"
        default = sandbox.upload_file(tool)
        assert default == sandbox.machine.resolve(tool.name)
        assert sandbox.read_file(tool.name) == tool.read_text()
        sandbox.exec(["rm", "-f", default], timeout=60)
        with pytest.raises(FileNotFoundError):
            sandbox.upload_file(tmp_path / "absent.txt")

    def test_upload_and_download_dir(self, sandbox: Sandbox, scratch: str, tmp_path: Path) -> None:
        src = tmp_path / "src"
        (src / "a" / "b").mkdir(parents=True)
        (src / "empty").mkdir()
        (src / "top.txt").write_text("top\n")
        (src / "a" / "b" / "deep.bin").write_bytes(bytes(range(256)))
        (src / "a" / "run.sh").write_text("#!/bin/sh\necho dir-tool\n")
        (src / "a" / "run.sh").chmod(0o755)
        remote = sandbox.upload_dir(src, f"{scratch}/up")
        assert remote == sandbox.machine.resolve(f"{scratch}/up")
        listing = sandbox.exec(f"cd {shlex.quote(remote)} && find . | sort", timeout=60).stdout.split()
        assert listing == [".", "./a", "./a/b", "./a/b/deep.bin", "./a/run.sh", "./empty", "./top.txt"]
        assert sandbox.read_bytes(f"{scratch}/up/a/b/deep.bin") == bytes(range(256))
        assert sandbox.exec([f"{remote}/a/run.sh"], timeout=60).stdout == "dir-tool\n"
        out = sandbox.download_dir(f"{scratch}/up", tmp_path / "out")
        assert out == tmp_path / "out"
        assert _tree(out) == _tree(src)
        assert os.access(out / "a" / "run.sh", os.X_OK)

    def test_upload_dir_default_destination(self, sandbox: Sandbox, tmp_path: Path) -> None:
        src = tmp_path / f"updir-{secrets.token_hex(3)}"
        src.mkdir()
        (src / "f.txt").write_text("f")
        remote = sandbox.upload_dir(src)
        assert remote == sandbox.machine.resolve(src.name)
        assert sandbox.read_file(f"{src.name}/f.txt") == "f"
        sandbox.exec(["rm", "-rf", remote], timeout=60)

    def test_download_dir_made_in_sandbox(self, sandbox: Sandbox, scratch: str, tmp_path: Path) -> None:
        sandbox.exec(f"mkdir -p {scratch}/made/x && printf data > {scratch}/made/x/f.txt", timeout=60)
        sandbox.download_dir(f"{scratch}/made", tmp_path / "made")
        assert _tree(tmp_path / "made") == {"x": None, "x/f.txt": b"data"}

    def test_ensure_dir(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.ensure_dir(f"{scratch}/e/f/g")
        sandbox.ensure_dir(f"{scratch}/e/f/g")
        assert sandbox.exec(["test", "-d", f"{scratch}/e/f/g"], timeout=60).exit_code == 0
        absolute = sandbox.machine.resolve(f"{scratch}/abs/dir")
        sandbox.ensure_dir(absolute)
        assert sandbox.exec(["test", "-d", absolute], timeout=60).exit_code == 0

    # === background processes ====================================================================
    def test_background_process(self, sandbox: Sandbox, scratch: str) -> None:
        machine = sandbox.machine
        token = _token()
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
        token = _token()
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
        token = _token()
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
        wait_for(lambda: not _answers(f"{url}/ping.txt"), timeout=15, what="the server to stop answering")

    # === failure clean-up ========================================================================
    def test_failed_start_cleans_up(self, provider: Provider, start_sandbox: Callable[..., Sandbox]) -> None:
        before = _alive_ids(provider)
        missing_repo = f"file:///nonexistent/seer-conformance-{secrets.token_hex(4)}.git"
        with pytest.raises(SandboxStartError) as info:
            start_sandbox(name="conformance-fail", repos=[missing_repo])
        err = info.value
        assert err.step == "repos"
        assert "repos" in str(err)
        assert err.sandbox_id, "the failure came after provisioning, so a machine was made"
        after = _alive_ids(provider)
        assert err.sandbox_id not in after
        assert after <= before, f"a failed start left machines running: {sorted(after - before)}"

    # === capability: snapshots ===================================================================
    def test_snapshot_restores_files(
        self, provider: Provider, capabilities: Capabilities, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        if not capabilities.snapshots:
            pytest.skip("provider lacks capability: snapshots")
        sb = start_sandbox(name="conformance-snap")
        sb.write_file("snap/text.txt", "before")
        sb.write_file("snap/deep/all.bin", bytes(range(256)))
        snaps: list[Snapshot] = []
        try:
            first = sb.snapshot("first")
            snaps.append(first)
            assert (first.provider, first.sandbox_id, first.description) == (
                self.provider_name,
                sb.sandbox_id,
                "first",
            )
            as_json = json.loads(json.dumps(first.to_dict()))
            assert Snapshot.from_dict(as_json) == first
            sb.write_file("snap/text.txt", "after")
            second = sb.terminate(save_snapshot=True, snapshot_description="second")
            assert isinstance(second, Snapshot)
            snaps.append(second)
            assert sb.status is MachineStatus.TERMINATED

            restored = start_sandbox(name="conformance-restored", snapshot=as_json)
            assert restored.sandbox_id != sb.sandbox_id
            assert restored.status is MachineStatus.RUNNING
            assert restored.read_file("snap/text.txt") == "before"
            assert restored.read_bytes("snap/deep/all.bin") == bytes(range(256))
            assert restored.exec(["cat", "snap/text.txt"], timeout=60).stdout == "before"
            later = start_sandbox(name="conformance-restored-2", snapshot=second)
            assert later.read_file("snap/text.txt") == "after"
        finally:
            for snap in snaps:
                provider.delete_snapshot(snap)

    def test_snapshot_unsupported_raises(self, capabilities: Capabilities, sandbox: Sandbox) -> None:
        if capabilities.snapshots:
            pytest.skip("provider has capability: snapshots (see test_snapshot_restores_files)")
        with pytest.raises(CapabilityError):
            sandbox.snapshot("nope")

    # === capability: GPUs ========================================================================
    def test_gpu(
        self,
        provider: Provider,
        capabilities: Capabilities,
        sandbox_config: SandboxConfig,
        start_sandbox: Callable[..., Sandbox],
    ) -> None:
        if not capabilities.gpu_types or capabilities.max_gpu_count < 1:
            pytest.skip("provider lacks capability: gpu_types")
        gpu = self.gpu_type
        if gpu is None:
            for candidate in sorted(capabilities.gpu_types):
                config = self.derive(sandbox_config, gpu=candidate, gpu_count=self.gpu_count)
                if not type(provider).check_config(config):
                    gpu = candidate
                    break
            else:
                pytest.skip(
                    f"none of the provider's GPU types is available here: {sorted(capabilities.gpu_types)}"
                )
        sb = start_sandbox(name="conformance-gpu", gpu=gpu, gpu_count=self.gpu_count)
        result = sb.exec("nvidia-smi --query-gpu=name --format=csv,noheader", timeout=120)
        assert result.exit_code == 0, result.output
        assert len(result.stdout.strip().splitlines()) >= self.gpu_count, result.stdout
