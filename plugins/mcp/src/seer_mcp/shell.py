"""The shell MCP server: ``run_command``, ``read_file``, ``write_file`` and ``list_dir`` in a sandbox.

::

    python -m seer_mcp.shell [--sandbox ID] [--session ID]
    seer mcp shell [--sandbox ID] [--session ID]

It speaks MCP on stdio and works on a sandbox found with :meth:`seer.Sandbox.attach`: the one named
by ``--sandbox`` or ``$SEER_SHELL_SANDBOX_ID``, or by a tool's ``sandbox_id`` argument. With a CLI
session (``--session`` or ``$SEER_SHELL_SESSION_ID``, as :attr:`seer.sessions.shell.CliSession.mcp_config`
sets them) commands get that session's working directory and environment (the workspace's
libraries on ``PYTHONPATH``); without one, a plain shell in the sandbox's working directory.

Every command is a fresh ``bash -c``. Output is cut at :data:`MAX_OUTPUT` characters, with a note
saying how much was cut and how to read all of it; a command is killed after
:data:`DEFAULT_TIMEOUT` seconds unless the call gives another ``timeout``. A bad call (an unknown
sandbox, a missing file, a timeout) answers with an error text; the server keeps running.

While a command runs, ``run_command`` sends a progress notification every
:data:`PROGRESS_INTERVAL` seconds (when the client asked for progress, by sending a progress
token) carrying how long it has run and its latest :data:`PROGRESS_LINES` lines of output, so a
long build or training run is visibly alive and a client whose timeout resets on progress waits
for it. ``SEER_MCP_PROGRESS_INTERVAL`` sets the interval (default 1 s).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from collections import deque
from collections.abc import Sequence
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field
from seer.errors import ExecTimeoutError, SandboxNotFoundError, SeerError
from seer.providers.base import ExecResult, OutputCallback
from seer.sessions.shell import SHELL_SANDBOX_ENV, SHELL_SESSION_ENV, CliSession

from seer_mcp._progress import with_progress
from seer_mcp.mcpserver import SeerMCPServer

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_OUTPUT",
    "PROGRESS_INTERVAL",
    "PROGRESS_LINES",
    "TOOLS",
    "OutputTail",
    "ShellTools",
    "build_server",
    "main",
]

#: The most characters a tool answers with; the rest is cut (and the answer says so).
MAX_OUTPUT = 50_000
#: Seconds a command may run when the call gives no ``timeout``.
DEFAULT_TIMEOUT = 600.0
#: The tools the server offers.
TOOLS = ("run_command", "read_file", "write_file", "list_dir")
#: Seconds between progress notifications while a command runs.
PROGRESS_INTERVAL = float(os.environ.get("SEER_MCP_PROGRESS_INTERVAL") or 1.0)
#: How many of a running command's latest output lines a progress notification carries.
PROGRESS_LINES = 10
#: The most characters of one output line a progress notification carries.
_PROGRESS_LINE_CHARS = 500

#: Reads a range of lines of a file inside the sandbox, so a huge file never crosses whole.
_READ_LINES = """\
import json, os, sys
path, start, limit, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
try:
    f = open(path, "rb")
except FileNotFoundError:
    print(json.dumps({"error": "missing"})); sys.exit(0)
except IsADirectoryError:
    print(json.dumps({"error": "is_dir"})); sys.exit(0)
except PermissionError:
    print(json.dumps({"error": "denied"})); sys.exit(0)
with f:
    if os.path.isdir(path):
        print(json.dumps({"error": "is_dir"})); sys.exit(0)
    if b"\\0" in f.read(8192):
        print(json.dumps({"error": "binary", "size": os.fstat(f.fileno()).st_size})); sys.exit(0)
    f.seek(0)
    out, used, total, last, cut = [], 0, 0, 0, False
    for n, raw in enumerate(f, 1):
        total = n
        if n < start or (limit and n >= start + limit) or cut:
            continue
        text = raw.decode("utf-8", "replace")
        if used + len(text) > budget:
            out.append(text[: budget - used])
            cut = True
        else:
            out.append(text)
            used += len(text)
        last = n
