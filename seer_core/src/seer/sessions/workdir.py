"""Working-directory sessions (the ``local`` execution mode): the agent works on this machine, in a
directory with its workspace installed. Named for the directory, since "local" is also the provider
that runs sandboxes on this machine (:mod:`seer.providers.local`), which this has nothing to do with.

This is the session of seed Pattern 4: a ``ScopedSandbox`` serves an interface file, the
``library`` expose mode turns it into a client module, and the agent's local code imports that
module and calls the functions, which run in the sandbox over RPC::

    tools = scoped.serve("interface.py", expose_as="library", name="tools")
    session = create_local_session(Workspace(libraries=[tools]), workspace_dir="./work", name="exp")
    # ./work/tools.py is there: `cd work && python -c "import tools; print(tools.list_cache())"`

Build one with :func:`create_local_session` (also importable from :mod:`seer.execution`). Nothing
runs in the background: a local session is files in a directory plus what the agent is told
(:attr:`LocalSession.prompt`) and the MCP servers its harness should load
(:attr:`LocalSession.mcp_config`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seer.errors import ConfigError, ConfigProblem, ExecError, ExecTimeoutError
from seer.providers.base import ExecResult
from seer.sandbox.execution_mode import ExecutionModePlugin

if TYPE_CHECKING:
    from seer.workspace import InstalledWorkspace, Workspace

__all__ = ["MCP_CONFIG_FILE", "LocalMode", "LocalSession", "create_local_session"]

#: Where :meth:`LocalSession.write_mcp_config` writes by default, relative to the workspace
#: directory (the project-scoped MCP file agent harnesses such as Claude Code read).
MCP_CONFIG_FILE = ".mcp.json"
#: The record of the library files written at the top of a workspace directory (path -> sha256),
#: so a later session replaces them but never a file of the user's.
_MANIFEST = "local-libraries.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class LocalSession:
    """An agent's working directory on this machine, with a workspace installed in it.

    The workspace's libraries are written at the top of :attr:`workspace_dir` (so a script there,
    or ``python -c`` run from there, imports them with no set-up) and into its
    ``.seer/workspace/libs`` (put first on ``PYTHONPATH`` by :attr:`env`, for code run from
    anywhere); skills go into ``.seer/workspace/skills``, the workspace's local files and
    directories at their places in :attr:`workspace_dir`.
    """

    def __init__(
        self,
        *,
        name: str,
        workspace_dir: str,
        workspace: Workspace,
        installed: InstalledWorkspace,
        libraries: list[str],
    ):
        self.name = name
        #: the agent's working directory (absolute)
        self.workspace_dir = workspace_dir
        self.workspace = workspace
        #: where the workspace went (``libs_dir``, ``skills_dir``, ``docs``, ...)
        self.installed = installed
        #: the library files written at the top of :attr:`workspace_dir`, relative to it
        self.library_files = libraries
        #: the Python interpreter :meth:`exec_python` uses (the one running seer)
        self.python = sys.executable

    def __repr__(self) -> str:
        return f"<LocalSession {self.name!r} in {self.workspace_dir!r}>"

    @property
    def session_id(self) -> str:
        """The session's name (as ``NotebookSession.session_id`` and ``CliSession.session_id``
        identify theirs)."""
        return self.name

    # --- what the agent is handed ---------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        """Variables to set on top of this process's environment for code run elsewhere than
        :attr:`workspace_dir`: ``PYTHONPATH`` with the libraries first."""
        current = os.environ.get("PYTHONPATH", "")
        paths = [self.installed.libs_dir, *current.split(os.pathsep)]
        return {"PYTHONPATH": os.pathsep.join(dict.fromkeys(p for p in paths if p))}

    @property
    def mcp_config(self) -> dict[str, dict[str, Any]]:
        """The MCP servers the agent's harness should load, by name, in the ``mcpServers`` entry
        shape: every MCP server config the workspace carries (``Workspace(mcp_servers=...)``, or
        a ``serve(..., expose_as="mcp")`` result given in ``libraries``). Empty when none."""
        return {name: dict(config) for name, config in self.workspace.mcp_servers.items()}

    def write_mcp_config(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write :attr:`mcp_config` as ``{"mcpServers": {...}}`` (readable by the user only: the
        configs may carry tokens) to ``path``, by default ``<workspace_dir>/.mcp.json``; returns
        the file's path."""
        target = Path(path) if path is not None else Path(self.workspace_dir) / MCP_CONFIG_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"mcpServers": self.mcp_config}, indent=2).encode() + b"\n"
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(target, 0o600)
        return target

    @property
    def prompt(self) -> str:
        """Markdown for the agent: where it works, how its libraries are imported, their docs and
        the skills and MCP servers it has."""
        parts = [
            "# Your environment: a local working directory",
            "",
            f"You work in `{self.workspace_dir}` on this machine.",
        ]
        if self.workspace.libraries:
            names = ", ".join(f"`{lib.name}`" for lib in self.workspace.libraries)
            parts += [
                "",
                f"The libraries below ({names}) sit at the top of that directory: a Python script "
                "there, or `python -c` run from there, imports them directly. To import them from "
                f"code elsewhere, put `{self.installed.libs_dir}` first on `PYTHONPATH`.",
            ]
        if self.workspace.mcp_servers:
            parts += [
                "",
                "MCP servers given to you: " + ", ".join(f"`{n}`" for n in self.workspace.mcp_servers) + ".",
            ]
        if self.installed.docs.strip():
            parts += ["", self.installed.docs.strip()]
        return "\n".join(parts) + "\n"

    # --- running code ---------------------------------------------------------------------
    def run(
        self, command: str | list[str], timeout: float | None = None, *, check: bool = False
    ) -> ExecResult:
        """Run a command (a string, through ``bash -c``; or an argv list) in :attr:`workspace_dir`
        with :attr:`env` added. Returns its :class:`~seer.providers.base.ExecResult` (a non-zero
        exit raises :class:`~seer.errors.ExecError` only with ``check=True``); after ``timeout``
        seconds it is killed and :class:`~seer.errors.ExecTimeoutError` raised."""
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        text = command if isinstance(command, str) else shlex.join(command)
        start = time.monotonic()
        try:
            proc = subprocess.run(
                argv,
                cwd=self.workspace_dir,
                env={**os.environ, **self.env},
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            out, err = (
                s.decode(errors="replace") if isinstance(s, bytes) else (s or "")
                for s in (exc.stdout, exc.stderr)
            )
            raise ExecTimeoutError(text, timeout or 0.0, out, err) from None
        result = ExecResult(text, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)
        return result.check() if check else result

    def exec_python(self, code: str, timeout: float | None = None, *, check: bool = False) -> ExecResult:
        """Run Python ``code`` in a fresh interpreter (:attr:`python`) in :attr:`workspace_dir`,
        the workspace's libraries importable. Same result and errors as :meth:`run`."""
        return self.run([self.python, "-c", code], timeout=timeout, check=check)


# --- building one ----------------------------------------------------------------------------
def _place_libraries(base: Path, workspace: Workspace, manifest: Path) -> list[str]:
    """Write the libraries' files at the top of ``base``, replacing those a previous session
    wrote (and removing those no longer wanted) but refusing to touch a file of the user's."""
    try:
        old: dict[str, str] = json.loads(manifest.read_text())
        if not isinstance(old, dict):
            old = {}
    except (OSError, ValueError):
        old = {}
    wanted: dict[str, bytes] = {}
    for lib in workspace.libraries:
        for rel, content in lib.files.items():
            wanted[rel] = content.encode() if isinstance(content, str) else content
    problems = []
    for i, lib in enumerate(workspace.libraries):
        for rel in lib.files:
            target = base / rel
            if target.is_dir():
                problems.append(ConfigProblem(f"libraries[{i}]", f"{str(target)!r} is a directory"))
            elif target.exists():
                current = target.read_bytes()
                if current != wanted[rel] and old.get(rel) != _digest(current):
                    problems.append(
                        ConfigProblem(
                            f"libraries[{i}]",
                            f"{str(target)!r} is already there and was not written by seer (or was "
                            "changed since); move it, rename the library, or use another workspace_dir",
                        )
                    )
    if problems:
        raise ConfigError(problems, title="Cannot set up the local session")
    for rel, digest in old.items():
        target = base / rel
        if rel not in wanted and target.is_file() and _digest(target.read_bytes()) == digest:
            target.unlink()
            parent = target.parent
            while parent != base and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
    for rel, data in wanted.items():
        target = base / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({rel: _digest(data) for rel, data in wanted.items()}, indent=1))
    return sorted(wanted)


