"""The shell MCP server (``python -m seer_mcp.shell`` / ``seer mcp shell``), driven by the mcp SDK's
own stdio client against real local sandboxes (execution mode ``cli``): its tools, the output cap,
timeouts, and error texts for bad calls that leave the server running."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest
from _notebook_kit import local_sandbox
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from seer import Library, Sandbox, SandboxConfig, Workspace
from seer.execution import create_cli_session
from seer.sessions.shell import CliSession
from seer.state import seer_home
from seer_mcp.shell import DEFAULT_TIMEOUT, MAX_OUTPUT, TOOLS

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with local_sandbox(execution_mode="cli") as box:
        yield box


@pytest.fixture(scope="module")
def session(sandbox: Sandbox) -> CliSession:
    lib = Library.from_code(
        '"""Tools."""\n\ndef answer() -> int:\n    """The answer."""\n    return 42\n', "agent_tools"
    )
    return create_cli_session(sandbox, Workspace(libraries=[lib]))


def params(config: dict[str, Any]) -> StdioServerParameters:
    return StdioServerParameters(command=config["command"], args=config["args"], env=config["env"])


Body = Callable[[Client], Awaitable[None]]


def with_client(server: StdioServerParameters, body: Body) -> None:
    async def main() -> None:
        with anyio.fail_after(120):
            async with Client(server) as client:
                await body(client)

    anyio.run(main)


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    assert len(result.content) == 1
    return bool(result.is_error), result.content[0].text  # type: ignore[union-attr]


def test_tools_and_instructions(session: CliSession) -> None:
    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert sorted(tools) == sorted(TOOLS)
        assert set(tools["run_command"].input_schema["properties"]) == {"command", "timeout", "sandbox_id"}
        assert tools["run_command"].input_schema["required"] == ["command"]
        assert set(tools["read_file"].input_schema["properties"]) == {"path", "offset", "limit", "sandbox_id"}
        assert set(tools["write_file"].input_schema["required"]) == {"path", "content"}
        assert "required" not in tools["list_dir"].input_schema
        # The instructions are the session's prompt plus the tools' rules.
        instructions = client.instructions or ""
        assert session.prompt.strip() in instructions
        assert f"{MAX_OUTPUT:,} characters" in instructions and f"{DEFAULT_TIMEOUT:g} s" in instructions

    with_client(params(session.mcp_config), body)


def test_run_command_in_the_session(session: CliSession, sandbox: Sandbox) -> None:
    async def body(client: Client) -> None:
        error, text = await call(
            client, "run_command", command="python -c 'import agent_tools; print(agent_tools.answer())'"
        )
        assert (error, text) == (False, "42\n[exit code 0]")
        error, text = await call(client, "run_command", command="echo out; echo err >&2; exit 3")
        assert (error, text) == (False, "out\n[stderr]\nerr\n[exit code 3]")
        _, text = await call(client, "run_command", command="cd /tmp && export X=1")
        _, text = await call(client, "run_command", command='pwd; echo "X=$X"')
        assert text == f"{sandbox.workdir}\nX=\n[exit code 0]"

    with_client(params(session.mcp_config), body)


def test_long_output_is_cut_with_a_note(session: CliSession) -> None:
    async def body(client: Client) -> None:
        command = "python -c \"print('a' * 60000 + 'b' * 60000)\""
        error, text = await call(client, "run_command", command=command)
        assert not error
        assert len(text) < MAX_OUTPUT + 1000
        assert text.startswith("a" * 1000) and "b" * 1000 + "\n" in text  # the start and the end
        assert "[output cut: 70,001 of 120,001 characters not shown." in text
        assert "redirect the output to a file" in text and text.endswith("[exit code 0]")
        # What the note says to do works.
        await call(client, "run_command", command=f"{command} > big.txt 2>&1")
        error, text = await call(client, "read_file", path="big.txt")
        assert not error and "output cut at 50,000 characters inside line 1" in text

    with_client(params(session.mcp_config), body)


def test_a_timeout_is_an_error_with_the_output_so_far_and_the_server_goes_on(session: CliSession) -> None:
    async def body(client: Client) -> None:
        error, text = await call(client, "run_command", command="echo started; sleep 30", timeout=1)
        assert error
        assert "started" in text and "timed out after 1 s" in text and "nohup" in text
        error, text = await call(client, "run_command", command="echo still here", timeout=0)
        assert error and "timeout must be a positive number" in text
        assert await call(client, "run_command", command="echo still here") == (
            False,
            "still here\n[exit code 0]",
        )

    with_client(params(session.mcp_config), body)


def test_files(session: CliSession, sandbox: Sandbox) -> None:
    async def body(client: Client) -> None:
        lines = "".join(f"line {i}\n" for i in range(1, 101))
        error, text = await call(client, "write_file", path="data/lines.txt", content=lines)
        assert (error, text) == (False, f"wrote 792 bytes to {sandbox.workdir}/data/lines.txt")
        assert await call(client, "read_file", path="data/lines.txt") == (False, lines)
        error, text = await call(client, "read_file", path="data/lines.txt", offset=98, limit=2)
        assert (error, text) == (False, "line 98\nline 99\n[lines 98-99 of 100; read on with offset=100]")
        _, text = await call(client, "read_file", path=f"{sandbox.workdir}/data/lines.txt", offset=100)
        assert text == "line 100\n[lines 100-100 of 100]"
        _, text = await call(client, "read_file", path="data/lines.txt", offset=500)
        assert text == "[the file has 100 lines; offset 500 is past its end]"
        await call(client, "write_file", path="data/empty.txt", content="")
        assert await call(client, "read_file", path="data/empty.txt") == (False, "[the file is empty]")
        await call(client, "run_command", command="printf 'a\\0b' > data/blob.bin")
        error, text = await call(client, "read_file", path="data/blob.bin")
        assert error and "binary file (3 bytes)" in text
        error, text = await call(client, "list_dir", path="data")
        assert not error
        assert text.splitlines() == [
            f"{sandbox.workdir}/data: 3 entries (dirs end in '/', links in '@')",
            "blob.bin  (3 bytes)",
            "empty.txt  (0 bytes)",
            "lines.txt  (792 bytes)",
        ]

    with_client(params(session.mcp_config), body)


def test_bad_calls_get_clear_errors_and_the_server_goes_on(session: CliSession, sandbox: Sandbox) -> None:
    async def body(client: Client) -> None:
        checks: list[tuple[str, dict[str, Any], str]] = [
            ("read_file", {"path": "missing.txt"}, f"no such file: '{sandbox.workdir}/missing.txt'"),
            ("read_file", {"path": "."}, "is a directory; use list_dir"),
            ("read_file", {"path": "x", "offset": 0}, "offset is a line number"),
            ("read_file", {"path": "x", "limit": 0}, "limit is a number of lines"),
            ("list_dir", {"path": "nowhere"}, f"no directory '{sandbox.workdir}/nowhere'"),
            ("run_command", {"command": "  "}, "command is empty"),
            ("write_file", {"path": "", "content": "x"}, "a path must be a non-empty string"),
            ("run_command", {"command": "true", "sandbox_id": "local-doesnotexist"}, "unknown sandbox"),
        ]
        for tool, arguments, expected in checks:
            error, text = await call(client, tool, **arguments)
            assert error and expected in text, (tool, arguments, text)
        assert await call(client, "run_command", command="echo ok") == (False, "ok\n[exit code 0]")

    with_client(params(session.mcp_config), body)


def test_a_server_without_a_sandbox_takes_one_per_call(sandbox: Sandbox) -> None:
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "seer_mcp.shell"], env={"SEER_HOME": str(seer_home())}
    )

    async def body(client: Client) -> None:
        assert "pass sandbox_id" in (client.instructions or "")
        error, text = await call(client, "list_dir")
        assert error and "no sandbox: pass sandbox_id" in text
        error, text = await call(client, "run_command", command="pwd", sandbox_id=sandbox.sandbox_id)
        assert (error, text) == (False, f"{sandbox.workdir}\n[exit code 0]")

    with_client(server, body)


def test_seer_mcp_shell_command_and_a_terminated_sandbox() -> None:
    box = Sandbox(SandboxConfig(execution_mode="cli")).start()
    try:
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "seer", "mcp", "shell", "--sandbox", box.sandbox_id],
            env={"SEER_HOME": str(seer_home())},
        )

        async def body(client: Client) -> None:
            assert await call(client, "run_command", command="echo via cli") == (
                False,
                "via cli\n[exit code 0]",
            )
            box.terminate()
            error, text = await call(client, "run_command", command="echo gone")
            assert error and box.sandbox_id in text and "terminated" in text
            error, text = await call(client, "list_dir")
            assert error and "terminated" in text

        with_client(server, body)
    finally:
        box.terminate()


def test_an_unknown_sandbox_at_start_up_is_reported_not_fatal() -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "seer_mcp.shell"],
        env={"SEER_HOME": str(seer_home()), "SEER_SHELL_SANDBOX_ID": "local-nosuchbox"},
    )

    async def body(client: Client) -> None:
        assert "local-nosuchbox" in (client.instructions or "")
        error, text = await call(client, "run_command", command="true")
        assert error and "unknown sandbox 'local-nosuchbox'" in text

    with_client(server, body)


def test_a_long_command_sends_progress_with_its_latest_output(session: CliSession) -> None:
    """While a command runs, run_command's progress notifications carry how long it has run and
    its latest output lines (stdout and stderr as they come), so a long job is visibly alive."""
    # Each line is printed a while before the next, so several notifications see the output grow.
    command = (
        "for i in 1 2 3 4; do echo line-$i; echo warn-$i >&2; sleep 1; done; printf 'step 1\\rstep 2\\rdone'"
    )
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async def body(client: Client) -> None:
        result = await client.call_tool("run_command", {"command": command}, None, on_progress)
        assert not result.is_error
        answer = result.content[0].text  # type: ignore[union-attr]
        assert "line-4" in answer and answer.endswith("[exit code 0]")

    with_client(params(session.mcp_config), body)
    messages = [m or "" for _, m in seen]
    assert len(messages) >= 2, messages
    assert all(m.startswith("running for ") for m in messages)
    # the notifications carry the output as it came: early lines first, later ones later
    assert any("line-1" in m for m in messages)
    assert any("line-3" in m and "warn-3" in m for m in messages)
    progress = [p for p, _ in seen]
    assert progress == sorted(progress) and progress[-1] >= 2
