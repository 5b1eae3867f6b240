"""``ScopedSandbox``: a sandbox that serves interface files over RPC instead of running a notebook.

::

    from seer import ScopedSandbox, SandboxConfig, ModelConfig

    scoped = ScopedSandbox(SandboxConfig(gpu="A100", models=[ModelConfig(name="google/gemma-2-9b")]))
    scoped.start()
    library = scoped.serve("interface.py", expose_as="library", name="tools")
    ...
    scoped.terminate()

The interface file is ordinary Python whose module-level ``@expose`` functions are served (see
:mod:`seer.runtime.interface` for what it finds injected). :meth:`ScopedSandbox.serve` checks
the file here first, so a bad file fails before anything is uploaded, then starts the RPC server
(:mod:`seer.runtime.rpc_server`) in the sandbox, describes it as a
:class:`~seer.rpc.ServedInterface` and hands that to the expose mode (``library``, ``mcp``,
``prompt``, ``skill``, or a plugin's), returning what the mode makes of it.

Where things live in the sandbox: every interface and every file given to :meth:`upload_file`
(without a destination) sits in one folder, :attr:`ScopedSandbox.interfaces_dir`
(``<workdir>/.seer/interfaces``): an interface served as ``tools`` is ``tools.py`` there, and
that folder is both the server's working directory and first on its ``sys.path``, so uploaded
helpers import and open by relative path. A workspace given to :meth:`ScopedSandbox.start` is
installed under ``<workdir>/.seer/workspace`` and its libraries are importable by every interface
(its ``custom_init_code`` is for notebook sessions and is not run here).
"""

from __future__ import annotations

import contextlib
import json
import keyword
import os
import posixpath
import re
import secrets
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seer import plugins
from seer.config import ExecutionMode, SandboxConfig
from seer.errors import (
    ConfigError,
    ConfigProblem,
    InterfaceError,
    InterfaceLoadError,
    RpcError,
    SandboxError,
    SandboxStartError,
    SeerError,
)
from seer.progress import Progress
from seer.providers.base import Machine
from seer.rpc.client import RpcClient, ServedInterface
from seer.rpc.spec import FunctionSpec, inspect_interface
from seer.sandbox import Sandbox
from seer.sandbox.model_cache import models_key
from seer.sandbox.record import SandboxRecord
from seer.workspace import Workspace

__all__ = ["INTERFACES_DIR", "ScopedSandbox"]

#: The folder (relative to the working directory) holding interfaces and uploaded files.
INTERFACES_DIR = ".seer/interfaces"
#: Where the RPC servers write their state (port, status), one JSON file per interface.
RPC_STATE_DIR = ".seer/rpc"
#: Where a workspace given to ``start()`` is installed.
WORKSPACE_ROOT = ".seer/workspace"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def _process_name(name: str) -> str:
    return f"rpc-{name}"


