"""seer's own skill (``seer skill install``) says what the code does.

``SKILL.md`` is installed with the real command, then run through the docs' block runner
(tests/_doc_runner.py, sybil), as one page, in a fresh directory with an isolated ``SEER_HOME``
(``seer down --all`` on it afterwards, and nothing may be left running):

* every ```python block runs, in order; a ```python block with a ``title="NAME"`` is a file
  (``setup.py``, ``interface.py``, ``my_helpers.py``) written into that directory; ```bash blocks
  run there (``python setup.py``), and ``seer ...`` usage lines are checked (commands, options);
* every ```mcp block (MCP tool calls, written as Python calls with keyword arguments) is made
  through the real MCP server the tool belongs to: the notebook server (``seer_mcp.notebook``, in
  process) with the ``session_id`` / ``jupyter_url`` the block before printed, or the shell
  server started from the ``mcp_config`` it printed.

What the runner cannot know is checked here: what each example printed and what the tools
answered (the model info, hidden models, the libraries' docs), that every tool and argument named
exists, and that the installed file is the one this seer renders. The runner changes the examples
only because this machine has no GPU and no network: the skill's model ids become the tiny
offline test models (``google/gemma-2-9b-it`` -> the tiny Llama; the skill's adapter id -> a LoRA
adapter on it), served from a Hugging Face cache made for the run, with ``HF_HUB_OFFLINE=1``,
every ``gpu="..."`` becomes ``gpu=None``, and ``HF_TOKEN`` is a dummy (the PEFT example names it
as a secret).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from _doc_runner import Block, last_json, page_env, parse, run_page, tool_calls, unknown_seer_command
from _model_kit import MODEL_ID, install_all, tiny_dirs
from seer import guide as skill
from seer.config import GPU_CATALOGUE, ModelConfig, RepoConfig, SandboxConfig
from seer.workspace import Skill

pytestmark = pytest.mark.e2e


def blocks(text: str, tmp: Path) -> list[Block]:
    """The skill's blocks, as the runner sees them."""
    path = tmp / "SKILL.md"
    path.write_text(text)
    return [example.parsed for example in parse(path)]


# The skill as this seer renders it, for parametrising; the tests check the installed file is it.
RENDERED = skill.skill().skill_md


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


def test_every_installed_provider_s_options_are_in_the_skill(installed: str) -> None:
    from seer import plugins

    documented = 0
    for name, registration in plugins.providers().items():
        model = registration.cls.options_model
        if model is None:
            continue
        section = installed.split(f'`provider="{name}"`:', 1)[1].split("`provider=", 1)[0]
        for field in model.model_fields:
            assert f"| `{field}` |" in section, f"{name}'s option {field} is not in the skill"
        documented += 1
    assert documented >= 1
    # the essentials a new user needs, in the prose as well as the tables
    for essential in ("`image`", "`pull=False`", "`model_cache`", "hidden-model cache rule"):
        assert essential in installed, essential


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


def test_every_tool_call_names_a_real_tool_and_its_arguments(installed: str, tmp_path: Path) -> None:
    schemas = _tool_schemas()
    mcp_blocks = [b for b in blocks(installed, tmp_path) if b.lang == "mcp"]
    assert mcp_blocks
    for block in mcp_blocks:
        for tool, arguments in tool_calls(block.source, block.line):
            assert tool in schemas, f"line {block.line}: no MCP tool {tool!r}; tools: {sorted(schemas)}"
            props = schemas[tool].get("properties", {})
            unknown = set(arguments) - set(props)
            assert not unknown, f"line {block.line}: {tool} has no argument(s) {sorted(unknown)}"
            missing = set(schemas[tool].get("required", [])) - set(arguments)
            assert not missing, f"line {block.line}: {tool} needs {sorted(missing)}"
    named = {tool for b in mcp_blocks for tool, _ in tool_calls(b.source)}
    assert {"attach_to_session", "execute_code", "run_command"} <= named
    # The notebook tools the prose names (and the argument it names) exist too.
    prose = installed[installed.index("`execute_code` takes") : installed.index("for sandbox work.")]
    mentioned = re.findall(r"`([a-z]+(?:_[a-z]+)+)`", prose)
    assert len(mentioned) >= 7
    for tool in mentioned:
        assert tool in schemas, f"the skill names a tool {tool!r} no server has"
    assert "timeout_seconds" in schemas["execute_code"]["properties"]


