"""The ``claude`` runner end to end: the real Claude Agent SDK driving the real Claude Code (the
binary its wheel bundles), the real MCP servers (seer's notebook server on a notebook session with
the tiny model, an interface served from a scoped sandbox), and a fake of the Anthropic Messages
API on 127.0.0.1 playing the agent, streamed as Claude Code asks (seer_claude.testing)."""

from __future__ import annotations

from pathlib import Path

import _agent_kit
import pytest
from _agent_kit import SKILL, Workbench, check_run, script
from seer.harness import run_agent_sync
from seer.testing.model_api import Call

pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk is not installed")

from seer_claude.runner import bundled_cli
from seer_claude.testing import FakeAnthropic

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(bundled_cli() is None, reason="Claude Code is not here (not bundled, not on PATH)"),
]

workbench = _agent_kit.workbench  # the fixture


@pytest.fixture
def claude_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Claude Code's own state in a folder of the test's (not the user's ~/.claude)."""
    home = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    return home


def test_a_scripted_agent_works_through_the_session_tools_and_skill(
    workbench: Workbench, claude_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
