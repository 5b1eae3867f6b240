"""The exceptions seer raises.

Every error a user can trigger is a :class:`SeerError`, so ``except seer.SeerError`` catches all of
them; each subclass also derives from the builtin it refines (``ValueError``, ``TimeoutError``,
``LookupError``) so generic handlers keep working.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: What install hints append to ``seer[<extra>]``: asking for at least this version keeps pip from
#: taking the unrelated ``seer`` 0.1.1 on the public index instead (tests/test_versions.py checks
#: that this release satisfies it and that one does not).
OUR_VERSIONS = ">=0.2"


class SeerError(Exception):
    """Base class of every error seer raises on purpose."""


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a configuration: where (a dotted field path) and what."""

    field: str
    message: str
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = self.field or "(config)"
        if self.file:
            where = f"{self.file}:{self.line}: {where}" if self.line else f"{self.file}: {where}"
        return f"{where}: {self.message}"


class ConfigError(SeerError, ValueError):
    """A configuration, interface file or argument is invalid.

    Raised before anything is provisioned. ``problems`` lists each field at fault.
    """

    def __init__(self, problems: Sequence[ConfigProblem] | str, *, title: str = "Invalid config"):
        if isinstance(problems, str):
            problems = [ConfigProblem(field="", message=problems)]
        self.problems: list[ConfigProblem] = list(problems)
        self.title = title
        lines = [f"{title}:"] + [f"  {p}" for p in self.problems]
        super().__init__("\n".join(lines) if len(self.problems) > 1 else f"{title}: {self.problems[0]}")

    @property
    def fields(self) -> list[str]:
        """The dotted paths of the fields at fault, in order."""
        return [p.field for p in self.problems]


class MissingSecretError(ConfigError):
    """A secret named in ``SandboxConfig.secrets`` is not set locally (environment or ``.env``)."""


class ModelFetchError(ConfigError):
    """A configured model could not be fetched: the repo does not exist (or is misspelled), it is
    gated and no token with access was given, the revision does not exist, or it is not cached and
    the sandbox is offline. ``problems`` names each model by its field (``models[1].name``)."""

    def __init__(self, problems: Sequence[ConfigProblem] | str, *, title: str = "Could not fetch models"):
        super().__init__(problems, title=title)


class PluginError(SeerError):
    """A plugin could not be loaded or registered."""


class UnknownPluginError(PluginError, LookupError):
    """A provider, expose mode or execution mode name that no installed plugin registers."""

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str | None = None):
        self.kind, self.name, self.known = kind, name, sorted(known)
        msg = f"no {kind} named {name!r}; installed: {', '.join(self.known) or 'none'}"
        if hint:
            msg += f". {hint}"
        super().__init__(msg)


class AgentRunError(SeerError):
    """The agent client of a ``run_agent`` run failed (not a limit, not a cancel): the run's
    ``final`` message says how, and its transcript keeps everything up to it."""


class ProviderUnavailableError(SeerError):
    """A provider is installed but cannot be used here (SDK missing, no credentials, no engine)."""


class SandboxError(SeerError):
    """An operation on a sandbox failed."""


class SandboxNotFoundError(SandboxError, LookupError):
    """No sandbox with this id is known to any provider."""


class InvalidSandboxIdError(ConfigError, SandboxNotFoundError):
    """A sandbox id that is not of any (or the named) provider's exact id format, so it names no
    sandbox. Raised before any file, process or container is looked at: an id is never a path."""


class SandboxNotRunningError(SandboxError):
    """The sandbox was terminated (or timed out) and cannot run anything any more."""


class SandboxStartError(SandboxError):
    """``Sandbox.start()`` failed; everything it had made was torn down.

    ``step`` names the step that failed (``provision``, ``upload``, ``repos``, ...).
    """

    def __init__(self, step: str, reason: str, *, sandbox_id: str | None = None):
        self.step, self.reason, self.sandbox_id = step, reason, sandbox_id
        super().__init__(
            f"sandbox start failed at step {step!r}: {reason}"
            + ("" if sandbox_id is None else f" (sandbox {sandbox_id} was torn down)")
        )


class ExecError(SandboxError):
    """A command run with ``check=True`` exited non-zero."""

    def __init__(self, command: str, exit_code: int, stdout: str, stderr: str):
        self.command, self.exit_code, self.stdout, self.stderr = command, exit_code, stdout, stderr
        tail = (stderr or stdout).strip()[-2000:]
        super().__init__(f"command exited {exit_code}: {command}" + (f"\n{tail}" if tail else ""))


class ExecTimeoutError(SandboxError, TimeoutError):
    """A command ran past its timeout and was killed. Partial output is kept."""

    def __init__(self, command: str, timeout: float, stdout: str = "", stderr: str = ""):
        self.command, self.timeout, self.stdout, self.stderr = command, timeout, stdout, stderr
        super().__init__(f"command timed out after {timeout:g}s and was killed: {command}")


class CapabilityError(SandboxError):
    """The provider does not support what was asked (snapshots, GPUs, volumes, ...)."""