print(json.dumps({"text": "".join(out), "total": total, "last": last, "cut": cut}))
"""


def _cap(text: str, *, hint: str) -> str:
    """``text``, or its start and end with a note saying how much of the middle was cut and
    ``hint`` (how to see all of it)."""
    if len(text) <= MAX_OUTPUT:
        return text
    head = MAX_OUTPUT // 2
    tail = MAX_OUTPUT - head
    cut = len(text) - head - tail
    return (
        f"{text[:head]}\n[... {cut:,} characters cut here ...]\n{text[-tail:]}\n"
        f"[output cut: {cut:,} of {len(text):,} characters not shown. {hint}]"
    )


def _command_output(result: ExecResult | ExecTimeoutError) -> str:
    body = result.stdout
    if result.stderr:
        body += ("" if not body or body.endswith("\n") else "\n") + "[stderr]\n" + result.stderr
    return _cap(
        body,
        hint="To see all of it, redirect the output to a file (`COMMAND > out.txt 2>&1`) and read "
        "that in parts with read_file(path, offset=..., limit=...) or `grep`.",
    )


def _with_note(text: str, note: str) -> str:
    """``text`` followed by ``[note]`` on a line of its own."""
    return f"{text}{'' if not text or text.endswith(chr(10)) else chr(10)}[{note}]"


class OutputTail:
    """The latest lines a running command wrote (stdout and stderr, as they came), for progress
    notifications: fed from the exec's output callback (a worker thread), read by the server."""

    def __init__(self, lines: int = PROGRESS_LINES):
        self._lock = threading.Lock()
        self._lines: deque[str] = deque(maxlen=lines)
        self._partial = ""

    def feed(self, _stream: str, text: str) -> None:
        """An :data:`~seer.providers.base.OutputCallback`: take a chunk of output."""
        with self._lock:
            *done, self._partial = (self._partial + text).replace("\r\n", "\n").split("\n")
            # a progress bar redraws its line with \r: keep what it shows last
            self._lines.extend(line.rsplit("\r", 1)[-1][:_PROGRESS_LINE_CHARS] for line in done)
            self._partial = self._partial[-_PROGRESS_LINE_CHARS * 4 :]

    def text(self) -> str:
        """The latest lines, the unfinished last one included."""
        with self._lock:
            lines = list(self._lines)
            partial = self._partial.rsplit("\r", 1)[-1][:_PROGRESS_LINE_CHARS]
        if partial:
            lines = [*lines, partial][-(self._lines.maxlen or 1) :]
        return "\n".join(lines)

    def message(self, elapsed: float) -> str:
        """A progress message: how long the command has run, then its latest output."""
        tail = self.text()
        head = f"running for {elapsed:.0f}s"
        return f"{head}; latest output:\n{tail}" if tail else f"{head}; no output yet"


