"""Every code block of README.md, docs/*.md and seer's SKILL.md, collected with sybil and run.

Used by tests/test_doc_blocks.py (README and docs pages) and tests/test_skill.py (SKILL.md). A
block is one of these, and nothing else; a fence that is none of them fails the run:

* **run**: a ```python block is executed in the page's namespace (the blocks of a page continue
  each other, in order, like a notebook); a ```bash block runs with ``bash -e`` in the page's
  folder; an ```mcp block (SKILL.md: MCP tool calls written as Python calls with keyword
  arguments) is made through the real server the tool belongs to, with ``"<session_id>"`` and
  ``"<jupyter_url>"`` filled in from the JSON the block before printed.
* **file**: a fence with ``title="NAME"``, or after ``<!-- seer: file NAME -->``, is written as
  ``NAME`` into the page's folder before the page runs (``interface.py``, ``sandbox.yaml``), and
  again where it stands (a later block of the same name replaces it from there on).
  A python block after ``<!-- seer: in-sandbox -->`` is code that runs inside a sandbox (seer's
  in-sandbox runtime): it runs there, in a CLI sandbox with the tiny model the runner starts for
  the page.
  ``<!-- invisible-code-block: python ... -->`` (sybil's own) runs hidden set-up code the same way
  a python block runs.
* **check**: after ``<!-- seer: cloud -->``, ``<!-- seer: gpu -->``, ``<!-- seer: docker -->``
  (needs an engine the test machine may lack), ``<!-- seer: install -->`` (installs packages or
  runs a whole test or benchmark suite), ``<!-- seer: synopsis -->`` (a command's usage line,
  ``seer exec ID [--timeout SECONDS]``) or ``<!-- seer: excerpt -->`` (an annotated excerpt of a
  source file in the repository, which its own tests run), a block is compiled (``bash -n`` for shell) and the
  ``seer`` names it uses must exist: python imports and attributes of seer modules, and every
  ``seer ...`` command line's command and options.
* **data**: ```json, ```yaml and ```toml blocks are parsed.
* **text**: ```text (output, layouts, signatures), ```markdown, ```dockerfile and ```mermaid.

Pages run on the local provider with the tiny offline model. The only changes made to a block
before it runs, because the test machine has no GPU and no network: the model ids in
:data:`MODEL_SUBSTITUTIONS` become the tiny test models (served from a Hugging Face cache made for
the run, ``HF_HUB_OFFLINE=1``), and every ``gpu="..."`` becomes ``gpu=None``.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from _model_kit import ADAPTER_ID, MODEL_ID
from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[1]

#: The model ids the pages use, and the tiny offline models a run gives them.
MODEL_SUBSTITUTIONS = {
    '"google/gemma-2-9b-it"': f'"{MODEL_ID}"',
    '"google/gemma-2-9b"': f'"{MODEL_ID}"',
    '"google/gemma-2-2b-it"': f'"{MODEL_ID}"',
    '"your-org/gemma-2-9b-it-adapter"': f'"{ADAPTER_ID}"',
    '"user/gemma-adapter"': f'"{ADAPTER_ID}"',
    "MODEL_GOOGLE_GEMMA_2_9B_PATH": "MODEL_SEER_TESTING_TINY_LLAMA_PATH",
}
_GPU = re.compile(r"\bgpu=\"[^\"]*\"")
#: ``<!-- seer: KIND [ARGUMENT] -->`` right before a fence.
_MARK = re.compile(r"<!--\s*seer:\s*(?P<kind>[\w-]+)(?:\s+(?P<arg>\S+))?\s*-->\s*$")
CHECK_ONLY = ("cloud", "gpu", "docker", "install", "synopsis", "excerpt")
TEXT = {"text", "markdown", "dockerfile", "mermaid"}
DATA = {"json", "yaml", "toml"}
SHELL = {"bash", "sh"}
_PLACEHOLDERS = ("session_id", "jupyter_url")


def substitute(code: str) -> str:
    """The block as a run executes it: tiny models for the pages' model ids, no GPU."""
    for old, new in MODEL_SUBSTITUTIONS.items():
        code = code.replace(old, new)
    return _GPU.sub("gpu=None", code)


