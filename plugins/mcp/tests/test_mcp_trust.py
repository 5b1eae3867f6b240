"""An agent can trust the notebook and shell MCP servers (#22, #23 item 9): a config that carries
everything the server needs, instructions about the configured session, calls without session_id
that go where the agent last attached (or are refused), argument errors that name the signature,
and a config that outlives a restart of the sandbox's Jupyter server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("jupyter_server")
pytest.importorskip("mcp")
pytest.importorskip("seer_mcp")

from _mcp_client import McpClient, server_env, text, texts
from seer import Sandbox, SandboxConfig
from seer.execution import create_notebook_session, restart_jupyter
from seer_mcp.notebook import SessionRegistry, build_server, instructions
from seer_mcp.shell import build_server as build_shell_server

SERVER = ["-m", "seer_mcp.notebook"]


def _call(server: Any, tool: str, arguments: dict[str, Any]) -> str:
    result = asyncio.run(server.call_tool(tool, arguments))
    assert result.is_error
    return result.content[0].text


@pytest.mark.unit
def test_argument_errors_name_the_signature_on_the_notebook_and_shell_servers() -> None:
    notebook, _ = build_server(SessionRegistry())
    signature = (
        "Signature: execute_code(code: str, session_id: str = '', timeout_seconds: float | None = None)"
    )
    missing = _call(notebook, "execute_code", {})
    assert missing == f"Wrong arguments for execute_code: missing argument 'code'.\n{signature}"
    typo = _call(notebook, "execute_code", {"cod": "1"})
    assert "missing argument 'code'; unknown argument 'cod'" in typo and signature in typo
    wrong = _call(notebook, "edit_cell", {"cell_index": "two", "code": "1"})
    assert "'cell_index'" in wrong and "Signature: edit_cell(cell_index: int, code: str," in wrong
    shell = _call(build_shell_server(), "run_command", {"comand": "ls"})
    assert shell.startswith("Wrong arguments for run_command: missing argument 'command'")
    assert "Signature: run_command(command: str, timeout: float | None = None" in shell
    for message in (missing, typo, wrong, shell):
        assert "pydantic" not in message and "validation error" not in message


@pytest.mark.unit
def test_tool_descriptions_are_dedented() -> None:
    for server in (build_server(SessionRegistry())[0], build_shell_server()):
        for tool in asyncio.run(server.list_tools()):
            lines = (tool.description or "").splitlines()
            assert lines and not any(line.startswith(" ") for line in lines), (tool.name, lines)


@pytest.mark.unit
def test_instructions_describe_the_configured_session_and_its_models() -> None:
    configured = SessionRegistry(
        default_session_id="s-1",
        default_url="http://127.0.0.1:1/?token=t",
        sandbox_id="local-0123456789",
        notebook_path="notebooks/agent.ipynb",
        models_text="Loaded: `model` (tiny-gpt2) and `tokenizer`.",
    )
    text = instructions(configured)
    assert "s-1" in text and "notebooks/agent.ipynb" in text and "local-0123456789" in text
    assert "Loaded: `model` (tiny-gpt2)" in text and "do not load them again" in text
    assert "setup script" not in text and "no need to call attach_to_session" in text
    # With no session configured, the agent is told how to get one.
    assert "setup script" in instructions(SessionRegistry())


@pytest.mark.e2e
def test_a_call_without_session_id_goes_to_the_session_last_started_or_is_refused() -> None:
    with McpClient(SERVER, server_env()) as c:
        ids = []
        for name in ("first", "second"):
            started = c.call("start_new_session", {"name": name})
            assert not started.is_error, text(started)
            ids.append(text(started).split()[2].rstrip(":"))
        first, second = ids
        assert not c.call("execute_code", {"session_id": first, "code": "where = 'first'"}).is_error
        # The agent last started `second`: a call without session_id runs there.
        assert texts(c.call("execute_code", {"code": "'where' in globals()"}))[0] == "False"
        assert not c.call("attach_to_session", {"session_id": first, "jupyter_url": ""}).is_error
        assert texts(c.call("execute_code", {"code": "where"}))[0] == "'first'"
        # Shut down the chosen one: a call without session_id is refused, naming what is left.
        assert not c.call("shutdown_session", {}).is_error
        refused = c.call("execute_code", {"code": "1"})
        assert refused.is_error and f"Session {first!r}" in text(refused) and second in text(refused)
        assert texts(c.call("execute_code", {"session_id": second, "code": "2"}))[0] == "2"


@pytest.mark.e2e
def test_a_config_made_before_the_jupyter_server_restarted_finds_the_session_again() -> None:
    box = Sandbox(SandboxConfig(timeout=600)).start()
    try:
        session = create_notebook_session(box, name="phoenix", outputs_dir=False)
        config = session.mcp_config
        session.exec("before = 1")
        box.machine.stop_process("jupyter")  # the server dies, and the kernel with it
        restart_jupyter(box)
        session.reopen(box)  # the Python session carries on: a new Jupyter session, same notebook
        assert session.session_id != config["env"]["SEER_SESSION_ID"]
        with McpClient(config["args"], config["env"], command=config["command"]) as c:
            ran = c.call("execute_code", {"code": "'before' in globals(), 6 * 7"})
            assert texts(ran)[0] == "(False, 42)", text(ran)
            (row,) = json.loads(text(c.call("list_sessions")))
            assert row["session_id"] == session.session_id and row["notebook"] == "notebooks/phoenix.ipynb"
        session.sync()
        assert [c["source"] for c in session.cells][-1] == "'before' in globals(), 6 * 7"
        session.shutdown()
    finally:
        box.terminate()