class ShellTools:
    """The tools' logic, on the default sandbox (and session) or the one a call names."""

    def __init__(self, sandbox_id: str | None = None, session_id: str | None = None):
        self.sandbox_id = sandbox_id or None
        self.session_id = session_id or None

    def session(self, sandbox_id: str | None = None) -> CliSession:
        """The session a call works in (attached afresh: the sandbox may have changed)."""
        target = sandbox_id or self.sandbox_id
        if not target:
            raise ToolError(
                "no sandbox: pass sandbox_id, or start the server with --sandbox ID "
                f"(or ${SHELL_SANDBOX_ENV} set); `seer ls` lists the running sandboxes"
            )
        session_id = self.session_id if target == self.sandbox_id else None
        try:
            return CliSession.attach(target, session_id)
        except SandboxNotFoundError:
            raise ToolError(
                f"unknown sandbox {target!r}: no installed provider has it (`seer ls` lists the running ones)"
            ) from None
        except SeerError as exc:
            raise ToolError(f"cannot use sandbox {target!r}: {exc}") from None

    def run_command(
        self,
        command: str,
        timeout: float | None = None,
        sandbox_id: str | None = None,
        on_output: OutputCallback | None = None,
    ) -> str:
        """Run ``command``; ``on_output`` gets its output as it comes (for progress)."""
        if not command.strip():
            raise ToolError("command is empty")
        if timeout is not None and timeout <= 0:
            raise ToolError(f"timeout must be a positive number of seconds, got {timeout}")
        limit = DEFAULT_TIMEOUT if timeout is None else timeout
        session = self.session(sandbox_id)
        try:
            result = session.run(command, timeout=limit, on_output=on_output)
        except ExecTimeoutError as exc:
            raise ToolError(
                _with_note(
                    _command_output(exc),
                    f"timed out after {limit:g} s: the command was killed. Give a larger timeout, or run "
                    "it in the background (`nohup COMMAND > job.log 2>&1 &`) and read job.log",
                )
            ) from None
        except (SeerError, OSError) as exc:
            raise ToolError(f"could not run the command: {exc}") from None
        return _with_note(_command_output(result), f"exit code {result.exit_code}")

    def read_file(
        self, path: str, offset: int = 1, limit: int | None = None, sandbox_id: str | None = None
    ) -> str:
        if offset < 1:
            raise ToolError(f"offset is a line number (1 is the first line), got {offset}")
        if limit is not None and limit < 1:
            raise ToolError(f"limit is a number of lines (at least 1), got {limit}")
        session = self.session(sandbox_id)
        target = self._path(session, path)
        argv = [session.sandbox.machine.python, "-c", _READ_LINES, target, str(offset), str(limit or 0)]
        try:
            result = session.run([*argv, str(MAX_OUTPUT)], timeout=300)
            answer = json.loads(result.stdout.strip().splitlines()[-1])
        except (SeerError, OSError) as exc:
            raise ToolError(f"could not read {target!r}: {exc}") from None
        except (ValueError, IndexError):
            raise ToolError(f"could not read {target!r}: {result.output.strip()[-2000:]}") from None
        error = answer.get("error")
        if error == "missing":
            raise ToolError(f"no such file: {target!r} (list_dir shows what is there)")
        if error == "is_dir":
            raise ToolError(f"{target!r} is a directory; use list_dir")
        if error == "denied":
            raise ToolError(f"permission denied: {target!r}")
        if error == "binary":
            raise ToolError(
                f"{target!r} is a binary file ({answer['size']:,} bytes); look at it with run_command "
                "(e.g. `file PATH`, `xxd PATH | head`)"
            )
        text, total, last = answer["text"], answer["total"], answer["last"]
        notes = []
        if answer["cut"]:
            notes.append(
                f"output cut at {MAX_OUTPUT:,} characters inside line {last}; read fewer lines at a "
                f"time (limit=...), or cut long lines with run_command (`cut -c1-500 PATH`)"
            )
        if total == 0:
            notes.append("the file is empty")
        elif last == 0:
            notes.append(f"the file has {total:,} lines; offset {offset} is past its end")
        elif offset > 1 or last < total:
            more = f"; read on with offset={last + 1}" if last < total else ""
            notes.append(f"lines {offset}-{last} of {total:,}{more}")
        return _with_note(text, "; ".join(notes)) if notes else text

    def write_file(self, path: str, content: str, sandbox_id: str | None = None) -> str:
        session = self.session(sandbox_id)
        target = self._path(session, path)
        data = content.encode()
        try:
            written = session.write_file(target, data)
        except (SeerError, OSError) as exc:
            raise ToolError(f"could not write {target!r}: {exc}") from None
        return f"wrote {len(data):,} bytes to {written}"

    def list_dir(self, path: str = ".", sandbox_id: str | None = None) -> str:
        session = self.session(sandbox_id)
        target = self._path(session, path)
        try:
            entries = session.list_dir(target)
        except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
            raise ToolError(str(exc)) from None
        except (SeerError, OSError) as exc:
            raise ToolError(f"could not list {target!r}: {exc}") from None
        if not entries:
            return f"{target}: empty directory"
        listing = "\n".join(str(e) for e in entries)
        return _cap(
            f"{target}: {len(entries):,} {'entry' if len(entries) == 1 else 'entries'} "
            f"(dirs end in '/', links in '@')\n{listing}",
            hint="Narrow it down with run_command (`ls DIR | grep PATTERN`, `find DIR -name ...`).",
        )

    @staticmethod
    def _path(session: CliSession, path: str) -> str:
        try:
            return session.path(path)
        except ValueError as exc:
            raise ToolError(str(exc)) from None


_SandboxArg = Annotated[
    str | None,
    Field(description="The sandbox to use; default: the one this server was started for."),
]


