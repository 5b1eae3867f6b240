"""CLI sessions (``seer.execution.create_cli_session``): a shell in a sandbox with the workspace's
libraries importable, its files, its record (``CliSession.attach``), and what the agent is told."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _model_kit import (
    HIDDEN_ADAPTER_ID,
    HIDDEN_BASE_ID,
    MODEL_ID,
    hf_home,
    hidden_hits,
    install_all,
    tiny_dirs,
)
from _notebook_kit import local_sandbox
from seer import ConfigError, ExecError, ExecTimeoutError, Library, Sandbox, SandboxConfig, Workspace
from seer.errors import PluginError, SandboxError
from seer.execution import create_cli_session
from seer.sessions.shell import SHELL_SANDBOX_ENV, SHELL_SESSION_ENV, CliSession, DirEntry
from seer.state import seer_home

pytestmark = pytest.mark.e2e

HELPERS = '''
"""Helpers the agent imports."""


def double(x: int) -> int:
    """Twice ``x``."""
    return 2 * x
'''


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with local_sandbox(execution_mode="cli", env={"PYTHONPATH": "/opt/sandbox-own"}) as box:
        yield box


@pytest.fixture(scope="module")
def session(sandbox: Sandbox) -> CliSession:
    workspace = Workspace(
        libraries=[Library.from_code(HELPERS, name="helpers")],
        custom_init_code="open('init-ran.txt', 'w').write('yes')",
    )
    return create_cli_session(sandbox, workspace, name="agent-shell")


def test_the_workspace_is_importable_by_the_sandbox_python(session: CliSession) -> None:
    result = session.run("python -c 'import helpers; print(helpers.double(21))'", check=True)
    assert result.stdout.strip() == "42"
    # The libraries come first on PYTHONPATH; what the sandbox set itself is kept after them.
    path = session.run("echo $PYTHONPATH").stdout.strip().split(":")
    assert path[0] == session.installed[0].libs_dir and "/opt/sandbox-own" in path
    # custom_init_code ran once, at creation, in the working directory.
    assert session.read_file("init-ran.txt") == "yes"


def test_commands_start_in_the_working_directory_and_nothing_but_files_carries_over(
    session: CliSession, sandbox: Sandbox
) -> None:
    assert session.cwd == sandbox.workdir
    assert session.run("mkdir -p sub && cd sub && export FOO=1 && pwd").stdout.strip().endswith("/sub")
    assert session.run("pwd; echo FOO=$FOO").stdout.split() == [sandbox.workdir, "FOO="]
    result = session.run(["bash", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    with pytest.raises(ExecError):
        session.run("exit 4", check=True)


def test_a_command_past_its_timeout_is_killed_with_its_output_so_far(session: CliSession) -> None:
    with pytest.raises(ExecTimeoutError) as info:
        session.run("echo started; sleep 30", timeout=1)
    assert info.value.stdout == "started\n"


def test_files_relative_to_the_working_directory(session: CliSession, sandbox: Sandbox) -> None:
    written = session.write_file("out/notes.txt", "a\nb\n")
    assert written == f"{sandbox.workdir}/out/notes.txt"
    assert session.read_file("out/notes.txt") == "a\nb\n"
    assert sandbox.read_file(written) == "a\nb\n"
    session.write_file("out/blob.bin", b"\xff\x00\xfe")
    assert session.read_bytes("out/blob.bin") == b"\xff\x00\xfe"
    assert session.read_file("out/blob.bin") == "\ufffd\x00\ufffd"
    session.run("mkdir -p out/deeper && ln -sf notes.txt out/link", check=True)
    entries = session.list_dir("out")
    assert entries == [
        DirEntry("blob.bin", "file", 3),
        DirEntry("deeper", "dir"),
        DirEntry("link", "link"),
        DirEntry("notes.txt", "file", 4),
    ]
    assert [str(e) for e in entries] == ["blob.bin  (3 bytes)", "deeper/", "link@", "notes.txt  (4 bytes)"]
    assert session.list_dir(f"{sandbox.workdir}/out/deeper") == []


def test_file_errors_name_the_path(session: CliSession) -> None:
    with pytest.raises(FileNotFoundError, match=r"no file .*/missing\.txt"):
        session.read_file("missing.txt")
    with pytest.raises(FileNotFoundError, match=r"no directory .*/nowhere"):
        session.list_dir("nowhere")
    session.write_file("plain.txt", "x")
    with pytest.raises(NotADirectoryError, match=r"plain\.txt"):
        session.list_dir("plain.txt")
    with pytest.raises(ValueError, match="non-empty"):
        session.read_file("  ")


def test_a_session_is_found_again_by_id(session: CliSession, sandbox: Sandbox) -> None:
    again = CliSession.attach(sandbox.sandbox_id, session.session_id)
    assert (again.cwd, again.env, again.name) == (session.cwd, session.env, "agent-shell")
    assert again.prompt == session.prompt
    assert again.run("python -c 'import helpers'").ok
    # Without a session id: a plain shell with the sandbox's own environment.
    plain = CliSession.attach(sandbox.sandbox_id)
    assert plain.env == {} and not plain.run("python -c 'import helpers'").ok
    with pytest.raises(SandboxError, match=f"no CLI session 'cli-nope'.*{session.session_id}"):
        CliSession.attach(sandbox, "cli-nope")


def test_a_session_is_found_from_another_process(session: CliSession, sandbox: Sandbox) -> None:
    code = (
        "import sys\nfrom seer.sessions.shell import CliSession\n"
        "s = CliSession.attach(sys.argv[1], sys.argv[2])\n"
        "print(s.run(\"python -c 'import helpers; print(helpers.double(4))'\").stdout, end='')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, sandbox.sandbox_id, session.session_id],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "8\n"


def test_mcp_config_starts_the_shell_server_on_this_session(session: CliSession, sandbox: Sandbox) -> None:
    config = session.mcp_config
    assert config["type"] == "stdio" and config["command"] == sys.executable
    assert config["args"] == ["-m", "seer_mcp.shell"]
    assert config["env"][SHELL_SANDBOX_ENV] == sandbox.sandbox_id
    assert config["env"][SHELL_SESSION_ENV] == session.session_id
    assert config["env"]["SEER_HOME"] == str(seer_home())
    # It is JSON, as MCP client configs are.
    assert json.loads(json.dumps(config)) == config
    # The local provider marks a sandbox's own processes with SEER_SANDBOX_ID and kills them at
    # teardown: the server, a client-side process, must not carry it.
    assert "SEER_SANDBOX_ID" not in config["env"]


def test_mcp_config_without_the_mcp_plugin_says_what_to_install(
    session: CliSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "seer_mcp" else real(name, *a)
    )
    with pytest.raises(PluginError, match=r'pip install "seer\[mcp\]"'):
        _ = session.mcp_config


def test_the_prompt_tells_the_agent_its_shell_and_libraries(session: CliSession, sandbox: Sandbox) -> None:
    prompt = session.prompt
    assert sandbox.sandbox_id in prompt and session.cwd in prompt
    assert "`cd` and `export` do not carry over" in prompt
    assert "No models are configured" in prompt
    assert "import helpers" in prompt and "def double(x: int) -> int:" in prompt


def test_setup_adds_a_workspace_later(sandbox: Sandbox) -> None:
    session = create_cli_session(sandbox)
    assert session.env == {} and session.name.startswith("shell-")
    session.setup(Workspace(libraries=[Library.from_code("X = 1\n", name="later_lib")]))
    assert session.run("python -c 'import later_lib; print(later_lib.X)'").stdout == "1\n"
    assert CliSession.attach(sandbox, session.session_id).env == session.env
    with pytest.raises(ExecError, match="custom_init_code"):
        session.setup(Workspace(custom_init_code="raise SystemExit('boom')"))


def test_bad_session_names_are_refused(sandbox: Sandbox) -> None:
    with pytest.raises(ConfigError, match="name"):
        create_cli_session(sandbox, name="../escape")


@pytest.fixture(scope="module")
def model_home(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    home = tmp_path_factory.mktemp("cli-hf-home")
    install_all(tiny_dirs(tmp_path_factory, worker_id), home / "hub")
    return home


@pytest.mark.slow
def test_models_in_a_cli_sandbox_load_as_the_prompt_says(model_home: Path) -> None:
    with hf_home(model_home):
        config = SandboxConfig(
            execution_mode="cli",
            models=[
                {"name": MODEL_ID},
                {
                    "name": HIDDEN_ADAPTER_ID,
                    "base_model": HIDDEN_BASE_ID,
                    "is_peft": True,
                    "hidden": True,
                    "var_name": "secret",
                },
            ],
        )
        with Sandbox(config).start() as box:
            session = create_cli_session(box)
            prompt = session.prompt
            assert "- `model`: seer-testing/tiny-llama" in prompt
            assert "- `secret`: hidden model (PEFT adapter)" in prompt
            assert hidden_hits(prompt + json.dumps(session.mcp_config)) == []
            # The snippet the prompt gives loads the model, as written.
            snippet = prompt.split("```python\n", 1)[1].split("```", 1)[0]
            check = snippet + "print(type(model).__name__, model.config.num_hidden_layers)\n"
            session.write_file("load.py", check)
            result = session.run("python load.py", timeout=240)
            assert result.ok, result.stderr[-3000:]
            assert result.stdout.split() == ["LlamaForCausalLM", "2"]
