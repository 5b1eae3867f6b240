"""The suite's base: the provider under test, its sandboxes (fixtures), the helpers its tests use,
and the guard that keeps every conformance test run as written (skipped only with a reason)."""

from __future__ import annotations

import inspect
import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import pytest

from seer import plugins
from seer.config import ExecutionMode, SandboxConfig
from seer.providers.base import Capabilities, Provider
from seer.sandbox import Sandbox
from seer.testing.conformance.helpers import (
    CLIENT_ONLY_NAME,
    ENV_NAME,
    ENV_VALUE,
    SECRET_NAME,
    live_processes,
)

#: The package whose classes make up the suite: a test defined in a class from elsewhere in a
#: provider's test class's MRO overrides the suite's.
SUITE_PACKAGE = __name__.rpartition(".")[0]
#: The guard's own test, which no provider may skip.
GUARD_TEST = "test_conformance_tests_run_as_written"


def suite_tests(cls: type) -> set[str]:
    """The names of the conformance tests in ``cls``: ``test_*`` functions the suite's own classes
    define."""
    return {
        name
        for klass in cls.__mro__
        if klass.__module__.startswith(SUITE_PACKAGE + ".")
        for name in vars(klass)
        if name.startswith("test_")
    }


def overridden_tests(cls: type) -> dict[str, str]:
    """Conformance tests that a class of the provider's (``cls`` or a base outside the suite)
    redefines: name -> the class that does. Empty for a class that runs the suite as written."""
    suite = suite_tests(cls)
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith(SUITE_PACKAGE + ".") or klass is object:
            continue
        for name in suite & set(vars(klass)):
            found[name] = klass.__qualname__
    return found


def skip_problems(cls: type) -> list[str]:
    """What is wrong with ``cls.skip_tests``: names that are no conformance test, reasons left
    empty, the guard named."""
    suite = suite_tests(cls)
    problems = []
    for name, reason in getattr(cls, "skip_tests", {}).items():
        if name not in suite:
            problems.append(f"skip_tests names {name!r}, which is no conformance test")
        elif name == GUARD_TEST:
            problems.append(f"skip_tests names {name!r}: the guard cannot be skipped")
        if not isinstance(reason, str) or not reason.strip():
            problems.append(f"skip_tests[{name!r}] gives no reason")
    return problems


class ConformanceBase:
    """The suite's fixtures, helpers and guard; :class:`~seer.testing.ProviderConformance` composes
    it with the mixins of tests, one per area."""

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
    #: Conformance tests this provider's test class cannot run here, each with the reason, which
    #: the skip reports (``{"test_gpu": "the fake's machines have no GPU; the live set runs it"}``).
    #: The only way to leave one out: a class that redefines a conformance test fails the guard.
    skip_tests: ClassVar[Mapping[str, str]] = {}

    # --- the guard ----------------------------------------------------------------------------
    @pytest.fixture(autouse=True)
    def _conformance_guard(self, request: pytest.FixtureRequest) -> None:
        """Before each test: fail a redefined conformance test, skip one named in
        :attr:`skip_tests` with its reason."""
        name = getattr(request.node, "originalname", request.node.name)
        cls = type(self)
        if name in suite_tests(cls) and name in overridden_tests(cls):
            pytest.fail(
                f"{overridden_tests(cls)[name]}.{name} redefines a conformance test; name it in "
                "skip_tests with the reason instead, and put a provider's own checks in tests of "
                "their own names"
            )
        if name in cls.skip_tests and name != GUARD_TEST:
            pytest.skip(cls.skip_tests[name])

    def test_conformance_tests_run_as_written(self) -> None:
        """No conformance test is redefined by the provider's test class (a skip goes through
        :attr:`skip_tests`, with a reason), and every entry of :attr:`skip_tests` names a test."""
        cls = type(self)
        problems = [
            f"{owner}.{name} redefines a conformance test" for name, owner in overridden_tests(cls).items()
        ]
        problems += skip_problems(cls)
        assert not problems, "; ".join(sorted(problems))

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
        """The capabilities the provider's class declares (what the gated tests look at)."""
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