class LocalMode(ExecutionModePlugin):
    """The agent runs on the client and calls functions exposed from the sandbox over RPC."""

    name = "local"
    description = "agent runs locally, calls exposed functions over RPC"


def create_local_session(
    workspace: Any = None, workspace_dir: str | os.PathLike[str] = ".", name: str | None = None
) -> LocalSession:
    """A session for an agent working on this machine, in ``workspace_dir`` (created if need be),
    with ``workspace`` installed there: its libraries written at the top of the directory (a script
    there, or ``python -c`` run from there, imports them; ``session.env`` puts them on
    ``PYTHONPATH`` for code elsewhere), its skills and files installed, its ``custom_init_code``
    run once now.

    With a library from ``ScopedSandbox.serve(..., expose_as="library")`` in the workspace, the
    agent's local code imports it and calls functions that run in the sandbox (seed Pattern 4).
    ``session.mcp_config`` holds the MCP servers the workspace carries, for the agent's harness to
    load; ``session.prompt`` tells the agent what it has. ``name`` defaults to
    ``local-<date>-<time>``. A library file would replace a file of the user's: refused, with
    :class:`~seer.errors.ConfigError`.
    """
    from seer.workspace import Workspace

    if name is not None and not (isinstance(name, str) and _NAME.match(name)):
        raise ConfigError(
            f"name: {name!r} is not a usable session name (letters, digits, '.', '_', '-'; at most 100)"
        )
    if workspace is None:
        workspace = Workspace()
    elif not isinstance(workspace, Workspace):
        hint = " (wrap libraries in Workspace(libraries=[...]))" if isinstance(workspace, list) else ""
        raise ConfigError(f"workspace: expected a Workspace, got {type(workspace).__name__}{hint}")
    if not isinstance(workspace_dir, str | os.PathLike):
        raise ConfigError(f"workspace_dir: expected a path, got {workspace_dir!r}")
    base = Path(workspace_dir).expanduser().resolve()
    if base.exists() and not base.is_dir():
        raise ConfigError(f"workspace_dir: {str(base)!r} is a file, not a directory")
    base.mkdir(parents=True, exist_ok=True)
    installed = workspace.install_local(base)
    libraries = _place_libraries(base, workspace, Path(installed.root) / _MANIFEST)
    session = LocalSession(
        name=name or time.strftime("local-%Y%m%d-%H%M%S"),
        workspace_dir=str(base),
        workspace=workspace,
        installed=installed,
        libraries=libraries,
    )
    if installed.init_code.strip():
        result = session.exec_python(installed.setup_code)
        if not result.ok:
            raise ExecError(
                "the workspace's custom_init_code", result.exit_code, result.stdout, result.stderr
            )
    return session