class ScopedSandbox(Sandbox):
    """A sandbox whose GPU work is reached through functions served over RPC.

    It always runs in the ``local`` execution mode: no Jupyter server is started, whatever the
    config's ``execution_mode`` says (a config asking for another mode gets a warning, and a copy
    with ``execution_mode="local"`` is used).
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        progress: Progress | None = None,
        record: SandboxRecord | None = None,
        machine: Machine | None = None,
    ):
        if record is not None:  # rebuilt from its record (attach): its config is what ran
            super().__init__(config, progress=progress, record=record, machine=machine)
            return
        config = config if config is not None else SandboxConfig()
        if config.execution_mode is not ExecutionMode.LOCAL:
            if "execution_mode" in config.model_fields_set:
                warnings.warn(
                    f"ScopedSandbox serves interfaces and starts no {str(config.execution_mode)!r} "
                    "environment: execution_mode is taken as 'local'",
                    stacklevel=2,
                )
            config = config.model_copy(update={"execution_mode": ExecutionMode.LOCAL})
        super().__init__(config, progress=progress, machine=machine)

    # --- lifecycle ------------------------------------------------------------------------
    def start(  # type: ignore[override]
        self, workspace: Workspace | str | None = None, name: str | None = None
    ) -> ScopedSandbox:
        """Provision and bootstrap the sandbox (as :meth:`Sandbox.start`), then install
        ``workspace``, whose libraries every served interface can import. Returns self.

        ``start("name")`` is taken as ``start(name="name")``.
        """
        if isinstance(workspace, str) and name is None:
            workspace, name = None, workspace
        if workspace is not None and not isinstance(workspace, Workspace):
            raise ConfigError(f"workspace: expected a seer.Workspace, got {type(workspace).__name__}")
        super().start(name=name)
        if workspace is not None:
            progress = self._progress or Progress()
            try:
                with progress.step("Installing the workspace"):
                    installed = workspace.install(self, root=WORKSPACE_ROOT)
                self.set_service(
                    "rpc_workspace", {"libs_dir": installed.libs_dir, "skills_dir": installed.skills_dir}
                )
            except BaseException as exc:
                sandbox_id = self._machine.id if self._machine else None
                self._abort(self._provider_handle())
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                reason = str(exc) if isinstance(exc, SeerError) else f"{type(exc).__name__}: {exc}"
                raise SandboxStartError("workspace", reason, sandbox_id=sandbox_id) from exc
        return self

    def __enter__(self) -> ScopedSandbox:
        if self._machine is None:
            self.start()
        return self

    # --- where things are -----------------------------------------------------------------
    @property
    def interfaces_dir(self) -> str:
        """The folder in the sandbox holding the interfaces and the files uploaded beside them."""
        return self.machine.resolve(INTERFACES_DIR)

    @property
    def served(self) -> dict[str, ServedInterface]:
        """The interfaces served from this sandbox, by name (also after ``attach``)."""
        return {name: ServedInterface.from_dict(d) for name, d in self._services.get("rpc", {}).items()}

    # --- serving --------------------------------------------------------------------------
    def serve(
        self,
        file_path: str | os.PathLike[str],
        expose_as: str | Sequence[str] | None = "library",
        name: str | None = None,
        *,
        start_timeout: float = 900.0,
        call_timeout: float | None = None,
        max_request_bytes: int | None = None,
    ) -> Any:
        """Serve the ``@expose`` functions of the interface file ``file_path`` and return what
        the expose mode ``expose_as`` makes of them (``expose_as=None``: the
        :class:`~seer.rpc.ServedInterface` itself). A list of modes (``["library", "mcp"]``)
        returns ``{mode: what it makes}``: every exposure of one serve shares its server and
        token, so all are valid together (``ServedInterface.expose(mode)`` adds one later).

        The file is checked here first (syntax, at least one exposed function, no ``*args`` /
        ``**kwargs``): a bad file raises :class:`~seer.errors.InterfaceError` naming file and
        line before anything is uploaded, and so does a name that would shadow a module
        installed in the sandbox. ``name`` (default: the file's stem) names the interface;
        serving a name again (after an edit) stops its server first and starts a new one with a
        new token, so no client keeps talking to the old code: every handle made from the
        earlier serve ends (a warning says so; the old handles' calls are refused).

        ``start_timeout`` bounds the wait for the file's module code (model loading) to finish;
        ``call_timeout`` caps every call's run time on the server (clients ask for their own,
        300 s by default); ``max_request_bytes`` is the largest request accepted (512 MiB).
        Raises :class:`~seer.errors.InterfaceLoadError` with the server's log when the module
        raises or the server does not come up.
        """
        local = Path(file_path).expanduser()
        if not local.is_file():
            what = "is a directory" if local.is_dir() else "does not exist"
            raise InterfaceError([ConfigProblem("file_path", f"{str(local)!r} {what}")])
        source = local.read_bytes()
        info = inspect_interface(source, str(local))
        modes = _expose_modes(expose_as)
        iface = _interface_name(name, local)
        problems = []
        if not (isinstance(start_timeout, int | float) and start_timeout > 0):
            problems.append(
                ConfigProblem("start_timeout", f"must be a positive number, got {start_timeout!r}")
            )
        if call_timeout is not None and not (isinstance(call_timeout, int | float) and call_timeout > 0):
            problems.append(ConfigProblem("call_timeout", f"must be a positive number, got {call_timeout!r}"))
        if max_request_bytes is not None and not (
            isinstance(max_request_bytes, int) and max_request_bytes > 0
        ):
            problems.append(
                ConfigProblem("max_request_bytes", f"must be a positive int, got {max_request_bytes!r}")
            )
        if problems:
            raise ConfigError(problems, title="Invalid serve() arguments")
        if iface in self._uploaded_modules():
            raise ConfigError(
                f"name: {iface!r} is the name of a module uploaded beside the interfaces "
                f"({iface}.py); serve the interface under another name"
            )
        self._check_unshadowed(iface)
        if iface in self._services.get("rpc", {}):
            warnings.warn(
                f"interface {iface!r} is served again: the handles made from its earlier serve() "
                "(library, MCP config, prompt, skill, clients) end now, their token refused; use "
                "what this serve() returns",
                stacklevel=2,
            )
        progress = self._progress or Progress()
        try:
            with progress.step(f"Serving {local.name} as {iface!r}"):
                served, port = self._launch(
                    iface, local, source, info.doc, start_timeout, call_timeout, max_request_bytes
                )
        except BaseException:
            # An earlier server of this name was stopped: it is no longer served.
            if iface in self._services.get("rpc", {}):
                remaining = {k: v for k, v in self._services["rpc"].items() if k != iface}
                self.set_service("rpc", remaining)
            raise
        record = {**served.to_dict(), "port": port}
        self.set_service("rpc", {**self._services.get("rpc", {}), iface: record})
        if expose_as is None:
            return served
        if isinstance(expose_as, str):
            return served.expose(expose_as)
        return {mode: served.expose(mode) for mode in modes}

    def _check_unshadowed(self, name: str) -> None:
        """Refuse an interface name that is also a module importable in the sandbox (``numpy``):
        the served ``<name>.py`` sits first on every interface's path and would replace it."""
        libs = self._services.get("rpc_workspace", {}).get("libs_dir")
        result = self.machine.exec(
            [self.machine.python, "-P", "-c", _FIND_MODULE, name, *([libs] if libs else [])], timeout=120
        )
        if not result.ok:
            raise SandboxError(
                f"cannot check the interface name {name!r} in the sandbox: {result.output.strip()[-500:]}"
            )
        origin = result.stdout.strip()
        if origin:
            raise ConfigError(
                [
                    ConfigProblem(
                        "name", f"{name!r} would shadow the module {name!r} in the sandbox ({origin})"
                    )
                ],
                title="Invalid interface name",
            )

    def _launch(
        self,
        name: str,
        local: Path,
        source: bytes,
        doc: str,
        start_timeout: float,
        call_timeout: float | None,
        max_request_bytes: int | None,
    ) -> tuple[ServedInterface, int]:
        machine = self.machine
        proc = _process_name(name)
        remote_file = posixpath.join(self.interfaces_dir, f"{name}.py")
        state_file = machine.resolve(posixpath.join(RPC_STATE_DIR, f"{name}.json"))
        # Serving a name again reuses its port, so a client of the old server reaches the new
        # one and is refused for its old token instead of finding nothing (or someone else).
        old = self._services.get("rpc", {}).get(name)
        port = int(old.get("port", 0)) if old else 0
        token_file = machine.resolve(posixpath.join(RPC_STATE_DIR, f"{name}.token"))
        if machine.process_running(proc):
            machine.stop_process(proc)
        token = secrets.token_urlsafe(32)
        launch = secrets.token_hex(8)
        argv = [
            machine.python,
            "-P",  # the interfaces folder (the working directory) must not shadow seer's imports
            "-m",
            "seer.runtime.rpc_server",
            remote_file,
            "--name",
            name,
            "--token-file",
            token_file,
            "--state",
            state_file,
            "--launch",
            launch,
            "--port",
            str(port),
        ]
        libs = self._services.get("rpc_workspace", {}).get("libs_dir")
        if libs:
            argv += ["--path", libs]
        if call_timeout is not None:
            argv += ["--call-timeout", f"{float(call_timeout):g}"]
        if max_request_bytes is not None:
            argv += ["--max-request-bytes", str(max_request_bytes)]
        # The interface is the user's code: it may find a hidden model by its name (the models
        # key); the agent reaches it only through the functions it exposes.
        key = models_key(self.services)
        key_file = machine.resolve(posixpath.join(RPC_STATE_DIR, f"{name}.models-key"))
        if key:
            argv += ["--models-key-file", key_file]
        try:
            self.write_file(remote_file, source)
            # The token goes through a file private to the user that the server deletes once
            # read: in its environment, /proc/<pid>/environ would show it as long as it runs.
            machine.write_bytes(token_file, token.encode(), mode=0o600)
            if key:  # the same way, for the same reason
                machine.write_bytes(key_file, key.encode(), mode=0o600)
            env = {"PYTHONUNBUFFERED": "1"}
            self.start_process(argv, name=proc, env=env, cwd=self.interfaces_dir)
            state = self._wait_ready(name, state_file, launch, start_timeout)
            url = machine.expose_port(int(state["port"]))
            functions = self._functions(name, url, token)
        except BaseException:
            # Nothing of a failed serve stays: a <name>.py left in the interfaces folder would be
            # imported by every later interface in place of the module of that name.
            machine.stop_process(proc)
            with contextlib.suppress(SeerError, OSError):
                machine.exec(["rm", "-f", remote_file, token_file, key_file], timeout=60)
            raise
        return ServedInterface(
            name=name,
            file=str(local.resolve()),
            url=url,
            token=token,
            functions=functions,
            doc=doc,
            remote_file=remote_file,
            sandbox_id=machine.id,
        ), int(state["port"])

    def _wait_ready(self, name: str, state_file: str, launch: str, timeout: float) -> dict[str, Any]:
        machine = self.machine
        proc = _process_name(name)
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            state: dict[str, Any] | None = None
            try:
                data = json.loads(machine.read_bytes(state_file))
                if isinstance(data, dict) and data.get("launch") == launch:
                    state = data
            except (OSError, ValueError, SandboxError):
                state = None
            if state is not None and state.get("status") == "ready":
                return state
            if state is not None and state.get("status") == "failed":
                detail = str(state.get("traceback", "")).rstrip()
                raise InterfaceLoadError(f"interface {name!r} failed to load in the sandbox:\n{detail}")
            if not machine.process_running(proc):
                # It may have written "failed" just before exiting.
                try:
                    data = json.loads(machine.read_bytes(state_file))
                except (OSError, ValueError, SandboxError):
                    data = None
                if isinstance(data, dict) and data.get("launch") == launch and data.get("status") == "failed":
                    continue
                raise InterfaceLoadError(
                    f"the RPC server for interface {name!r} exited before it was ready\n"
                    f"--- {proc} log (tail) ---\n{self._log_tail(name)}"
                )
            if time.monotonic() >= deadline:
                raise InterfaceLoadError(
                    f"interface {name!r} was not ready within {timeout:g}s (is its module code still "
                    f"running?); pass a larger start_timeout\n"
                    f"--- {proc} log (tail) ---\n{self._log_tail(name)}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)

    def _functions(self, name: str, url: str, token: str) -> list[FunctionSpec]:
        """The served functions, from the server (through the exposed URL, so it is checked)."""
        deadline = time.monotonic() + 30.0
        with RpcClient(url, token, timeout=30.0) as client:
            while True:
                try:
                    return client.functions()
                except RpcError as exc:
                    if time.monotonic() >= deadline:
                        raise InterfaceLoadError(
                            f"the RPC server for interface {name!r} runs, but {url} does not answer: {exc}"
                        ) from None
                time.sleep(0.2)

    # --- files and logs -------------------------------------------------------------------
    def upload_file(self, local_path: str | os.PathLike[str], remote_path: str | None = None) -> str:
        """Copy a local file into the sandbox. Without ``remote_path`` it lands in
        :attr:`interfaces_dir`, beside the interfaces, which import it (``import helper``) or open
        it by relative path. Returns the path in the sandbox."""
        if remote_path is None:
            file_name = Path(local_path).name
            taken = {f"{n}.py" for n in self._services.get("rpc", {})}
            if file_name in taken:
                raise ConfigError(
                    f"local_path: {file_name!r} would replace the served interface {file_name[:-3]!r}; "
                    "rename the file"
                )
            remote_path = posixpath.join(INTERFACES_DIR, file_name)
            result = super().upload_file(local_path, remote_path)
            if file_name.endswith(".py"):
                self.set_service("rpc_files", sorted({*self._services.get("rpc_files", []), file_name}))
            return result
        return super().upload_file(local_path, remote_path)

    def upload_dir(self, local_dir: str | os.PathLike[str], remote_dir: str | None = None) -> str:
        """Copy a local directory into the sandbox; without ``remote_dir``, into
        :attr:`interfaces_dir` (so a package in it imports). Returns the path in the sandbox."""
        if remote_dir is None:
            remote_dir = posixpath.join(INTERFACES_DIR, Path(local_dir).name)
        return super().upload_dir(local_dir, remote_dir)

    def _uploaded_modules(self) -> set[str]:
        return {f[:-3] for f in self._services.get("rpc_files", [])}

    def rpc_logs(self, name: str | None = None, lines: int | None = 100) -> str:
        """The last ``lines`` of the RPC server logs (of interface ``name``, or all of them)."""
        names = [name] if name is not None else sorted(self._services.get("rpc", {}))
        if name is not None and name not in self._services.get("rpc", {}):
            raise ConfigError(
                f"name: no interface {name!r} is served here; served: {', '.join(self.served) or 'none'}"
            )
        sections = []
        for n in names:
            sections.append(f"=== RPC server {n!r} ({_process_name(n)}) ===\n{self._log_tail(n, lines)}")
        return "\n\n".join(sections) if sections else "(no interface is served)"

    def show_rpc_logs(self, lines: int = 100, name: str | None = None) -> None:
        """Print the last ``lines`` of the RPC server logs (of interface ``name``, or all)."""
        print(self.rpc_logs(name, lines))

    def _log_tail(self, name: str, lines: int | None = 40) -> str:
        try:
            return self.process_log(_process_name(name), lines=lines) or "(empty)"
        except (OSError, SeerError):
            return "(no log)"

    def __repr__(self) -> str:
        state = f"{self._machine.id}" if self._machine else "not started"
        served = ", ".join(self._services.get("rpc", {}))
        return f"<ScopedSandbox {state} on {self._provider_name}{f' serving {served}' if served else ''}>"


#: Prints where the module ``argv[1]`` would be imported from in the sandbox ('' if nowhere), the
#: ``argv[2:]`` folders first on the path (run with ``-P``: the working directory is not on it).
_FIND_MODULE = (
    "import importlib.util, sys\n"
    "sys.path[:0] = sys.argv[2:]\n"
    "spec = importlib.util.find_spec(sys.argv[1])\n"
    "print('' if spec is None else (spec.origin or 'a namespace package'))\n"
)


def _expose_modes(expose_as: Any) -> list[str]:
    """The expose modes ``expose_as`` names (one, a list of several, or None for none), each
    checked to be installed before anything is uploaded."""
    if expose_as is None:
        return []
    modes = [expose_as] if isinstance(expose_as, str) else expose_as
    if not isinstance(modes, list | tuple) or not modes or not all(isinstance(m, str) for m in modes):
        raise ConfigError(
            [
                ConfigProblem(
                    "expose_as",
                    f"expected a mode name, a non-empty list of them, or None; got {expose_as!r}",
                )
            ],
            title="Invalid serve() arguments",
        )
    twice = sorted({m for m in modes if modes.count(m) > 1})
    if twice:
        raise ConfigError(
            [ConfigProblem("expose_as", f"{', '.join(map(repr, twice))} given twice")],
            title="Invalid serve() arguments",
        )
    for mode in modes:
        plugins.get_expose_mode(mode)
    return list(modes)


def _interface_name(name: str | None, local: Path) -> str:
    """The interface's name, checked: it is the module name of the served file."""
    if name is None:
        candidate = re.sub(r"[^0-9A-Za-z_]", "_", local.stem)
        candidate = f"_{candidate}" if candidate[:1].isdigit() else candidate
        field = f"name (derived from {local.name!r}; pass name=...)"
    else:
        candidate, field = name, "name"
    problem = None
    if not isinstance(candidate, str) or not _NAME.match(candidate):
        problem = (
            f"{candidate!r} is not usable: letters, digits and '_', not starting with a digit, at most 64"
        )
    elif keyword.iskeyword(candidate):
        problem = f"{candidate!r} is a Python keyword"
    elif candidate in sys.stdlib_module_names or candidate in ("seer", "msgpack"):
        problem = f"{candidate!r} would shadow the module {candidate!r} in the sandbox"
    if problem:
        raise ConfigError([ConfigProblem(field, problem)], title="Invalid interface name")
    return candidate
