"""The agent harness (seer.harness) with runners written here: registration through the
``seer_register_agent_runners`` hook, the transcript, secrets kept out of it, the limits
(``max_turns``, wall clock), cancelling, and argument errors. The runners on real agent SDKs are
tested end to end in their own distributions (plugins/openai, plugins/claude)."""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
import time
from pathlib import Path

import pytest
from seer import plugins
from seer.errors import ConfigError, UnknownPluginError
from seer.harness import AgentMessage, AgentRunError, run_agent, run_agent_sync
from seer.workspace import Skill

pytestmark = pytest.mark.unit

RUNNERS = '''
import asyncio
import seer
from seer.harness import AgentMessage, AgentRunner


class Echo(AgentRunner):
    """Calls one tool with the task, then answers with what the skill says."""

    name = "echo"
    description = "a runner for the tests"
    default_model = "echo-1"

    async def run(self, setup, emit):
        emit(AgentMessage("assistant", "let me look"))
        arguments = {"text": setup.task, "server": sorted(setup.mcp_servers)}
        emit(AgentMessage("tool_call", tool="shout", arguments=arguments, call_id="c1"))
        said = setup.task.upper() + " " + setup.options.get("leak", "")
        emit(AgentMessage("tool_result", said, tool="shout", call_id="c1", duration=0.01))
        skills = ", ".join(f"{s.name}: {s.body.splitlines()[-1]}" for s in setup.skills.values())
        emit(AgentMessage("assistant", "done"))
        answer = f"answer ({setup.model}; {skills}; cwd has skills dir: {setup.skills_dir.is_dir()})"
        emit(AgentMessage("final", answer, stop_reason="answered"))


class Forever(AgentRunner):
    """Calls a tool on every turn and never stops (the harness must)."""

    name = "forever"

    async def run(self, setup, emit):
        while True:
            emit(AgentMessage("assistant", ""))
            emit(AgentMessage("tool_call", tool="spin", arguments={}))
            await asyncio.sleep(0.01)
            emit(AgentMessage("tool_result", "again", tool="spin", duration=0.01))


class Sleeper(AgentRunner):
    """Thinks for ever; records that it was cancelled."""

    name = "sleeper"
    cancelled = []

    async def run(self, setup, emit):
        emit(AgentMessage("assistant", "thinking"))
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            Sleeper.cancelled.append(True)
            raise


class Burst(AgentRunner):
    """Emits a whole turn at once, then thinks for ever; remembers its scratch folder."""

    name = "burst"
    seen = []

    async def run(self, setup, emit):
        Burst.seen.append(setup.skills_dir)
        emit(AgentMessage("assistant", "calling"))
        emit(AgentMessage("tool_call", tool="t", arguments={}, call_id="c"))
        emit(AgentMessage("tool_result", "done", tool="t", call_id="c"))
        await asyncio.sleep(3600)


class Broken(AgentRunner):
    name = "broken"

    async def run(self, setup, emit):
        emit(AgentMessage("assistant", "about to fail"))
        raise RuntimeError("the model endpoint said no (key sk-test-secret-123456)")


class CtrlC(AgentRunner):
    """Its client ends with an error because of the same Ctrl-C that reaches seer (a terminal
    signals the whole foreground process group): SIGINT, then the client's failure at once."""

    name = "ctrl-c"

    async def run(self, setup, emit):
        import os, signal
        emit(AgentMessage("assistant", "working"))
        os.kill(os.getpid(), signal.SIGINT)
        raise RuntimeError("the agent client ended with error_during_execution")


class CtrlCMidTurn(AgentRunner):
    """Ctrl-C lands in the very step that hands a message over (the agent client lives in this
    process and goes on answering): the run must still stop."""

    name = "ctrl-c-mid-turn"

    async def run(self, setup, emit):
        import os, signal
        emit(AgentMessage("assistant", "working"))
        os.kill(os.getpid(), signal.SIGINT)
        while True:
            emit(AgentMessage("tool_result", "again", tool="spin"))
            await asyncio.sleep(0.01)


class SlowToClose(AgentRunner):
    """Its client takes far too long to close when cancelled (a read that never ends)."""

    name = "slow-to-close"

    async def run(self, setup, emit):
        emit(AgentMessage("assistant", "working"))
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await asyncio.sleep(3600)
            raise


class Missing(AgentRunner):
    name = "missing"

    @classmethod
    def availability(cls):
        from seer.harness import Availability
        return Availability(False, "its SDK is not installed")

    async def run(self, setup, emit):
        raise AssertionError("never run")


@seer.hookimpl
def seer_register_agent_runners(register):
    for cls in (Echo, Forever, Sleeper, Burst, Broken, CtrlC, CtrlCMidTurn, SlowToClose, Missing):
        register(cls)
'''