@dataclass
class Block:
    """What one fence is, as this runner sees it."""

    kind: str  # run | file | check | data | text | unmarked
    lang: str
    source: str
    line: int
    #: why a check-only block is not run (cloud, gpu, docker, install); a file's name
    arg: str | None = None


def _info_lexer() -> RawFencedCodeBlockLexer:
    """Every fence, its whole info string (language and attributes) kept."""
    return RawFencedCodeBlockLexer(
        info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.MULTILINE),
        mapping={"info": "info", "source": "source"},
    )


class BlockParser:
    """The sybil parser: one region per fence and per invisible set-up block, each with the
    evaluator for its kind; a fence with no kind gets an evaluator that fails naming it."""

    def __init__(self) -> None:
        self.fences = _info_lexer()
        self.hidden = DirectiveInHTMLCommentLexer(directive="invisible-code-block", arguments="python")

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.hidden(document):
            block = Block("run", "python", str(region.lexemes["source"]), 0, "hidden")
            yield self._region(document, region, block)
        fences = sorted(self.fences(document), key=lambda r: (r.start, -r.end))
        end = -1
        for region in fences:
            if region.start < end:
                continue  # a fence inside a longer fence (````markdown showing a ```python) is text
            end = region.end
            yield self._region(document, region, classify(document.text, region))

    @staticmethod
    def _region(document: Document, region: Region, block: Block) -> Region:
        block.line = document.text.count("\n", 0, region.start) + 1
        region.parsed = block
        region.evaluator = evaluate
        return region


def classify(text: str, region: Region) -> Block:
    info = str(region.lexemes["info"]).strip()
    lang = info.split()[0] if info else ""
    source = str(region.lexemes["source"])
    before = text[: region.start].rstrip("\n").rsplit("\n", 1)[-1]
    mark = _MARK.search(before)
    title = re.search(r'title="([^"]+)"', info)
    if title:
        return Block("file", lang, source, 0, title.group(1))
    if mark and mark["kind"] == "file" and mark["arg"]:
        return Block("file", lang, source, 0, mark["arg"])
    if mark and mark["kind"] == "in-sandbox" and lang == "python":
        return Block("run", lang, source, 0, "in-sandbox")
    if mark and mark["kind"] in CHECK_ONLY and (lang == "python" or lang in SHELL):
        return Block("check", lang, source, 0, mark["kind"])
    if lang == "python" or lang in SHELL or lang == "mcp":
        return Block("run", lang, source, 0)
    if lang in DATA:
        return Block("data", lang, source, 0)
    if lang in TEXT:
        return Block("text", lang, source, 0)
    return Block("unmarked", lang, source, 0)


SYBIL = Sybil(parsers=[BlockParser()], path=str(ROOT))


def parse(path: Path) -> Document:
    return SYBIL.parse(path)


def census(paths: Iterable[Path]) -> dict[str, Counter[str]]:
    """``{path: Counter(kind -> blocks)}``, check-only blocks counted as ``check:<why>`` and hidden
    set-up blocks (``invisible-code-block``) as ``setup``."""
    found: dict[str, Counter[str]] = {}
    for path in paths:
        counts: Counter[str] = Counter()
        for example in parse(path):
            block: Block = example.parsed
            if block.kind == "check":
                counts[f"check:{block.arg}"] += 1
            else:
                counts["setup" if block.arg == "hidden" else block.kind] += 1
        found[str(path)] = counts
    return found


# --- evaluation -------------------------------------------------------------------------------


@dataclass
class Page:
    """A page's run: its folder and environment, and what its blocks printed."""

    workdir: Path
    env: dict[str, str]
    #: (block, what it printed) for every run block, in order
    outputs: list[tuple[Block, str]] = field(default_factory=list)
    #: the answers of the MCP tool calls, per mcp block
    answers: list[tuple[Block, list[str]]] = field(default_factory=list)
    #: ```mcp blocks not made yet: a run of them is made by one server, before the next block runs
    pending_calls: list[Block] = field(default_factory=list)
    #: the sandbox in-sandbox blocks run in (started by the first one)
    model_sandbox: Any = None

    @property
    def printed(self) -> dict[str, Any]:
        """The JSON object the last block run printed on its last line (a setup script's answer),
        or ``{}``."""
        return last_json(self.outputs[-1][1]) if self.outputs else {}


