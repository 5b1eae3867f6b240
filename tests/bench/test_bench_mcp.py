"""The notebook MCP server against talking to the kernel by hand.

What each row means:

* ``execute_code "1+1" over stdio MCP``: an MCP client (the mcp SDK's own, over stdio) calls
  ``execute_code`` on ``python -m seer_mcp.notebook`` attached to a session, against a
  ``BlockingKernelClient`` on the *same* kernel (its connection file from the server's runtime
  directory): execute, wait for the reply and for the kernel to go idle. seer's extra: the JSON-RPC
  hop over stdio, the server's thread hand-offs, the Jupyter server and its websocket, and the
  notebook the cell is recorded in (written off the call's path). Target: at most 3x, and under
  15 ms.
* ``execute_code vs NotebookSession.exec``: the same call against ``session.exec("1+1")`` in this
  process, on the same kernel: what the MCP layer itself adds.
* ``initialize``: an MCP client (the SDK's own) starts ``python -m seer_mcp.notebook`` as a stdio
  subprocess and waits for the answer to ``initialize``, against a bare ``MCPServer`` with one
  trivial tool started the same way: what seer's server costs an agent's harness at start-up
  (its imports, building its tools). Target: under 1.5 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _harness import BenchReport, compare
from _kernels import raw_execute, raw_kernel_client

pytest.importorskip("jupyter_server")
pytest.importorskip("jupyter_client")
pytest.importorskip("websocket")
pytest.importorskip("mcp")
pytest.importorskip("seer_mcp")

from _mcp_client import McpClient, server_env, texts
from seer import Sandbox, SandboxConfig
from seer.execution import create_notebook_session

GROUP = "mcp"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    sandbox = Sandbox(SandboxConfig(timeout=900)).start()
    try:
        nb = create_notebook_session(sandbox, name="bench", outputs_dir=False)
        try:
            yield nb
        finally:
            nb.shutdown()
    finally:
        sandbox.terminate()


@pytest.fixture(scope="module")
def client(session: Any) -> Iterator[McpClient]:
    with McpClient(["-m", "seer_mcp.notebook"], server_env()) as c:
        attached = c.call(
            "attach_to_session", {"session_id": session.session_id, "jupyter_url": session.jupyter_url}
        )
        assert not attached.is_error, texts(attached)
        yield c


def _check(value: str | None) -> None:
    assert value == "2", value


def test_bench_execute_code_round_trip(bench_report: BenchReport, session: Any, client: McpClient) -> None:
    args = {"session_id": session.session_id, "code": "1+1"}
    with raw_kernel_client(session) as kc:
        # As after a setup script exits: nothing else listens to the kernel (the session reconnects
        # by itself when it runs a cell again).
        session._channels.close()

        def over_mcp() -> str | None:
            result = client.call("execute_code", args)
            assert not result.is_error, texts(result)
            return texts(result)[0]

        cmp = bench_report.add(
            GROUP,
            compare(
                'execute_code "1+1" over stdio MCP',
                seer=over_mcp,
                baseline=lambda: raw_execute(kc, "1+1"),
                repeat=100,
                warmup=5,
                check_seer=_check,
                check_baseline=_check,
                note="baseline: BlockingKernelClient on the same kernel (execute, reply, idle); "
                "target <= 3x and < 15 ms",
            ),
        )
        assert cmp.seer.median > 0 and cmp.baseline.median > 0


def test_bench_execute_code_vs_session_exec(
    bench_report: BenchReport, session: Any, client: McpClient
) -> None:
    args = {"session_id": session.session_id, "code": "1+1"}
    cmp = bench_report.add(
        GROUP,
        compare(
            "execute_code vs NotebookSession.exec",
            seer=lambda: texts(client.call("execute_code", args))[0],
            baseline=lambda: session.exec("1+1").result,
            repeat=60,
            warmup=5,
            check_seer=_check,
            check_baseline=_check,
            note="baseline: session.exec('1+1') in this process, same kernel: the MCP layer's cost",
        ),
    )
    assert cmp.seer.median > 0


#: The baseline server: the mcp SDK's own MCPServer with one trivial tool, on stdio.
BARE_SERVER = """\
from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def ping() -> str:
    \"\"\"Answer pong.\"\"\"
    return "pong"


server.run("stdio")
"""


def test_bench_initialize(bench_report: BenchReport, tmp_path: Any) -> None:
    bare = tmp_path / "bare_server.py"
    bare.write_text(BARE_SERVER)

    def started(args: list[str]) -> McpClient:  # returns once initialize was answered
        return McpClient(args, server_env())

    def stop(expected: str) -> Any:
        def check(client: McpClient) -> None:
            try:
                assert expected in {t.name for t in client.tools()}
            finally:
                client.close()

        return check

    cmp = bench_report.add(
        GROUP,
        compare(
            "initialize (spawn to initialized)",
            seer=lambda: started(["-m", "seer_mcp.notebook"]),
            baseline=lambda: started([str(bare)]),
            repeat=10,
            warmup=1,
            check_seer=stop("execute_code"),
            check_baseline=stop("ping"),
            note="baseline: a bare MCPServer with one tool, same SDK, same stdio start; target < 1.5 s",
        ),
    )
    assert cmp.seer.median > 0 and cmp.baseline.median > 0
