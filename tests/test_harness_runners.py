"""Each agent runner end to end: the real agent SDK (the OpenAI Agents SDK; the Claude Agent SDK
driving the Claude Code its wheel bundles), the real MCP servers (seer's notebook server on a
notebook session with the tiny model, an interface served from a scoped sandbox), and a fake of the
runner's model API on 127.0.0.1 playing the agent (``seer_openai.testing``,
``seer_claude.testing``; Claude Code's requests are streamed, and answered in kind).

The scripted agent attaches to the notebook session, runs a cell that uses ``model``, reads the
notebook back, calls the interface's MCP tool, loads the skill the workspace installed and answers
(tests/_agent_kit.py); each tool's result must reach the fake in the next request, the cell must be
in the notebook, and the transcript must hold every step with no secret in it. One notebook sandbox
and one scoped sandbox serve both runners."""

from __future__ import annotations

from pathlib import Path

import _agent_kit
import pytest
from _agent_kit import SKILL, Workbench, check_run, script
from seer.harness import run_agent_sync
from seer.testing.model_api import Call

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

workbench = _agent_kit.workbench  # the fixture


def test_openai(workbench: Workbench, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("agents", reason="openai-agents is not installed")
    from seer_openai.testing import FakeOpenAI

    steps = script(
        lambda server, tool: tool, workbench.notebook.session_id, Call("load_skill", {"name": SKILL.name})
    )
    with FakeOpenAI(steps) as fake:
        for key, value in fake.env().items():
            monkeypatch.setenv(key, value)
        run = run_agent_sync(
            "Probe the model's layers",
            provider="openai",
            session=workbench.notebook,
            mcp_servers=[workbench.tools],
            max_turns=10,
            timeout=240,
            on_message=None,
        )
    check_run(run, fake, workbench)


def test_claude(workbench: Workbench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk is not installed")
    from seer_claude.runner import bundled_cli
    from seer_claude.testing import FakeAnthropic

    if bundled_cli() is None:
        pytest.skip("Claude Code is not here (not bundled, not on PATH)")
    # Claude Code's own state goes to a folder of the test's, not the user's ~/.claude.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    steps = script(
        lambda server, tool: f"mcp__{server}__{tool}",
        workbench.notebook.session_id,
        Call("Skill", {"skill": f"seer:{SKILL.name}"}),
    )
    with FakeAnthropic(steps) as fake:
        for key, value in fake.env().items():
            monkeypatch.setenv(key, value)
        run = run_agent_sync(
            "Probe the model's layers",
            provider="claude",
            model="claude-sonnet-4-5",
            session=workbench.notebook,
            mcp_servers=[workbench.tools],
            max_turns=10,
            timeout=240,
            on_message=None,
        )
    tools = set(fake.requests[0].tools)
    assert "mcp__notebook__execute_code" in tools and "mcp__probe_tools__triple" in tools
    assert not tools & {"Bash", "Read", "Write", "Edit", "WebFetch", "WebSearch"}, sorted(tools)
    assert fake.requests[0].body.get("stream") is True, "Claude Code streams; the fake answered in kind"
    check_run(run, fake, workbench)


def test_seer_agent_run_attaches_to_the_notebook_session(workbench: Workbench, tmp_path: Path) -> None:
    """``seer agent run`` with a setup file naming the notebook session (what a setup script
    prints): the agent's cell lands in that notebook, and nothing printed holds a secret."""
    pytest.importorskip("agents", reason="openai-agents is not installed")
    import json
    import os
    import subprocess
    import sys

    from seer.testing.model_api import Say
    from seer_openai.testing import FakeOpenAI

    session_id = workbench.notebook.session_id
    cell = "print('from seer agent run', 6 * 7)"
    (tmp_path / "task.txt").write_text("Compute 6 * 7 in the notebook.\n")
    setup = {
        "provider": "openai",
        "notebook": {"session_id": session_id, "jupyter_url": workbench.notebook.jupyter_url},
        "mcp_servers": [workbench.tools],
        "outputs_dir": "runs",
        "max_turns": 5,
    }
    (tmp_path / "setup.json").write_text(json.dumps(setup))
    script = [Call("execute_code", {"session_id": session_id, "code": cell}), Say("It is 42.")]
    with FakeOpenAI(script) as fake:
        out = subprocess.run(
            [sys.executable, "-m", "seer", "agent", "run", "task.txt", "--setup", "setup.json"],
            cwd=tmp_path,
            env={**os.environ, **fake.env()},
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "from seer agent run 42" in fake.requests[1].result()
    lines = out.stdout.splitlines()
    assert lines[-2] == "[final: answered] It is 42." and lines[-1].startswith("transcript: ")
    transcript = Path(lines[-1].removeprefix("transcript: "))
    assert transcript.parent == tmp_path / "runs" and transcript.is_file()
    for secret in workbench.secrets:
        assert secret not in out.stdout and secret not in out.stderr and secret not in transcript.read_text()
    notebook = json.loads(Path(workbench.notebook.local_path).read_text())
    assert any("".join(c["source"]) == cell for c in notebook["cells"]), (
        "the cell is in the session's notebook"
    )


def test_a_cancelled_run_leaves_the_sandbox_notebook_and_transcript(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cancel()`` mid-run (the agent would run cells for ever): the agent stops, the sandbox
    still works, the cells it ran are in the notebook, the transcript ends with the cancel."""
    pytest.importorskip("agents", reason="openai-agents is not installed")
    import asyncio
    import json

    from seer.harness import run_agent
    from seer.testing.model_api import forever
    from seer_openai.testing import FakeOpenAI

    session_id = workbench.notebook.session_id
    cell = "print('cancel me', 40 + 2)"
    with FakeOpenAI([forever("execute_code", {"session_id": session_id, "code": cell})], delay=0.2) as fake:
        for key, value in fake.env().items():
            monkeypatch.setenv(key, value)
        run = run_agent("Run cells for ever", provider="openai", session=workbench.notebook, max_turns=1000)

        async def watch() -> None:
            async for message in run:
                if message.kind == "tool_result":
                    run.cancel()

        asyncio.run(watch())
    assert run.final is not None and run.final.stop_reason == "cancelled"
    assert "cancel me 42" in next(m.text for m in run.messages if m.kind == "tool_result")
    lines = [json.loads(line) for line in run.transcript_path.read_text().splitlines()]
    assert lines[-1]["kind"] == "final" and lines[-1]["stop_reason"] == "cancelled"
    assert workbench.notebook.sandbox.exec("echo alive").stdout.strip() == "alive"
    notebook = json.loads(Path(workbench.notebook.local_path).read_text())
    assert any("".join(c["source"]) == cell for c in notebook["cells"])
