"""CLI sessions: a shell in the sandbox, with a workspace's libraries importable.

A :class:`CliSession` is the ``cli`` execution mode's counterpart of a notebook session: no
kernel, just commands run in the sandbox, each with the session's working directory and
environment. Every :meth:`~CliSession.run` is a fresh ``bash -c``, so ``cd`` and ``export`` do not
carry over from one command to the next (chain them: ``cd data && ls``); what does carry over is
the file system, and processes started in the background (``nohup cmd > log 2>&1 &``).

The workspace's libraries are importable by the sandbox's ``python`` through ``PYTHONPATH`` in
the session's environment; its ``custom_init_code`` runs once, when the session is created (there
is no kernel to keep its variables, so only its side effects last).

Build one with :func:`create_cli_session` (also importable from :mod:`seer.execution`). A session
is recorded with its sandbox, so :meth:`CliSession.attach` finds it again from another process,
and :attr:`~CliSession.mcp_config` starts the shell MCP server (``seer mcp shell``, from ``seer-mcp``) on it.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import secrets
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from seer.errors import ConfigError, ExecError, PluginError, SandboxError
from seer.providers.base import ExecResult, OutputCallback
from seer.sandbox.execution_mode import ExecutionModePlugin

if TYPE_CHECKING:
    from seer.sandbox import Sandbox
    from seer.workspace import InstalledWorkspace

__all__ = [
    "SHELL_SANDBOX_ENV",
    "SHELL_SESSION_ENV",
    "CliMode",
    "CliSession",
    "DirEntry",
    "create_cli_session",
]

#: The variable naming the sandbox the shell MCP server attaches to. (Not ``SEER_SANDBOX_ID``:
#: that is the local provider's mark on the sandbox's own processes, killed at teardown.)
SHELL_SANDBOX_ENV = "SEER_SHELL_SANDBOX_ID"
#: The variable naming the CLI session (its working directory and environment) the server uses.
SHELL_SESSION_ENV = "SEER_SHELL_SESSION_ID"
#: Where the sessions of a sandbox are recorded (``sandbox.services[...]``).
_SERVICE = "cli_sessions"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

#: Lists a directory inside the sandbox (any provider has its Python): one JSON line.
_LIST_DIR = """\
import json, os, sys
path = sys.argv[1]
try:
    it = os.scandir(path)
except FileNotFoundError:
    print(json.dumps({"error": "missing"})); sys.exit(0)
except NotADirectoryError:
    print(json.dumps({"error": "not_dir"})); sys.exit(0)
except PermissionError:
    print(json.dumps({"error": "denied"})); sys.exit(0)
out = []
with it:
    for e in it:
        try:
            if e.is_symlink():
                kind, size = "link", None
            elif e.is_dir():
                kind, size = "dir", None
            elif e.is_file():
                kind, size = "file", e.stat().st_size
            else:
                kind, size = "other", None
        except OSError:
            kind, size = "other", None
        out.append([e.name, kind, size])
