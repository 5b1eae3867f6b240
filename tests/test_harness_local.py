"""A local session with each real agent client: the agent works in the session's directory with
its client's own shell (Claude Code's Bash, the OpenAI runner's ``run_shell``) and imports the
workspace's library there, as seed Pattern 4's agent does. The model is each runner's fake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from seer.execution import create_local_session
from seer.harness import run_agent_sync
from seer.workspace import Library, Workspace

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

COMMAND = "python -c 'import helpers; print(helpers.greet(\"agent\"))'"


@pytest.mark.parametrize("runner", ["openai", "claude"])
def test_a_local_sessions_agent_uses_its_directory(
    runner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seer.testing.model_api import Call, Say

    if runner == "openai":
        pytest.importorskip("agents", reason="openai-agents is not installed")
        from seer_openai.testing import FakeOpenAI as Fake

        shell, model = Call("run_shell", {"command": COMMAND}), None
    else:
        pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk is not installed")
        from seer_claude.runner import bundled_cli
        from seer_claude.testing import FakeAnthropic as Fake  # type: ignore[assignment]

        if bundled_cli() is None:
            pytest.skip("Claude Code is not here (not bundled, not on PATH)")
        shell, model = Call("Bash", {"command": COMMAND, "description": "greet"}), "claude-sonnet-4-5"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    monkeypatch.setenv("SEER_OUTPUTS_DIR", str(tmp_path / "outputs"))
    library = Library.from_code('def greet(name):\n    return f"hello {name}"\n', "helpers")
    session = create_local_session(
        Workspace(libraries=[library]), workspace_dir=tmp_path / "work", name="exp"
    )
    with Fake([shell, Say("It said hello.")]) as fake:
        for key, value in fake.env().items():
            monkeypatch.setenv(key, value)
        run = run_agent_sync("Greet", provider=runner, model=model, session=session, on_message=None)
    assert run.final is not None and run.final.stop_reason == "answered", run.final
    assert "hello agent" in fake.requests[1].result(), fake.requests[1].tool_results
    assert str(tmp_path / "work") in fake.requests[0].system, "the session's prompt names its directory"
    lines = [json.loads(line) for line in run.transcript_path.read_text().splitlines()]
    assert lines[0]["cwd"] == str(tmp_path / "work")
    assert any(line["kind"] == "tool_result" and "hello agent" in line["text"] for line in lines)
