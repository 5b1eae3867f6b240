"""The ``openai`` runner end to end: the real OpenAI Agents SDK, the real MCP servers (seer's
notebook server on a notebook session with the tiny model, an interface served from a scoped
sandbox), and a fake of the OpenAI API on 127.0.0.1 playing the agent (seer_openai.testing)."""

from __future__ import annotations

import _agent_kit
import pytest
from _agent_kit import SKILL, Workbench, check_run, script
from seer.harness import run_agent_sync
from seer.testing.model_api import Call

pytest.importorskip("agents", reason="openai-agents is not installed")

from seer_openai.testing import FakeOpenAI

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

workbench = _agent_kit.workbench  # the fixture


def test_a_scripted_agent_works_through_the_session_tools_and_skill(
    workbench: Workbench,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
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