def test_every_seer_command_in_the_skill_exists(installed: str, tmp_path: Path) -> None:
    """The shell blocks' ``seer`` lines are checked by the runner; the prose's are checked here."""
    from seer.cli import create_app
    from typer.main import get_command

    lines = [
        line
        for b in blocks(installed, tmp_path)
        if b.lang == "bash"
        for line in b.source.splitlines()
        if line.startswith("seer ")
    ]
    assert len(lines) >= 8
    for line in lines:
        assert unknown_seer_command(line) is None, unknown_seer_command(line)
    root: Any = get_command(create_app())
    for text in re.findall(r"`seer ([a-z ]+)", installed):
        first = text.split()[0]
        assert first in root.commands, f"`seer {text}`: no such command"


def test_the_skill_has_runnable_examples(tmp_path: Path) -> None:
    runs = [b for b in blocks(RENDERED, tmp_path) if b.kind == "run" and b.lang == "python"]
    assert len(runs) >= 5
    files = {b.arg: b for b in blocks(RENDERED, tmp_path) if b.kind == "file"}
    assert {"setup.py", "interface.py", "my_helpers.py"} <= set(files)
    # Every example that starts a sandbox either prints how to reach it or ends it itself.
    for code in [b.source for b in runs] + [files["setup.py"].source]:
        assert "json.dumps" in code or "with Sandbox(" in code, code[:200]


# --- running the examples ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """An HF home whose hub cache holds the tiny models under the substituted ids."""
    home = tmp_path_factory.mktemp("skill-hf-home")
    install_all(tiny_dirs(tmp_path_factory, worker_id), home / "hub")
    return home


def _check_example(block: Block, out: str, answers: list[str], files: dict[str, str]) -> None:
    """What one example printed, and what its tool calls answered, say what the skill claims."""
    script = files["setup.py"] if block.lang == "bash" else block.source
    printed = last_json(out) if "json.dumps" in script else {}
    where = f"the example at line {block.line}"
    if "json.dumps" in script:
        assert printed["sandbox_id"].startswith("local-"), where
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
        assert out.strip().splitlines()[0].strip(), "model_tools.generate printed nothing"
        assert "model_tools" in printed["prompt"]
        assert (Path(printed["workspace_dir"]) / "model_tools.py").is_file()
    if "mcp_config" in printed:
        joined = "\n".join(answers)
        assert "hello from" in joined and "probe.py" in joined, joined


@pytest.mark.slow
def test_examples_run(installed: str, tmp_path: Path, hf_cache: Path) -> None:
    """Every example of the installed skill runs through the runner, in order, as an agent would
    (setup script, then its tool calls); then each one's output is checked."""
    path = tmp_path / "SKILL.md"
    path.write_text(installed)
    workdir = tmp_path / "work"
    workdir.mkdir()
    page = run_page(path, workdir, page_env(tmp_path / "seer-home", hf_cache))
    files = {b.arg: b.source for b in blocks(installed, tmp_path) if b.kind == "file" and b.arg}
    # Each run block with the tool calls after it (before the next run block).
    runs = sorted(page.outputs, key=lambda r: r[0].line)
    calls = sorted(page.answers, key=lambda a: a[0].line)
    assert len(runs) >= 6 and len(calls) >= 8
    for i, (block, out) in enumerate(runs):
        end = runs[i + 1][0].line if i + 1 < len(runs) else 10**9
        answers = [text for b, texts in calls if block.line < b.line < end for text in texts]
        tools = [t for b, _ in calls if block.line < b.line < end for t, _ in tool_calls(b.source)]
        if "execute_code" in tools:
            joined = "\n".join(answers)
            assert "LlamaForCausalLM" in joined or "logits changed by" in joined or "['" in joined, joined
        _check_example(block, out, answers, files)
