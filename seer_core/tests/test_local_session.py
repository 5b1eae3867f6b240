"""Local sessions (``seer.execution.create_local_session``): the agent's working directory on
this machine with the workspace installed, its libraries importable by scripts there, the MCP
server configs the workspace carries handed on, and never a file of the user's overwritten.

Seed 004 Pattern 4 against a real ``ScopedSandbox`` is at the bottom."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from seer import Library, Skill, Workspace
from seer.errors import ConfigError, ExecError, ExecTimeoutError
from seer.execution import create_local_session
from seer.sessions.workdir import LocalSession

pytestmark = pytest.mark.unit

HELPER = '''"""Helpers."""


def double(x: int) -> int:
    """Twice x."""
    return 2 * x
'''


def _workspace(**kwargs: Any) -> Workspace:
    return Workspace(libraries=[Library.from_code(HELPER, name="helpers")], **kwargs)


@pytest.mark.e2e
def test_libraries_import_from_the_workspace_dir(tmp_path):
    work = tmp_path / "work"
    session = create_local_session(workspace=_workspace(), workspace_dir=str(work), name="exp")
    assert isinstance(session, LocalSession)
    assert session.name == "exp" and session.session_id == "exp"
    assert session.workspace_dir == str(work.resolve()) and work.is_dir()
    assert (work / "helpers.py").read_text() == HELPER
    assert session.library_files == ["helpers.py"]
    # python -c from the directory, and a script there, import it with no set-up ...
    code = "import helpers; print(helpers.double(21))"
    plain = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    assert (
        subprocess.run(
            [sys.executable, "-c", code], cwd=work, env=plain, capture_output=True, text=True, check=True
        ).stdout.strip()
        == "42"
    )
    (work / "script.py").write_text(code + "\n")
    assert (
        subprocess.run(
            [sys.executable, "script.py"], cwd=work, env=plain, capture_output=True, text=True, check=True
        ).stdout.strip()
        == "42"
    )
    # ... and code run elsewhere does with session.env.
    libs = session.env["PYTHONPATH"].split(os.pathsep)[0]
    assert libs == session.installed.libs_dir and Path(libs, "helpers.py").is_file()
    assert (
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env={**plain, **session.env},
            capture_output=True,
            text=True,
        ).stdout.strip()
        == "42"
    )
    # The conveniences.
    assert session.exec_python(code).stdout.strip() == "42"
    assert session.run("pwd").stdout.strip() == str(work.resolve())
    assert session.run(["python3", "-c", "print(1)"]).ok
    assert not session.run("exit 3").ok
    with pytest.raises(ExecError):
        session.run("exit 3", check=True)
    with pytest.raises(ExecTimeoutError):
        session.exec_python("import time; time.sleep(30)", timeout=0.5)
    prompt = session.prompt
    assert str(work.resolve()) in prompt and "## `helpers`" in prompt and "Twice x." in prompt
    assert session.installed.libs_dir in prompt
    assert repr(session) == f"<LocalSession 'exp' in {str(work.resolve())!r}>"


def test_defaults_the_current_directory_and_a_dated_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    session = create_local_session()
    assert session.workspace_dir == str(tmp_path.resolve())
    assert session.name.startswith("local-") and session.mcp_config == {}
    assert session.library_files == []
    assert "local working directory" in session.prompt


def test_skills_and_local_files_are_installed(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("hello")
    skill = Skill("notes", "How to take notes.", "Write them down.")
    ws = Workspace(
        libraries=[Library.from_code(HELPER, name="helpers")],
        skills=[skill],
        local_files=[(str(data), "inputs/data.txt")],
    )
    session = create_local_session(ws, tmp_path / "work")
    assert (tmp_path / "work" / "inputs" / "data.txt").read_text() == "hello"
    assert Skill.from_dir(Path(session.installed.skills_dir) / "notes") == skill
    assert "**notes**: How to take notes." in session.prompt


@pytest.mark.e2e
def test_custom_init_code_runs_once_in_the_workspace_dir(tmp_path):
    ws = _workspace(custom_init_code="import helpers\nopen('init.txt', 'w').write(str(helpers.double(2)))")
    create_local_session(ws, tmp_path)
    assert (tmp_path / "init.txt").read_text() == "4"
    with pytest.raises(ExecError, match="custom_init_code"):
        create_local_session(Workspace(custom_init_code="raise SystemExit(3)"), tmp_path / "other")


def test_a_file_of_the_users_is_never_overwritten(tmp_path):
    (tmp_path / "helpers.py").write_text("# mine\n")
    with pytest.raises(ConfigError, match=r"helpers\.py' is already there and was not written by seer"):
        create_local_session(_workspace(), tmp_path)
    assert (tmp_path / "helpers.py").read_text() == "# mine\n"


def test_a_later_session_replaces_what_an_earlier_one_wrote(tmp_path):
    create_local_session(_workspace(), tmp_path)
    changed = HELPER.replace("2 * x", "3 * x")
    create_local_session(Workspace(libraries=[Library.from_code(changed, name="helpers")]), tmp_path)
    assert (tmp_path / "helpers.py").read_text() == changed
    # A library no longer in the workspace is removed, package folders included ...
    pkg = Library("pkg", {"__init__.py": "X = 1\n", "sub/__init__.py": "", "sub/mod.py": "Y = 2\n"})
    create_local_session(Workspace(libraries=[pkg]), tmp_path)
    assert not (tmp_path / "helpers.py").exists() and (tmp_path / "pkg" / "sub" / "mod.py").is_file()
    create_local_session(Workspace(), tmp_path)
    assert not (tmp_path / "pkg").exists()
    # ... unless the user changed it since.
    create_local_session(_workspace(), tmp_path)
    (tmp_path / "helpers.py").write_text("# edited\n")
    create_local_session(Workspace(), tmp_path)
    assert (tmp_path / "helpers.py").read_text() == "# edited\n"


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="not a usable session name"):
        create_local_session(name="no spaces")
    with pytest.raises(ConfigError, match="expected a Workspace"):
        create_local_session([Library.from_code(HELPER, name="helpers")], tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is a file"):
        create_local_session(workspace_dir=tmp_path / "file")


# --- MCP server configs ----------------------------------------------------------------------
STDIO = {"type": "stdio", "command": "python", "args": ["-m", "server"], "env": {"TOKEN": "t0ken"}}


def test_mcp_configs_given_in_libraries_are_kept_apart(tmp_path):
    """Seed Example 3: ``Workspace(libraries=[scoped.serve(..., expose_as="mcp")])``."""
    lib = Library.from_code(HELPER, name="helpers")
    ws = Workspace(libraries=[lib, STDIO, {"name": "tools", "url": "http://127.0.0.1:1/mcp"}])
    assert ws.libraries == [lib] and ws.library_names == ["helpers"]
    assert ws.mcp_servers == {"mcp": STDIO, "tools": {"url": "http://127.0.0.1:1/mcp"}}
    assert "mcp_servers=['mcp', 'tools']" in repr(ws)
    session = create_local_session(ws, tmp_path, name="multi-agent-experiment")
    assert session.mcp_config == ws.mcp_servers
    session.mcp_config["mcp"]["command"] = "changed"  # a copy
    assert ws.mcp_servers["mcp"]["command"] == "python"
    assert "MCP servers given to you: `mcp`, `tools`." in session.prompt
    assert "t0ken" not in session.prompt
    path = session.write_mcp_config()
    assert path == tmp_path.resolve() / ".mcp.json"
    assert json.loads(path.read_text()) == {"mcpServers": ws.mcp_servers}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    other = session.write_mcp_config(tmp_path / "sub" / "agent.json")
    assert json.loads(other.read_text())["mcpServers"]["tools"]["url"] == "http://127.0.0.1:1/mcp"


def test_an_unnamed_config_of_seers_mcp_mode_is_named_after_its_interface():
    config = {"type": "stdio", "command": "python", "args": [], "env": {"SEER_RPC_NAME": "tools"}}
    assert Workspace(libraries=[config]).mcp_servers == {"tools": config}


def test_the_mcp_servers_argument_takes_every_shape():
    ws = Workspace(
        mcp_servers=[
            STDIO,
            STDIO,  # unnamed again: mcp-2
            {"mcpServers": {"a": {"command": "x"}}},
            {"b": {"url": "http://127.0.0.1:2"}, "c": {"command": "y"}},
        ]
    )
    assert list(ws.mcp_servers) == ["mcp", "mcp-2", "a", "b", "c"]
    assert Workspace(mcp_servers={"only": {"command": "z"}}).mcp_servers == {"only": {"command": "z"}}


def test_bad_mcp_configs_are_refused_without_printing_them():
    with pytest.raises(ConfigError) as err:
        Workspace(
            libraries=[{"tools": {"secret": "s3cret"}}],
            mcp_servers=[{"a": {"command": "x"}}, {"a": {"command": "y"}}, "nope", {}],
        )
    text = str(err.value)
    assert "libraries[0]['tools']: an MCP server config must be a mapping with 'command'" in text
    assert "keys ['secret']" in text and "s3cret" not in text
    assert "mcp_servers[1]: an MCP server named 'a' is already given" in text
    assert "mcp_servers[2]: expected an MCP server config (a mapping), got str" in text
    assert "mcp_servers[3]: an empty mapping names no MCP server" in text


# --- seed 004 Pattern 4 and Example 3, against a real ScopedSandbox ---------------------------
#: Seed 002's interface, loading the tiny test model through the injected get_model_path().
MODEL_INTERFACE = '''\
"""interface.py - completely self-contained"""

from transformers import AutoModelForCausalLM, AutoTokenizer
import torch

model_path = get_model_path("__MODEL__")
model = AutoModelForCausalLM.from_pretrained(model_path)
tokenizer = AutoTokenizer.from_pretrained(model_path)

cache = {}


@expose
def get_activations(prompt: str, layer: int) -> dict:
    """Extract activations at a specific layer."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    with torch.no_grad():
        outputs = model(**inputs, output_hidden_states=True)
    activations = outputs.hidden_states[layer].mean(dim=1)[0]
    cache[prompt] = layer
    return {"activations": activations.tolist(), "shape": list(activations.shape), "layer": layer}