def last_json(output: str) -> dict[str, Any]:
    """The JSON object on the last line of ``output``, or ``{}``."""
    lines = output.strip().splitlines()
    try:
        value = json.loads(lines[-1]) if lines else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def evaluate(example: Example) -> str | None:
    block: Block = example.parsed
    where = f"{Path(example.path).name}:{block.line}"
    if block.kind == "unmarked":
        return (
            f"{where}: a ```{block.lang or '(no language)'} block is neither run nor marked: give it a "
            f"language (text for output) or a mark: <!-- seer: {'|'.join(CHECK_ONLY)} -->"
        )
    if block.kind == "text":
        return None
    if block.kind == "data":
        _parse_data(block, where)
        return None
    if block.kind == "check":
        _check(block, where)
        return None
    page: Page = example.namespace["__page__"]
    if block.kind == "file":
        if block.lang == "python":
            compile(block.source, where, "exec")
        (page.workdir / str(block.arg)).write_text(substitute(block.source))
        return None
    try:
        if block.lang != "mcp":
            flush_tool_calls(page)
        if block.arg == "in-sandbox":
            _run_in_sandbox(page, block, where)
        elif block.lang == "python":
            _run_python(example, page, block, where)
        elif block.lang in SHELL:
            _run_shell(page, block, where)
        elif block.lang == "mcp":
            page.pending_calls.append(block)  # made with the mcp blocks after it, by one server
    except Exception as exc:
        raise BlockFailed(f"{where}: the {block.lang} block failed: {type(exc).__name__}: {exc}") from exc
    return None


class BlockFailed(AssertionError):
    """A block that runs did not: the page and line, and what it raised (chained)."""


def _parse_data(block: Block, where: str) -> None:
    try:
        if block.lang == "json":
            json.loads(block.source)
        elif block.lang == "yaml":
            yaml.safe_load(block.source)
        else:
            tomllib.loads(block.source)
    except Exception as exc:
        raise AssertionError(f"{where}: the {block.lang} block does not parse: {exc}") from exc


class _Tee(io.StringIO):
    def __init__(self, stream: Any) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(text)
        return super().write(text)


def _run_python(example: Example, page: Page, block: Block, where: str) -> None:
    code = compile(substitute(block.source), where, "exec")
    out = _Tee(sys.stdout)
    with contextlib.redirect_stdout(out):
        exec(code, example.namespace)
    page.outputs.append((block, out.getvalue()))


def _run_in_sandbox(page: Page, block: Block, where: str) -> None:
    from seer import ModelConfig, Sandbox, SandboxConfig

    if page.model_sandbox is None:
        config = SandboxConfig(execution_mode="cli", models=[ModelConfig(name=MODEL_ID)])
        page.model_sandbox = Sandbox(config, progress=False).start()
    done = page.model_sandbox.exec_python(substitute(block.source), timeout=300)
    assert done.exit_code == 0, f"{where}: in the sandbox, exit {done.exit_code}\n{done.stderr[-4000:]}"
    page.outputs.append((block, done.stdout))


def _run_shell(page: Page, block: Block, where: str) -> None:
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", substitute(block.source)],
        cwd=page.workdir,
        env=page.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, f"{where}: exit {done.returncode}\n{output}"
    page.outputs.append((block, done.stdout))


# --- check-only blocks: syntax, and the seer names they use -----------------------------------


def _check(block: Block, where: str) -> None:
    if block.lang == "python":
        tree = ast.parse(block.source, where)
        for problem in unresolved_seer_names(tree):
            raise AssertionError(f"{where}: {problem}")
        return
    syntax = subprocess.run(["bash", "-n", "-c", block.source], capture_output=True, text=True)
    assert syntax.returncode == 0, f"{where}: {syntax.stderr}"
    for line in block.source.splitlines():
        problem = unknown_seer_command(line)
        assert problem is None, f"{where}: {problem}"