@pytest.fixture
def runners(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_plugins: None) -> Path:
    """The runners above, installed as a third-party plugin distribution (``seer-test-runners``)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "seer_test_runners.py").write_text(textwrap.dedent(RUNNERS))
    info = site / "seer_test_runners-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: seer-test-runners\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[seer]\ntest_runners = seer_test_runners\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("SEER_OUTPUTS_DIR", str(tmp_path / "outputs"))
    plugins.reset()
    return tmp_path


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_plugin_registers_an_agent_runner(runners: Path) -> None:
    reg = plugins.agent_runners()["echo"]
    assert (reg.plugin, reg.distribution) == ("test_runners", "seer-test-runners")
    entry = {p.name: p for p in plugins.loaded_plugins()}["test_runners"]
    assert "seer_register_agent_runners" in entry.hooks
    assert plugins.get_agent_runner("echo").description == "a runner for the tests"


def test_an_unknown_runner_names_the_extra_to_install(
    fresh_plugins: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEER_DISABLE_PLUGINS", "claude,openai")
    plugins.reset()
    with pytest.raises(UnknownPluginError) as err:
        run_agent("hi", provider="claude")
    assert "no agent runner named 'claude'" in str(err.value)
    assert 'pip install "seer[claude]' in str(err.value)


def test_a_run_yields_every_step_and_writes_the_transcript(runners: Path) -> None:
    skill = Skill("probe", "how to probe", "Step one.\nLast line of the skill.")
    run = run_agent(
        "find the thing",
        provider="echo",
        prompts=["Work carefully."],
        skills=[skill],
        mcp_servers=[{"command": "true", "env": {"SEER_RPC_TOKEN": "tok-abcdef-123456"}, "name": "tools"}],
        options={"leak": "tok-abcdef-123456"},
    )

    async def collect() -> list[AgentMessage]:
        return [m async for m in run]

    messages = asyncio.run(collect())
    assert [m.kind for m in messages] == [
        "system", "user", "assistant", "tool_call", "tool_result", "assistant", "final",
    ]  # fmt: skip
    system = messages[0].text
    assert "Work carefully." in system and "**probe**: how to probe" in system
    assert messages[1].text == "find the thing"
    assert [m.turn for m in messages] == [0, 0, 1, 1, 1, 2, 2]
    assert run.final is messages[-1] and run.final.stop_reason == "answered"
    assert run.final.text == "answer (echo-1; probe: Last line of the skill.; cwd has skills dir: True)"
    assert str(messages[3]) == "[tool_call] shout(text='find the thing', server=['tools'])"
    assert messages[4].text == "FIND THE THING [redacted]", "what the caller gets is redacted too"

    folder = runners / "outputs" / "agent-runs"
    assert run.transcript_path.parent == folder and run.markdown_path.parent == folder
    lines = _lines(run.transcript_path)
    assert lines[0]["kind"] == "run" and lines[0]["runner"] == "echo" and lines[0]["mcp_servers"] == ["tools"]
    assert [line["kind"] for line in lines[1:]] == [m.kind for m in messages]
    assert lines[5]["text"] == "FIND THE THING [redacted]" and lines[5]["duration"] == 0.01
    for path in (run.transcript_path, run.markdown_path):
        assert "tok-abcdef-123456" not in path.read_text()
    markdown = run.markdown_path.read_text()
    assert "## Task\n\nfind the thing" in markdown and "**Tool call** `shout`" in markdown
    assert "## Final (answered" in markdown


def test_max_turns_ends_a_never_stopping_agent(runners: Path) -> None:
    run = run_agent_sync("spin", provider="forever", max_turns=3, on_message=None)
    assert run.final is not None and run.final.stop_reason == "max_turns"
    assert run.final.text == "Stopped: the agent used its 3 turns (max_turns) without a final answer."
    assert [m.turn for m in run.messages if m.kind == "assistant"] == [1, 2, 3]
    assert _lines(run.transcript_path)[-1]["stop_reason"] == "max_turns"


def test_the_wall_clock_limit_ends_a_run_and_cancels_the_runner(runners: Path) -> None:
    run = run_agent_sync("think", provider="sleeper", timeout=0.5, on_message=None)
    assert run.final is not None and run.final.stop_reason == "timeout"
    assert run.final.text == "Stopped: the wall-clock limit of 0.5 s passed."
    assert plugins.get_agent_runner("sleeper").cancelled == [True]  # type: ignore[attr-defined]
    assert [line["kind"] for line in _lines(run.transcript_path)][-2:] == ["assistant", "final"]


def test_cancel_stops_the_run_and_keeps_the_transcript(runners: Path) -> None:
    run = run_agent("think", provider="sleeper")
    seen: list[str] = []

    def on_message(message: AgentMessage) -> None:
        seen.append(message.kind)
        if message.kind == "assistant":
            threading.Timer(0.05, run.cancel).start()  # from another thread, as a UI would

    async def go() -> None:
        async for message in run:
            on_message(message)

    asyncio.run(go())
    assert seen == ["system", "user", "assistant", "final"]
    assert run.final is not None and run.final.stop_reason == "cancelled"
    assert _lines(run.transcript_path)[-1]["stop_reason"] == "cancelled"


def test_leaving_the_loop_early_still_ends_the_transcript(runners: Path) -> None:
    run = run_agent("think", provider="sleeper")

    async def go() -> None:
        messages = run.__aiter__()
        async for message in messages:
            if message.kind == "assistant":
                break
        await run.aclose()

    asyncio.run(go())
    last = _lines(run.transcript_path)[-1]
    assert last["kind"] == "final" and last["stop_reason"] == "cancelled"
    assert last["text"] == "Stopped: the run was interrupted."


def test_a_failing_client_ends_with_an_error_in_the_record(
    runners: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOME_API_KEY", "sk-test-secret-123456")
    with pytest.raises(AgentRunError, match="the model endpoint said no"):
        run_agent_sync("x", provider="broken", on_message=None)
    (path,) = (runners / "outputs" / "agent-runs").glob("*.jsonl")
    last = _lines(path)[-1]
    assert last["stop_reason"] == "error" and "RuntimeError" in last["text"]
    assert "sk-test-secret-123456" not in path.read_text()


def test_bad_arguments_are_refused_before_anything_runs(runners: Path) -> None:
    with pytest.raises(ConfigError) as err:
        run_agent("", provider="echo", max_turns=0, timeout=-1, prompts=[Path("/no/such/methodology.md")])
    assert err.value.fields == ["task", "max_turns", "timeout", "prompts[0]"]
    with pytest.raises(ConfigError, match="mcp_servers"):
        run_agent("x", provider="echo", mcp_servers=[{"args": ["no command"]}])
    with pytest.raises(ConfigError, match="expected a notebook, CLI or local session"):
        run_agent("x", provider="echo", session=object())
    with pytest.raises(ConfigError, match="'missing' cannot run here: its SDK is not installed"):
        run_agent("x", provider="missing")
    assert not (runners / "outputs").exists(), "nothing is written for a refused run"


def test_a_local_session_gives_its_directory_servers_and_skills(runners: Path) -> None:
    from seer.execution import create_local_session
    from seer.workspace import Workspace

    session = create_local_session(
        Workspace(
            skills=[Skill("notes", "how to take notes", "Write them down.")],
            mcp_servers=[{"command": "true", "name": "calc"}],
        ),
        workspace_dir=runners / "work",
        name="exp",
    )
    run = run_agent_sync("x", provider="echo", session=session, on_message=None)
    assert run.final is not None and "notes: Write them down." in run.final.text
    header = _lines(run.transcript_path)[0]
    assert header["mcp_servers"] == ["calc"] and header["cwd"] == str(runners / "work")
    assert run.transcript_path.parent == runners / "outputs" / "exp" / "agent-runs"
    assert "work" in run.messages[0].text


def test_seer_agent_run_from_a_task_file_and_a_setup_file(
    runners: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seer.cli import create_app
    from typer.testing import CliRunner

    (runners / "method.md").write_text("Be thorough.")
    Skill("probe", "how to probe", "Last line of the skill.").install_into(runners / "skills")
    (runners / "task.txt").write_text("find the thing\n")
    (runners / "setup.yaml").write_text(
        "provider: echo\nprompts: [method.md]\nskills: [skills/probe]\nmax_turns: 5\noutputs_dir: runs\n"
    )
    monkeypatch.chdir(runners)
    result = CliRunner().invoke(create_app(), ["agent", "run", "task.txt", "--setup", "setup.yaml"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-2].startswith("[final: answered] answer (echo-1; probe: Last line of the skill.")
    (path,) = (runners / "runs").glob("*.jsonl")
    assert lines[-1] == f"transcript: {path}"
    assert "Be thorough." in _lines(path)[1]["text"]

    stopped = CliRunner().invoke(
        create_app(), ["agent", "run", "task.txt", "-p", "forever", "--max-turns", "2"]
    )
    assert stopped.exit_code == 3 and "[final: max_turns]" in stopped.output

    (runners / "bad.yaml").write_text("provider: echo\nturns: 5\n")
    bad = CliRunner().invoke(create_app(), ["agent", "run", "task.txt", "--setup", "bad.yaml"])
    assert bad.exit_code == 2
    assert "turns: unknown setting" in bad.output and "bad.yaml" in bad.output


def test_what_the_runner_emitted_before_a_cancel_is_recorded(runners: Path) -> None:
    run = run_agent("go", provider="burst")

    async def go() -> list[str]:
        kinds = []
        async for message in run:
            kinds.append(message.kind)
            if message.kind == "assistant":
                run.cancel()  # the tool call and its result are still queued
        return kinds

    assert asyncio.run(go()) == ["system", "user", "assistant", "tool_call", "tool_result", "final"]
    assert [line["kind"] for line in _lines(run.transcript_path)][-3:] == [
        "tool_call",
        "tool_result",
        "final",
    ]
    (scratch,) = plugins.get_agent_runner("burst").seen  # type: ignore[attr-defined]
    assert not scratch.parent.exists(), "the run's scratch folder (skills, working directory) is removed"


def test_ctrl_c_that_also_ends_the_agent_client_is_an_interruption(runners: Path) -> None:
    """The client's failure caused by the same Ctrl-C is reported as Ctrl-C (KeyboardInterrupt:
    `seer agent run` exits 130), not as the client failing (exit 1)."""
    assert threading.current_thread() is threading.main_thread()
    import signal

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        run_agent_sync("go", provider="ctrl-c", on_message=None)
    assert signal.getsignal(signal.SIGINT) is before  # the handler is put back
    # without a Ctrl-C, a client's failure is still a failure
    with pytest.raises(AgentRunError):
        run_agent_sync("go", provider="broken", on_message=None)


def test_ctrl_c_while_a_message_is_handed_over_still_stops_the_run(runners: Path) -> None:
    """Ctrl-C that cancels the run in the step where a message arrives is not lost (Python 3.11's
    ``asyncio.wait_for`` returns the message and drops the cancel): the agent client in this
    process would go on until the wall-clock limit."""
    assert threading.current_thread() is threading.main_thread()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_agent_sync("go", provider="ctrl-c-mid-turn", on_message=None, timeout=30)
    assert time.monotonic() - began < 15, "the run went on after Ctrl-C"
    (path,) = (runners / "outputs" / "agent-runs").glob("*.jsonl")
    last = _lines(path)[-1]
    assert last["kind"] == "final" and last["stop_reason"] == "cancelled"


def test_a_client_slow_to_close_does_not_hold_up_a_cancel(
    runners: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness waits a bounded time (``CLOSE_GRACE``) for a cancelled client to end, then
    ends the transcript; the client is cancelled again when the run's event loop closes."""
    from seer.harness import run as run_module

    monkeypatch.setattr(run_module, "CLOSE_GRACE", 1.0)
    run = run_agent("think", provider="slow-to-close")

    async def go() -> float:
        async for message in run:
            if message.kind == "assistant":
                threading.Timer(0.05, run.cancel).start()
        return time.monotonic()

    began = time.monotonic()
    ended = asyncio.run(go())
    assert ended - began < 10, "the harness waited on the client's close"
    last = _lines(run.transcript_path)[-1]
    assert last["kind"] == "final" and last["stop_reason"] == "cancelled"
