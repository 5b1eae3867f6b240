"""seer's own skill (``seer skill install``) says what the code does.

``SKILL.md`` is installed with the real command, then every example in it is run:

* every ```python block, as a script in its own process, in the order they come, in a fresh
  directory with an isolated ``SEER_HOME`` (``seer down --all`` on it afterwards, and nothing may be
  left running). A ```python block with a ``title="NAME"`` is a file, not a script: it is written
  as ``NAME`` into the directory of every example after it (``interface.py``, ``my_helpers.py``);
* every ```mcp block (MCP tool calls, written as Python calls with keyword arguments) right after
  the Python block before it, through the real MCP server the tool belongs to: the notebook server
  (``seer_mcp.notebook``, in process) with the ``session_id`` / ``jupyter_url`` that block printed,
  or the shell server started from the ``mcp_config`` it printed; every tool and argument named
  must exist;
* every ``seer ...`` line of a ```bash block names a real command and real options.

The only changes made to the examples, because this machine has no GPU and no network:

* :data:`MODEL_SUBSTITUTIONS`: the two model ids the skill uses become the tiny offline test
  models (``google/gemma-2-9b-it`` -> the tiny Llama; the skill's adapter id -> a LoRA adapter on
  it), served from a Hugging Face cache made for the run, with ``HF_HUB_OFFLINE=1``;
* every ``gpu="..."`` becomes ``gpu=None``;
* in tool calls, ``"<session_id>"`` and ``"<jupyter_url>"`` become the values the setup script
  printed (what the skill tells the agent to do);
* and the environment has ``HF_TOKEN`` set to a dummy (the PEFT example names it as a secret).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
import typer
from _model_kit import ADAPTER_ID, MODEL_ID, install_all, tiny_dirs
from seer import skill
from seer.config import GPU_CATALOGUE, ModelConfig, RepoConfig, SandboxConfig
from seer.workspace import Skill

pytestmark = pytest.mark.e2e

#: The model ids in the skill's examples, and the tiny offline models the test gives them.
MODEL_SUBSTITUTIONS = {
    '"google/gemma-2-9b-it"': f'"{MODEL_ID}"',
    '"your-org/gemma-2-9b-it-adapter"': f'"{ADAPTER_ID}"',
}
_GPU = re.compile(r'\bgpu="[^"]*"')
_PLACEHOLDERS = ("session_id", "jupyter_url")


@dataclass
class Block:
    lang: str
    code: str
    line: int
    #: the ``title="..."`` of the fence (a file's name), if any
    title: str | None = None


@dataclass
class Example:
    """A ```python block, the ```mcp blocks after it (before the next ```python block), and the
    files (titled ```python blocks) given before it."""

    python: Block
    files: dict[str, str] = field(default_factory=dict)
    tool_blocks: list[Block] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"line{self.python.line}"


def fenced_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lang: str | None = None
    title: str | None = None
    start, body = 0, list[str]()
    for number, line in enumerate(text.splitlines(), 1):
        if lang is None:
            match = re.match(r"^```(\S*)(.*)$", line)
            if match:
                lang, start, body = match.group(1), number, []
                found = re.search(r'title="([^"]+)"', match.group(2))
                title = found.group(1) if found else None
        elif line.rstrip() == "```":
            blocks.append(Block(lang, "\n".join(body) + "\n", start, title))
            lang = None
        else:
            body.append(line)
    assert lang is None, f"a ``` fence opened at line {start} is never closed"
    return blocks


def examples(text: str) -> list[Example]:
    found: list[Example] = []
    files: dict[str, str] = {}
    for block in fenced_blocks(text):
        if block.lang == "python" and block.title:
            compile(block.code, block.title, "exec")
            files[block.title] = block.code
        elif block.lang == "python":
            found.append(Example(block, dict(files)))
        elif block.lang == "mcp":
            assert found, f"line {block.line}: a tool call before any setup example"
            found[-1].tool_blocks.append(block)
    return found


def tool_calls(block: Block) -> list[tuple[str, dict[str, Any]]]:
    """``[(tool, {argument: value})]``: each statement one call, with literal keyword arguments."""
    calls = []
    for stmt in ast.parse(block.code).body:
        where = f"line {block.line + stmt.lineno}"
        assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call), f"{where}: not a call"
        call = stmt.value
        assert isinstance(call.func, ast.Name), f"{where}: call a tool by its name"
        assert not call.args, f"{where}: pass tool arguments by name"
        assert all(k.arg for k in call.keywords), f"{where}: no **arguments"
        calls.append((call.func.id, {str(k.arg): ast.literal_eval(k.value) for k in call.keywords}))
    return calls


def substitute(code: str) -> str:
    for old, new in MODEL_SUBSTITUTIONS.items():
        code = code.replace(old, new)
    return _GPU.sub("gpu=None", code)


# The skill as this seer renders it, for parametrising; the tests check the installed file is it.
RENDERED = skill.skill().skill_md
EXAMPLES = examples(RENDERED)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """SKILL.md as ``seer skill install`` writes it (into the default folder, under a fresh cwd)."""
    cwd = tmp_path_factory.mktemp("skill-install")
    out = subprocess.run(
        [sys.executable, "-m", "seer", "skill", "install"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    path = cwd / ".claude" / "skills" / "seer" / "SKILL.md"
    assert out.stdout.strip() == str(path)
    return path.read_text()


def test_install_writes_a_valid_skill(installed: str, tmp_path: Path) -> None:
    assert installed == RENDERED
    loaded = Skill.from_dir(skill.install(tmp_path / "skills").parent)
    assert loaded.name == "seer" and "setup script" in loaded.description
    assert loaded.skill_md == installed
    # `seer skill show` prints the same file; an explicit DIR is honoured.
    shown = subprocess.run(
        [sys.executable, "-m", "seer", "skill", "show"], capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0 and shown.stdout == installed
    out = subprocess.run(
        [sys.executable, "-m", "seer", "skill", "install", str(tmp_path / "other")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.strip() == str(tmp_path / "other" / "seer" / "SKILL.md")
    assert (tmp_path / "other" / "seer" / "SKILL.md").read_text() == installed
    # A folder that cannot be written is one line on stderr and exit 1, not a traceback.
    (tmp_path / "a-file").write_text("")
    bad = subprocess.run(
        [sys.executable, "-m", "seer", "skill", "install", str(tmp_path / "a-file" / "skills")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1 and "cannot write the skill" in bad.stderr and "Traceback" not in bad.stderr


def test_generated_tables_are_the_codes(installed: str) -> None:
    assert "@@" not in installed
    for name, what in GPU_CATALOGUE.items():
        assert f'| `"{name}"` | {what} |' in installed
    for model in (SandboxConfig, ModelConfig, RepoConfig):
        for name in model.model_fields:
            assert f"| `{name}` |" in installed, f"{model.__name__}.{name} is not in the skill"
    import seer

    assert f"version {seer.__version__}" in installed


def _tool_schemas() -> dict[str, dict[str, Any]]:
    """Every tool of seer's MCP servers: its input schema."""
    from seer_mcp.notebook import build_server as notebook_server
    from seer_mcp.shell import build_server as shell_server

    async def listing() -> dict[str, dict[str, Any]]:
        server, registry = notebook_server()
        try:
            tools = {t.name: t.input_schema for t in await server.list_tools()}
        finally:
            registry.close()
        shell = {t.name: t.input_schema for t in await shell_server().list_tools()}
        assert not set(tools) & set(shell), "the notebook and shell servers share a tool name"
        return {**tools, **shell}

    return anyio.run(listing)