def build_server(sandbox_id: str | None = None, session_id: str | None = None) -> MCPServer:
    """The shell MCP server for ``sandbox_id`` (and CLI session ``session_id``); either may be
    None (then each call names its sandbox)."""
    tools = ShellTools(sandbox_id, session_id)
    server = SeerMCPServer(name="seer-shell", instructions=_instructions(tools), log_level="WARNING")

    @server.tool(structured_output=False)
    async def run_command(
        ctx: Context,
        command: Annotated[str, Field(description="A bash command line (pipes, &&, redirects work).")],
        timeout: Annotated[
            float | None,
            Field(description=f"Seconds before the command is killed (default {DEFAULT_TIMEOUT:g})."),
        ] = None,
        sandbox_id: _SandboxArg = None,
    ) -> str:
        """Run a shell command in the sandbox and return its output (stdout, then stderr) and exit code.

        Each call is a fresh `bash -c` in the session's working directory: `cd` and `export` do not
        carry over to the next call (chain them with &&); files and background processes do.
        Output over the size limit is cut, with a note saying how to see all of it. While it runs,
        progress notifications carry its latest output lines.
        """
        tail = OutputTail()
        return await with_progress(
            lambda: tools.run_command(command, timeout, sandbox_id, on_output=tail.feed),
            ctx,
            tail.message,
            PROGRESS_INTERVAL,
        )

    @server.tool(structured_output=False)
    def read_file(
        path: Annotated[str, Field(description="The file; relative paths are from the working directory.")],
        offset: Annotated[int, Field(description="The first line to return (1 is the first line).")] = 1,
        limit: Annotated[int | None, Field(description="How many lines to return (default: all).")] = None,
        sandbox_id: _SandboxArg = None,
    ) -> str:
        """Read a text file in the sandbox, whole or a range of lines (offset, limit).

        An answer that stops before the end of the file says which lines it holds and how to read on.
        """
        return tools.read_file(path, offset, limit, sandbox_id)

    @server.tool(structured_output=False)
    def write_file(
        path: Annotated[str, Field(description="The file; relative paths are from the working directory.")],
        content: Annotated[str, Field(description="The file's new content (text).")],
        sandbox_id: _SandboxArg = None,
    ) -> str:
        """Write a text file in the sandbox, creating its directory and replacing what was there."""
        return tools.write_file(path, content, sandbox_id)

    @server.tool(structured_output=False)
    def list_dir(
        path: Annotated[
            str, Field(description="The directory; relative paths are from the working directory.")
        ] = ".",
        sandbox_id: _SandboxArg = None,
    ) -> str:
        """List a directory in the sandbox: one entry a line, directories ending in '/', links in '@',
        files with their size."""
        return tools.list_dir(path, sandbox_id)

    return server


def _instructions(tools: ShellTools) -> str:
    rules = (
        f"Tools: {', '.join(TOOLS)}. Answers over {MAX_OUTPUT:,} characters are cut (the answer says "
        f"how to see the rest); commands are killed after {DEFAULT_TIMEOUT:g} s unless you pass a "
        "timeout."
    )
    if not tools.sandbox_id:
        return f"A shell in a seer sandbox: pass sandbox_id to each tool (`seer ls` lists them). {rules}"
    try:
        prompt = tools.session().prompt
    except Exception as exc:  # the tools report it again, call by call; the server still starts
        return f"A shell in seer sandbox {tools.sandbox_id} ({exc}). {rules}"
    return f"{prompt}\n{rules}\n"


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m seer_mcp.shell``: serve on stdio until the client closes it."""
    parser = argparse.ArgumentParser(
        prog="python -m seer_mcp.shell", description="seer's shell MCP server (stdio)."
    )
    parser.add_argument(
        "--sandbox",
        default=os.environ.get(SHELL_SANDBOX_ENV),
        help=f"the sandbox to work in (default: ${SHELL_SANDBOX_ENV})",
    )
    parser.add_argument(
        "--session",
        default=os.environ.get(SHELL_SESSION_ENV),
        help=f"the CLI session whose directory and environment to use (default: ${SHELL_SESSION_ENV})",
    )
    args = parser.parse_args(argv)
    serve(args.sandbox, args.session)


def serve(sandbox_id: str | None = None, session_id: str | None = None) -> None:
    """Run the shell MCP server on stdio."""
    build_server(sandbox_id, session_id).run("stdio")


if __name__ == "__main__":
    main()
