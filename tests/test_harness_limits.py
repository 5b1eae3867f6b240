"""The harness's limits with each real agent client: a scripted agent that never stops (it loads a
skill on every turn) ends at ``max_turns`` and at the wall-clock limit with a clear final message;
``seer agent run`` interrupted with Ctrl-C exits 130, keeps the transcript and leaves no process
behind. The model is each runner's fake on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from seer.harness import run_agent_sync
from seer.testing.model_api import FakeModelServer, forever
from seer.workspace import Skill

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SKILL = Skill("probe", "How to probe", "Probe it.")


@dataclass
class Client:
    runner: str
    fake: Callable[..., FakeModelServer]
    spin: Callable[[Any], Any]  # the step that loads the skill again, for ever
    model: str | None = None


def _openai() -> Client:
    pytest.importorskip("agents", reason="openai-agents is not installed")
    from seer_openai.testing import FakeOpenAI

    return Client("openai", FakeOpenAI, lambda: forever("load_skill", {"name": SKILL.name}))


def _claude() -> Client:
    pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk is not installed")
    from seer_claude.runner import bundled_cli
    from seer_claude.testing import FakeAnthropic

    if bundled_cli() is None:
        pytest.skip("Claude Code is not here (not bundled, not on PATH)")
    return Client(
        "claude",
        FakeAnthropic,
        lambda: forever("Skill", {"skill": f"seer:{SKILL.name}"}),
        "claude-sonnet-4-5",
    )


@pytest.fixture(params=["openai", "claude"])
def client(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Client]:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    monkeypatch.setenv("SEER_OUTPUTS_DIR", str(tmp_path / "outputs"))
    yield _openai() if request.param == "openai" else _claude()


def _serve(client: Client, monkeypatch: pytest.MonkeyPatch, delay: float = 0.0) -> FakeModelServer:
    fake = client.fake([client.spin()], delay=delay)
    fake.script = [client.spin()] * 10_000
    fake.start()
    for key, value in fake.env().items():  # type: ignore[attr-defined]
        monkeypatch.setenv(key, value)
    return fake


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_max_turns_ends_a_never_stopping_agent(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _serve(client, monkeypatch)
    try:
        run = run_agent_sync(
            "Probe for ever", provider=client.runner, model=client.model, skills=[SKILL], max_turns=3,
            timeout=120, on_message=None,
        )  # fmt: skip
    finally:
        fake.stop()
    assert run.final is not None and run.final.stop_reason == "max_turns"
    assert run.final.text == "Stopped: the agent used its 3 turns (max_turns) without a final answer."
    assert len(fake.requests) == 3, "the client asked the model exactly max_turns times"
    lines = _lines(run.transcript_path)
    assert [line["kind"] for line in lines].count("tool_result") >= 2
    assert lines[-1]["kind"] == "final" and lines[-1]["stop_reason"] == "max_turns"


def test_the_wall_clock_limit_ends_a_never_stopping_agent(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _serve(client, monkeypatch, delay=0.3)
    try:
        began = time.monotonic()
        run = run_agent_sync(
            "Probe for ever", provider=client.runner, model=client.model, skills=[SKILL], max_turns=10_000,
            timeout=6, on_message=None,
        )  # fmt: skip
        took = time.monotonic() - began
    finally:
        fake.stop()
    assert run.final is not None and run.final.stop_reason == "timeout"
    assert run.final.text == "Stopped: the wall-clock limit of 6 s passed."
    assert took < 30, f"the run went on for {took:.0f}s past a 6 s limit"
    assert _lines(run.transcript_path)[-1]["stop_reason"] == "timeout"


def _session_processes(sid: int) -> list[str]:
    out = subprocess.run(["ps", "-e", "-o", "sid=,pid=,args="], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line.split()[0] == str(sid)]


def test_ctrl_c_on_seer_agent_run_keeps_the_transcript(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _serve(client, monkeypatch, delay=0.2)
    skill_dir = SKILL.install_into(tmp_path / "skills")
    (tmp_path / "task.txt").write_text("Probe for ever\n")
    setup = {
        "provider": client.runner,
        "skills": [str(skill_dir)],
        "outputs_dir": "runs",
        "max_turns": 10_000,
    }
    if client.model:
        setup["model"] = client.model
    (tmp_path / "setup.yaml").write_text(json.dumps(setup))
    proc = subprocess.Popen(
        [sys.executable, "-m", "seer", "agent", "run", "task.txt", "--setup", "setup.yaml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        runs = tmp_path / "runs"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            done = (
                [p for p in runs.glob("*.jsonl") if '"tool_result"' in p.read_text()] if runs.is_dir() else []
            )
            if done:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal signals the foreground group
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        fake.stop()
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err
    (transcript,) = runs.glob("*.jsonl")
    lines = _lines(transcript)
    assert "tool_result" in [line["kind"] for line in lines]
    assert lines[-1]["kind"] == "final" and lines[-1]["stop_reason"] == "cancelled"
    assert (runs / transcript.name.replace(".jsonl", ".md")).read_text().count("## Final") == 1
    deadline = time.monotonic() + 10
    while _session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _session_processes(proc.pid), "the agent client or an MCP server outlived the run"