def test_every_tool_call_names_a_real_tool_and_its_arguments(installed: str) -> None:
    schemas = _tool_schemas()
    blocks = [b for b in fenced_blocks(installed) if b.lang == "mcp"]
    assert blocks
    for block in blocks:
        for tool, arguments in tool_calls(block):
            assert tool in schemas, f"line {block.line}: no MCP tool {tool!r}; tools: {sorted(schemas)}"
            props = schemas[tool].get("properties", {})
            unknown = set(arguments) - set(props)
            assert not unknown, f"line {block.line}: {tool} has no argument(s) {sorted(unknown)}"
            missing = set(schemas[tool].get("required", [])) - set(arguments)
            assert not missing, f"line {block.line}: {tool} needs {sorted(missing)}"
    named = {tool for b in blocks for tool, _ in tool_calls(b)}
    assert {"attach_to_session", "execute_code", "run_command"} <= named
    # The notebook tools the prose names (and the argument it names) exist too.
    prose = installed[installed.index("`execute_code` takes") : installed.index("for sandbox work.")]
    mentioned = re.findall(r"`([a-z]+(?:_[a-z]+)+)`", prose)
    assert len(mentioned) >= 7
    for tool in mentioned:
        assert tool in schemas, f"the skill names a tool {tool!r} no server has"
    assert "timeout_seconds" in schemas["execute_code"]["properties"]


def test_every_seer_command_in_the_skill_exists(installed: str) -> None:
    from seer.cli import create_app

    root: Any = typer.main.get_command(create_app())
    lines = [
        line.split("#", 1)[0].split()
        for b in fenced_blocks(installed)
        if b.lang == "bash"
        for line in b.code.splitlines()
        if line.startswith("seer ")
    ]
    assert len(lines) >= 8
    for words in lines:
        # (typer carries its own click: groups are told by their `commands`.)
        command: Any = root
        rest = words[1:]
        while hasattr(command, "commands") and rest and rest[0] in command.commands:
            command = command.commands[rest.pop(0)]
        assert command is not root, f"`{' '.join(words)}`: no such command"
        assert not hasattr(command, "commands"), f"`{' '.join(words)}`: names a group, not a command"
        options = {o for p in command.params for o in getattr(p, "opts", [])}
        for word in rest:
            if word.startswith("-") and word != "--":
                assert word in options, f"`{' '.join(words)}`: {command.name} has no option {word}"
    # Commands named in the prose exist too.
    for text in re.findall(r"`seer ([a-z ]+)", installed):
        first = text.split()[0]
        assert first in root.commands, f"`seer {text}`: no such command"