def _is_seer(module: str) -> bool:
    return module == "seer" or module.startswith(("seer.", "seer_"))


def unresolved_seer_names(tree: ast.AST) -> Iterator[str]:
    """What a python block names in seer's packages that does not exist: modules, imported
    names, and attribute chains on them (``seer.hookimpl``, ``plugins.get_provider``)."""
    import importlib

    bound: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_seer(alias.name):
                    try:
                        module = importlib.import_module(alias.name)
                    except ImportError as exc:
                        yield f"import {alias.name}: {exc}"
                        continue
                    if alias.asname:
                        bound[alias.asname] = module
                    else:
                        top = alias.name.split(".")[0]
                        bound[top] = importlib.import_module(top)
        elif isinstance(node, ast.ImportFrom) and node.module and _is_seer(node.module):
            try:
                module = importlib.import_module(node.module)
            except ImportError as exc:
                yield f"from {node.module} import ...: {exc}"
                continue
            for alias in node.names:
                try:
                    bound[alias.asname or alias.name] = getattr(module, alias.name)
                except AttributeError:
                    try:
                        bound[alias.asname or alias.name] = importlib.import_module(
                            f"{node.module}.{alias.name}"
                        )
                    except ImportError:
                        yield f"{node.module} has no {alias.name!r}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            chain: list[str] = []
            value: ast.expr = node
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound and not isinstance(bound[value.id], type):
                obj = bound[value.id]
                for attr in reversed(chain):
                    if not hasattr(obj, attr):
                        yield f"{value.id}.{'.'.join(reversed(chain))}: {obj!r} has no {attr!r}"
                        break
                    obj = getattr(obj, attr)


def unknown_seer_command(line: str) -> str | None:
    """Why a ``seer ...`` shell line names no real command or option (``None`` when it does, or
    when the line is not a seer command). Placeholders (``ID``, ``CONFIG``) are not checked."""
    import typer
    from seer.cli import create_app

    words = line.split("#", 1)[0].split()
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]  # VAR=value seer ...
    if not words or words[0] != "seer":
        return None
    root: Any = typer.main.get_command(create_app())
    command: Any = root
    rest = words[1:]
    # (typer carries its own click: groups are told by their `commands`.)
    while hasattr(command, "commands") and rest and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
    if command is root:
        return f"`{' '.join(words)}`: no such command"
    if hasattr(command, "commands") and not getattr(command, "invoke_without_command", False):
        return f"`{' '.join(words)}`: names a group, not a command"  # (one that runs alone is both)
    options = {o for p in command.params for o in getattr(p, "opts", [])}
    for word in rest:
        if word == "--":
            break
        option = word.strip("[]").split("=")[0]
        if option.startswith("-") and option not in options:
            return f"`{' '.join(words)}`: {command.name} has no option {option}"
    return None


# --- MCP tool calls ---------------------------------------------------------------------------


def tool_calls(source: str, line: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """``[(tool, {argument: value})]``: each statement one call, with literal keyword arguments."""
    calls = []
    for stmt in ast.parse(source).body:
        where = f"line {line + stmt.lineno}"
        assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call), f"{where}: not a call"
        call = stmt.value
        assert isinstance(call.func, ast.Name), f"{where}: call a tool by its name"
        assert not call.args, f"{where}: pass tool arguments by name"
        assert all(k.arg for k in call.keywords), f"{where}: no **arguments"
        calls.append((call.func.id, {str(k.arg): ast.literal_eval(k.value) for k in call.keywords}))
    return calls


def _fill(value: Any, printed: dict[str, Any]) -> Any:
    if isinstance(value, str):
        for key in _PLACEHOLDERS:
            value = value.replace(f"<{key}>", str(printed.get(key, f"<{key}>")))
    return value


