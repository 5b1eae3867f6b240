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