def test_the_skill_has_runnable_examples() -> None:
    assert len(EXAMPLES) >= 5
    # Every example that starts a sandbox either prints how to reach it or ends it itself.
    for example in EXAMPLES:
        code = example.python.code
        assert "json.dumps" in code or "with Sandbox(" in code, example.id


# --- running the examples ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """An HF home whose hub cache holds the tiny models under the substituted ids."""
    home = tmp_path_factory.mktemp("skill-hf-home")
    install_all(tiny_dirs(tmp_path_factory, worker_id), home / "hub")
    return home


def _seer(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seer", *args], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def example_env(tmp_path: Path, hf_cache: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh directory with the fixture files, and an environment with an isolated SEER_HOME;
    afterwards every sandbox in that home is terminated, and none may be left."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {
        **os.environ,
        "SEER_HOME": str(tmp_path / "seer-home"),
        "HF_HOME": str(hf_cache),
        "HF_HUB_OFFLINE": "1",
        "HF_TOKEN": "hf_not_a_real_token",
        # docker sandboxes are found engine-wide by label: `down --all` here must not reach the
        # Docker tests' sandboxes
        "SEER_DISABLE_PLUGINS": "docker",
    }
    try:
        yield workdir, env
    finally:
        down = _seer(["down", "--all"], env)
        assert down.returncode == 0, down.stderr
        left = _seer(["ls", "--json"], env)
        assert json.loads(left.stdout) == [], f"sandboxes left running: {left.stdout}"


def _fill(value: Any, printed: dict[str, Any]) -> Any:
    if isinstance(value, str):
        for key in _PLACEHOLDERS:
            value = value.replace(f"<{key}>", str(printed.get(key, f"<{key}>")))
    return value


async def _run_tool_calls(example: Example, printed: dict[str, Any], env: dict[str, str]) -> list[str]:
    """Make the example's tool calls through the real servers; return each answer's text."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from seer_mcp.notebook import build_server as notebook_server
    from seer_mcp.shell import TOOLS as SHELL_TOOLS

    calls = [
        (tool, {k: _fill(v, printed) for k, v in args.items()})
        for b in example.tool_blocks
        for tool, args in tool_calls(b)
    ]
    answers = []
    server, registry = notebook_server()
    try:
        async with Client(server) as notebook:
            shell: Client | None = None
            for tool, arguments in calls:
                if tool in SHELL_TOOLS:
                    if shell is None:
                        config = printed["mcp_config"]
                        params = StdioServerParameters(
                            command=config["command"], args=config["args"], env=config["env"]
                        )
                        shell = await Client(params).__aenter__()
                    client = shell
                else:
                    client = notebook
                with anyio.fail_after(240):
                    result = await client.call_tool(tool, arguments)
                text = "\n".join(getattr(c, "text", "") for c in result.content)
                assert not result.is_error, f"{tool}({arguments}) failed:\n{text}"
                assert "Traceback" not in text, f"{tool}({arguments}) raised:\n{text}"
                answers.append(text)
            if shell is not None:
                await shell.__aexit__(None, None, None)
    finally:
        registry.close()
    return answers


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(EXAMPLES)), ids=[e.id for e in EXAMPLES])
def test_example_runs(index: int, installed: str, example_env: tuple[Path, dict[str, str]]) -> None:
    example = examples(installed)[index]
    workdir, env = example_env
    script = substitute(example.python.code)
    for name, text in example.files.items():
        (workdir / name).write_text(substitute(text))
    (workdir / "example.py").write_text(script)
    out = subprocess.run(
        [sys.executable, "example.py"], cwd=workdir, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, f"the example at line {example.python.line} failed:\n{out.stderr[-4000:]}"
    printed: dict[str, Any] = {}
    if "json.dumps" in script:
        printed = json.loads(out.stdout.strip().splitlines()[-1])
        assert printed["sandbox_id"].startswith("local-")
    if "model_info" in printed:
        info = printed["model_info"]
        if "hidden=True" in script:
            assert "hidden model" in info and "tiny-llama" not in info, info
        else:
            assert f"({MODEL_ID})" in info, info
            assert "Do NOT reload" in info
    if 'var_name="tuned"' in script:
        assert "**base**" in printed["model_info"] and "**tuned**" in printed["model_info"]
    if "libraries" in printed:
        assert "def top_tokens(model, tokenizer, text: str, k: int=5) -> list[str]:" in printed["libraries"]
    if "ScopedSandbox" in script:
        assert out.stdout.strip().splitlines()[0].strip(), "model_tools.generate printed nothing"
        assert "model_tools" in printed["prompt"]
        assert (Path(printed["workspace_dir"]) / "model_tools.py").is_file()
    answers = anyio.run(_run_tool_calls, example, printed, env) if example.tool_blocks else []
    joined = "\n".join(answers)
    calls = [tool for b in example.tool_blocks for tool, _ in tool_calls(b)]
    if "execute_code" in calls:
        assert "LlamaForCausalLM" in joined or "logits changed by" in joined or "['" in joined, joined
    if "mcp_config" in printed:
        assert "hello from" in joined and "probe.py" in joined, joined