class NotebookError(SeerError):
    """A notebook session (its Jupyter server, kernel or a setup cell) failed."""


class KernelDiedError(NotebookError):
    """The session's kernel died (or was restarted) while a cell ran, or before it.

    ``result`` holds what the cell produced before that. The kernel's state is gone:
    ``session.restart()`` brings it back with the workspace and models set up again.
    """

    def __init__(self, message: str, *, result: object = None):
        self.result = result
        super().__init__(message)


class JupyterServerDiedError(KernelDiedError):
    """The sandbox's Jupyter server does not answer any more: its kernels are gone with it.

    ``session.restart()`` cannot help; start the server again
    (:func:`seer.execution.restart_jupyter`), then ``session.reopen(sandbox)``.
    """


class CellTimeoutError(NotebookError, TimeoutError):
    """A cell ran past its ``timeout``; it was interrupted. ``result`` holds its output so far."""

    def __init__(self, message: str, *, result: object = None):
        self.result = result
        super().__init__(message)


class CellExecutionError(NotebookError):
    """A cell raised (from :meth:`CellResult.raise_for_error`, or a setup cell that failed)."""

    def __init__(self, message: str, *, result: object = None):
        self.result = result
        super().__init__(message)


class InterfaceError(ConfigError):
    """An interface file for :meth:`ScopedSandbox.serve` cannot be served: it does not parse, it
    exposes nothing, or an ``@expose`` function takes what RPC cannot pass (``*args``,
    ``**kwargs``). ``problems`` name the file and line. Raised before anything is uploaded."""

    def __init__(self, problems: Sequence[ConfigProblem] | str, *, title: str = "Invalid interface file"):
        super().__init__(problems, title=title)


class InterfaceLoadError(SandboxError):
    """The RPC server could not load an interface file in the sandbox (its module code raised, or
    the server did not come up). The message carries the server's log tail."""


class RpcError(SeerError):
    """A call over RPC to a served interface failed. ``function`` names the function (None for
    requests that are not calls) and ``status`` the HTTP status (None when there was no answer)."""

    def __init__(self, message: str, *, function: str | None = None, status: int | None = None):
        self.function, self.status = function, status
        super().__init__(message)


class RpcConnectionError(RpcError, ConnectionError):
    """The RPC server could not be reached (the sandbox is gone, or the interface was stopped)."""


class RpcAuthError(RpcError, PermissionError):
    """The RPC server refused the request's token (missing: HTTP 401, wrong: HTTP 403). A client
    of an interface served again since holds the old token: get a new client from the new
    :class:`~seer.rpc.ServedInterface`."""


class UnknownFunctionError(RpcError, LookupError):
    """The interface exposes no function of that name (only ``@expose`` functions are callable)."""


class BadArgumentsError(RpcError, TypeError):
    """The arguments do not fit the function's signature or type hints. ``parameter`` names the
    parameter at fault, when one is."""

    def __init__(
        self,
        message: str,
        *,
        function: str | None = None,
        status: int | None = None,
        parameter: str | None = None,
    ):
        self.parameter = parameter
        super().__init__(message, function=function, status=status)


class RpcTimeoutError(RpcError, TimeoutError):
    """The call ran past its timeout. The server answered without waiting further, but the
    function's thread cannot be killed and may still be running in the sandbox."""


class RequestTooLargeError(RpcError, ValueError):
    """The request (the serialized arguments) is larger than the server accepts (HTTP 413)."""


class SerializationError(RpcError, TypeError):
    """A value cannot cross the wire: an argument or result of a type the wire format does not
    carry (the message names the type and where it is), or a malformed message."""


class RemoteError(RpcError):
    """The exposed function raised in the sandbox. ``remote_type`` is the exception's type
    (``ValueError``, ``torch.OutOfMemoryError``), ``message`` its text and ``traceback`` the
    remote traceback, as text."""

    def __init__(
        self,
        remote_type: str,
        message: str,
        traceback: str = "",
        *,
        function: str | None = None,
        status: int | None = None,
    ):
        self.remote_type, self.message, self.traceback = remote_type, message, traceback
        where = f" in {function}()" if function else ""
        text = f"{remote_type}{where}: {message}" if message else f"{remote_type}{where}"
        if traceback.strip():
            text += f"\n\nRemote traceback:\n{traceback.rstrip()}"
        super().__init__(text, function=function, status=status)


class MissingExtraError(SeerError, ImportError):
    """A package seer needs for what was asked is not installed; the message names it and the
    extra of seer that brings it (``pip install "seer[notebook]>=0.2"``), instead of Python's
    bare ``No module named 'websocket'``. An ``ImportError``, so generic handlers keep working."""

    def __init__(self, package: str, extra: str, purpose: str, *, module: str | None = None):
        self.package, self.extra, self.purpose = package, extra, purpose
        super().__init__(
            f"{purpose} needs {package}, which is not installed here. Install seer's {extra!r} extra: "
            f'pip install "seer[{extra}]{OUR_VERSIONS}" '
            f'(a package of your own depends on "seer-core[{extra}]")',
            name=module,
        )