out.sort()
print(json.dumps({"entries": out}))
"""


@dataclass(frozen=True)
class DirEntry:
    """One entry of :meth:`CliSession.list_dir`."""

    name: str
    #: ``"file"``, ``"dir"``, ``"link"`` (a symbolic link, not followed) or ``"other"``
    kind: str
    #: bytes, for files
    size: int | None = None

    def __str__(self) -> str:
        if self.kind == "dir":
            return f"{self.name}/"
        if self.kind == "link":
            return f"{self.name}@"
        if self.kind == "file" and self.size is not None:
            return f"{self.name}  ({self.size} bytes)"
        return self.name


class CliSession:
    """A shell in a sandbox: commands run with the session's working directory and environment.

    ``env`` holds what the session adds to the sandbox's own environment (``PYTHONPATH`` with the
    workspace's libraries first). Relative paths given to the file methods are taken from
    :attr:`cwd`.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        session_id: str,
        name: str,
        cwd: str,
        env: Mapping[str, str] | None = None,
        installed: list[InstalledWorkspace] | None = None,
        docs: str = "",
    ):
        self.sandbox = sandbox
        self.session_id = session_id
        self.name = name
        #: the directory every command starts in (absolute, in the sandbox)
        self.cwd = cwd
        #: variables the session sets on top of the sandbox's own
        self.env: dict[str, str] = dict(env or {})
        #: the workspaces set up in this session, in order
        self.installed: list[InstalledWorkspace] = list(installed or [])
        self._docs = docs

    def __repr__(self) -> str:
        return f"<CliSession {self.session_id} in {self.sandbox.sandbox_id} cwd={self.cwd!r}>"

    # --- running commands -----------------------------------------------------------------
    def run(
        self,
        command: str | list[str],
        timeout: float | None = None,
        *,
        check: bool = False,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        """Run a command (a string, through ``bash -c``; or an argv list) in :attr:`cwd` with the
        session's environment. Nothing carries over to the next command but files and background
        processes.

        Returns the :class:`~seer.providers.base.ExecResult` (a non-zero exit is not an error
        unless ``check=True``, which raises :class:`~seer.errors.ExecError`). Raises
        :class:`~seer.errors.ExecTimeoutError`, with the output so far, after ``timeout`` seconds
        (the command and its children are killed). ``on_output`` is called with
        ``("stdout" | "stderr", text)`` as the command writes.
        """
        return self.sandbox.exec(
            command, timeout=timeout, check=check, env=self.env, cwd=self.cwd, on_output=on_output
        )

    # --- files ----------------------------------------------------------------------------
    def path(self, path: str) -> str:
        """``path`` as an absolute path in the sandbox (relative ones from :attr:`cwd`)."""
        if not isinstance(path, str) or not path.strip():
            raise ValueError(f"a path must be a non-empty string, got {path!r}")
        return path if posixpath.isabs(path) else posixpath.normpath(posixpath.join(self.cwd, path))

    def read_bytes(self, path: str) -> bytes:
        """A file's bytes. Raises FileNotFoundError if there is no such file (IsADirectoryError
        for a directory, where the provider can tell)."""
        target = self.path(path)
        try:
            return self.sandbox.read_bytes(target)
        except IsADirectoryError:
            raise IsADirectoryError(f"{target!r} is a directory, not a file") from None
        except FileNotFoundError:
            raise FileNotFoundError(f"no file {target!r} in the sandbox") from None

    def read_file(self, path: str) -> str:
        """A text file's content (UTF-8; undecodable bytes become U+FFFD). Raises
        FileNotFoundError if there is no such file."""
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def write_file(self, path: str, content: str | bytes) -> str:
        """Write a file (creating its directory, replacing what was there); return its absolute path."""
        target = self.path(path)
        self.sandbox.write_file(target, content)
        return target

    def list_dir(self, path: str = ".") -> list[DirEntry]:
        """The entries of a directory, sorted by name. Raises FileNotFoundError if there is no
        such directory, NotADirectoryError if ``path`` is a file."""
        target = self.path(path)
        result = self.sandbox.exec([self.sandbox.machine.python, "-c", _LIST_DIR, target], timeout=120)
        try:
            answer = json.loads(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise ExecError(result.command, result.exit_code, result.stdout, result.stderr) from None
        error = answer.get("error")
        if error == "missing":
            raise FileNotFoundError(f"no directory {target!r} in the sandbox")
        if error == "not_dir":
            raise NotADirectoryError(f"{target!r} is not a directory")
        if error == "denied":
            raise PermissionError(f"permission denied: {target!r}")
        return [DirEntry(name, kind, size) for name, kind, size in answer["entries"]]

    # --- workspaces -----------------------------------------------------------------------
    def setup(self, workspace: Any) -> None:
        """Install ``workspace`` in the sandbox for this session: its libraries put first on
        ``PYTHONPATH``, its ``custom_init_code`` run once by the sandbox's Python (raising
        :class:`~seer.errors.ExecError` if it fails)."""
        installed = workspace.install(self.sandbox)
        current = self.env.get("PYTHONPATH")
        if current is None:  # what the sandbox itself sets, kept after the libraries
            current = {**self.sandbox.config.env, **self.sandbox.env}.get("PYTHONPATH", "")
        libs = [installed.libs_dir, *current.split(os.pathsep)]
        self.env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in libs if p))
        if installed.init_code.strip():
            result = self.sandbox.machine.exec(
                [self.sandbox.machine.python, "-"],
                stdin=installed.init_code.encode(),
                env={**self.sandbox.env, **self.env},
                cwd=self.cwd,
            )
            if not result.ok:
                raise ExecError(
                    "the workspace's custom_init_code", result.exit_code, result.stdout, result.stderr
                )
        self.installed.append(installed)
        self._docs = "\n\n".join(i.docs.strip() for i in self.installed if i.docs.strip())
        self._save()

    # --- what the agent is handed ---------------------------------------------------------
    @property
    def mcp_config(self) -> dict[str, Any]:
        """How an MCP client starts the shell MCP server on this session (``python -m
        seer_mcp.shell``), in the ``mcpServers`` entry shape agents use. Needs seer's MCP plugin
        (``pip install "seer[mcp]"``); raises :class:`~seer.errors.PluginError` without it."""
        import importlib.util

        from seer.state import seer_home

        if importlib.util.find_spec("seer_mcp") is None:
            raise PluginError(
                "session.mcp_config needs seer's MCP plugin (the seer-mcp package); "
                'install it with: pip install "seer[mcp]"'
            )

        env = {
            SHELL_SANDBOX_ENV: self.sandbox.sandbox_id,
            SHELL_SESSION_ENV: self.session_id,
            # The server must find the sandbox records this process wrote.
            "SEER_HOME": str(seer_home()),
        }
        for name in ("SEER_LOAD_PLUGINS", "SEER_DISABLE_PLUGINS"):
            if os.environ.get(name):
                env[name] = os.environ[name]
        return {"type": "stdio", "command": sys.executable, "args": ["-m", "seer_mcp.shell"], "env": env}

    @property
    def models_text(self) -> str:
        """The sandbox's models (fetched, not loaded) and how to load one; hidden models by
        ``var_name`` only."""
        handles = self.sandbox.model_handles
        if not handles:
            return "No models are configured in this sandbox."
        lines = [
            "These models are downloaded into the sandbox (not loaded: load one when you need it).",
            "",
        ]
        for h in handles:
            what = h.display_name + (" (PEFT adapter)" if h.is_peft else "")
            lines.append(f"- `{h.var_name}`: {what}")
        example = handles[0].var_name
        lines += [
            "",
            "Load one by its name (the first GPU in bfloat16 if there is one, else the CPU):",
            "",
            "```python",
            "from seer.runtime.loading import load_model",
            "from seer.runtime.models import manifest_entry",
            "",
            f"model, tokenizer = load_model(manifest_entry({example!r}))",
            "```",
        ]
        return "\n".join(lines)

    @property
    def prompt(self) -> str:
        """Markdown for the agent: the shell, its rules, the models and the workspace's docs."""
        parts = [
            "# Your environment: a shell in a sandbox",
            "",
            f"You work in sandbox `{self.sandbox.sandbox_id}` (provider `{self.sandbox.provider}`). "
            f"Commands start in `{self.cwd}`; `python` is the sandbox's interpreter.",
            "",
            "- Each command runs in a fresh `bash -c`: `cd` and `export` do not carry over to the "
            "next command, so chain them (`cd data && python run.py`).",
            "- Files and background processes do carry over. Run long jobs in the background "
            "(`nohup python job.py > job.log 2>&1 &`) and read their log.",
            "- Relative paths are taken from the working directory above.",
            "",
            "## Models",
            "",
            self.models_text,
        ]
        if self._docs.strip():
            parts += ["", self._docs.strip()]
        return "\n".join(parts) + "\n"

    # --- records --------------------------------------------------------------------------
    def _record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cwd": self.cwd,
            "env": self.env,
            "docs": self._docs,
            "created_at": time.time(),
        }

    def _save(self) -> None:
        sessions = dict(self.sandbox.services.get(_SERVICE) or {})
        sessions[self.session_id] = self._record()
        self.sandbox.set_service(_SERVICE, sessions)

    @classmethod
    def attach(cls, sandbox: Sandbox | str, session_id: str | None = None) -> CliSession:
        """A handle on a session created elsewhere (by another process), from its sandbox (or the
        sandbox's id) and ``session_id``. Without ``session_id``: a plain shell in the sandbox's
        working directory, with the sandbox's own environment."""
        from seer.sandbox import Sandbox

        box = Sandbox.attach(sandbox) if isinstance(sandbox, str) else sandbox
        if session_id is None:
            return cls(box, session_id="", name="shell", cwd=box.workdir)
        record = (box.services.get(_SERVICE) or {}).get(session_id)
        if record is None:
            known = ", ".join(sorted(box.services.get(_SERVICE) or {})) or "none"
            raise SandboxError(
                f"sandbox {box.sandbox_id} has no CLI session {session_id!r} (its sessions: {known})"
            )
        return cls(
            box,
            session_id=session_id,
            name=record.get("name", session_id),
            cwd=record.get("cwd") or box.workdir,
            env=record.get("env") or {},
            docs=record.get("docs", ""),
        )