@expose
def list_cache() -> dict:
    """List cached items."""
    return {"cache": list(cache.keys())}
'''

PLAIN_INTERFACE = '''\
@expose
def add(a: int, b: int = 1) -> int:
    """a + b, in the sandbox."""
    return a + b
'''

AGENT_SCRIPT = """\
import json
import tools

result = tools.get_activations("The cat sat", layer=1)
print(json.dumps({"shape": result["shape"], "n": len(result["activations"]), "cache": tools.list_cache()}))
"""


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.mark.e2e
def test_pattern_4_plain(tmp_path):
    """Pattern 4 without a model: serve, put the library in a workspace, local code imports it."""
    from seer import SandboxConfig
    from seer.sandbox.scoped import ScopedSandbox

    (tmp_path / "interface.py").write_text(PLAIN_INTERFACE)
    scoped = ScopedSandbox(SandboxConfig(timeout=300))
    scoped.start()
    try:
        interface_lib = scoped.serve(str(tmp_path / "interface.py"), expose_as="library", name="tools")
        workspace = Workspace(libraries=[interface_lib])
        session = create_local_session(workspace=workspace, workspace_dir=str(tmp_path / "work"), name="exp")
        (tmp_path / "work" / "agent.py").write_text("import tools\nprint(tools.add(40, b=2), tools.add(1))\n")
        out = subprocess.run(
            [sys.executable, "agent.py"],
            cwd=session.workspace_dir,
            env=_plain_env(),
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["42", "2"]
        assert session.exec_python("import tools; print(tools.add(2))").stdout.strip() == "3"
        assert "a + b, in the sandbox." in session.prompt
    finally:
        scoped.terminate()


@pytest.mark.e2e
def test_pattern_4_with_the_tiny_model(tmp_path_factory, worker_id, tmp_path):
    """Seed 004 Pattern 4 as written, with seed 002's interface loading a (tiny) model."""
    from _model_kit import MODEL_ID, hf_home, install_all, tiny_dirs
    from seer.environment import ModelConfig, SandboxConfig, ScopedSandbox  # the seed's import path

    dirs = tiny_dirs(tmp_path_factory, worker_id)
    interface = tmp_path / "interface.py"
    interface.write_text(MODEL_INTERFACE.replace("__MODEL__", MODEL_ID))
    with hf_home(tmp_path_factory.mktemp("hf-pattern4")) as cache:
        install_all(dirs, cache)
        scoped = ScopedSandbox(SandboxConfig(models=[ModelConfig(name=MODEL_ID)], timeout=600))
        scoped.start()  # Pattern 4, line by line (the GPU and gemma made a CPU and a tiny model)
        try:
            interface_lib = scoped.serve(str(interface), expose_as="library", name="tools")
            workspace = Workspace(libraries=[interface_lib])
            session = create_local_session(
                workspace=workspace, workspace_dir=str(tmp_path / "work"), name="exp"
            )
            # -> local code can import and call GPU functions via RPC
            (Path(session.workspace_dir) / "agent.py").write_text(AGENT_SCRIPT)
            # The agent's Python need not have torch: the client module never imports it.
            run = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sys; sys.modules['torch'] = None; exec(open('agent.py').read())",
                ],
                cwd=session.workspace_dir,
                env=_plain_env(),
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert run.returncode == 0, run.stdout + run.stderr
            out = json.loads(run.stdout.strip().splitlines()[-1])
            hidden_size = json.loads((dirs.model / "config.json").read_text())["hidden_size"]
            assert out["shape"] == [hidden_size] and out["n"] == hidden_size
            assert out["cache"] == {"cache": ["The cat sat"]}
        finally:
            scoped.terminate()


@pytest.mark.e2e
def test_seed_example_3_mcp_config_in_a_workspace(tmp_path):
    """Seed 004 Example 3: the ``mcp`` expose mode's config given in ``libraries``."""
    from seer import SandboxConfig, plugins
    from seer.sandbox.scoped import ScopedSandbox

    if "mcp" not in plugins.expose_modes():
        pytest.skip("the mcp expose mode (seer-mcp) is not installed")
    (tmp_path / "conversation_interface.py").write_text(PLAIN_INTERFACE)
    scoped = ScopedSandbox(SandboxConfig(timeout=300))
    scoped.start()
    try:
        interface_lib = scoped.serve(
            str(tmp_path / "conversation_interface.py"), expose_as="mcp", name="conversation_tools"
        )
        workspace = Workspace(libraries=[interface_lib])
        session = create_local_session(
            workspace=workspace, workspace_dir=str(tmp_path / "workspace"), name="multi-agent-experiment"
        )
        assert workspace.libraries == [] and session.mcp_config == {"conversation_tools": interface_lib}
        assert "MCP servers given to you: `conversation_tools`." in session.prompt
        written = json.loads(session.write_mcp_config().read_text())
        assert written == {"mcpServers": {"conversation_tools": interface_lib}}
    finally:
        scoped.terminate()