def run_tool_calls(blocks: list[Block], page: Page) -> None:
    """Make the blocks' tool calls, in order, through the real servers: the notebook server in
    process, and the shell server from the ``mcp_config`` the setup script printed, one of each
    for the whole run of blocks (a session attached in one block is used in the next). Each
    block's answers go to ``page.answers``."""
    import anyio

    async def calls() -> None:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters
        from seer_mcp.notebook import build_server as notebook_server
        from seer_mcp.shell import TOOLS as SHELL_TOOLS

        printed = page.printed
        server, registry = notebook_server()
        try:
            async with Client(server) as notebook:
                shell: Client | None = None
                for block in blocks:
                    answers = []
                    for tool, arguments in tool_calls(block.source, block.line):
                        arguments = {k: _fill(v, printed) for k, v in arguments.items()}
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
                        where = f"line {block.line}: {tool}({arguments})"
                        assert not result.is_error, f"{where} failed:\n{text}"
                        assert "Traceback" not in text, f"{where} raised:\n{text}"
                        answers.append(text)
                    page.answers.append((block, answers))
                if shell is not None:
                    await shell.__aexit__(None, None, None)
        finally:
            registry.close()

    anyio.run(calls)


def flush_tool_calls(page: Page) -> None:
    """Make the tool calls of the ```mcp blocks waiting since the last block run."""
    pending, page.pending_calls = page.pending_calls, []
    if pending:
        run_tool_calls(pending, page)


# --- a page's run ---------------------------------------------------------------------------


def seer_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seer", *args], env=env, capture_output=True, text=True, timeout=300
    )


def page_env(home: Path, hf_home: Path) -> dict[str, str]:
    """The environment a page runs in: its own ``SEER_HOME``, the tiny models' HF cache, offline;
    ``seer`` on ``PATH`` is this interpreter's."""
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "SEER_HOME": str(home),
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
        "HF_TOKEN": "hf_not_a_real_token",  # pages name it as a secret
        # docker sandboxes are found engine-wide by label: `down --all` here must not reach the
        # Docker tests' sandboxes
        "SEER_DISABLE_PLUGINS": "docker",
    }


@contextlib.contextmanager
def environment(env: dict[str, str], workdir: Path) -> Iterator[None]:
    """This process runs in ``env`` and ``workdir`` (in-process blocks see what shell blocks see)."""
    saved, cwd = dict(os.environ), Path.cwd()
    os.environ.clear()
    os.environ.update({k: v for k, v in env.items() if k != "SEER_DISABLE_PLUGINS"})
    os.chdir(workdir)
    try:
        yield
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)


def run_page(path: Path, workdir: Path, env: dict[str, str]) -> Page:
    """Run every block of the page at ``path`` in order, in ``workdir``; afterwards terminate
    every sandbox the page started (``seer down --all`` on its ``SEER_HOME``) and fail if one is
    left. Returns what the blocks printed."""
    # a home of its own: pages write to ~ (`seer skill install ~/skills`, `Path.home() / ...`)
    (workdir / "home").mkdir()
    env = {**env, "HOME": str(workdir / "home")}
    page = Page(workdir, env)
    # what the pages' commands name relative to a checkout: `.venv/bin/python examples/quickstart.py`
    (workdir / ".venv").symlink_to(sys.prefix)
    (workdir / "examples").symlink_to(ROOT / "examples")
    document = parse(path)
    document.namespace["__page__"] = page
    document.namespace["__name__"] = "__main__"
    examples = list(document)
    for example in examples:  # files first: a page may use one before it shows it
        block = example.parsed
        if block.kind == "file" and not (workdir / str(block.arg)).exists():
            (workdir / str(block.arg)).write_text(substitute(block.source))
    try:
        with environment(env, workdir):
            for example in examples:
                example.evaluate()
            flush_tool_calls(page)
    finally:
        if page.model_sandbox is not None:
            page.model_sandbox.terminate()
        down = seer_cli(["down", "--all"], env)
        assert down.returncode == 0, down.stderr
        left = seer_cli(["ls", "--json"], env)
        assert json.loads(left.stdout) == [], f"{path.name} left sandboxes running: {left.stdout}"
    return page