class CliMode(ExecutionModePlugin):
    """A shell in the sandbox."""

    name = "cli"
    description = "shell in the sandbox"


def create_cli_session(sandbox: Sandbox, workspace: Any = None, *, name: str | None = None) -> CliSession:
    """A new shell session in ``sandbox`` (any execution mode; ``cli`` is the one made for it),
    with ``workspace`` installed: its libraries importable by the sandbox's ``python`` through
    ``PYTHONPATH``, its ``custom_init_code`` run once now.

    Each ``session.run(command)`` is a fresh ``bash -c`` in the sandbox's working directory with the
    session's environment (``cd`` and ``export`` do not carry over). ``session.mcp_config`` starts the
    shell MCP server on it; ``session.prompt`` tells the agent what it has. ``name`` (a label)
    defaults to ``shell-<date>-<time>``.
    """
    if name is not None and not (isinstance(name, str) and _NAME.match(name)):
        raise ConfigError(
            f"name: {name!r} is not a usable session name (letters, digits, '.', '_', '-'; at most 100)"
        )
    session = CliSession(
        sandbox,
        session_id=f"cli-{secrets.token_hex(6)}",
        name=name or time.strftime("shell-%Y%m%d-%H%M%S"),
        cwd=sandbox.workdir,
    )
    if workspace is not None:
        session.setup(workspace)
    else:
        session._save()
    return session
