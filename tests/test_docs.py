"""The docs say what the code does: generated tables are current, every hook has its heading,
and the README's commands are the ones CI runs. (``nox -s docs`` builds the site itself.)"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_seer_gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_docs_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    code = _gen_docs().main(["--check"])
    assert code == 0, capsys.readouterr().err


def test_every_config_field_is_documented() -> None:
    from seer.config import ExperimentConfig, ModelConfig, RepoConfig

    text = (DOCS / "config.md").read_text()
    for model in (ExperimentConfig, ModelConfig, RepoConfig):
        for name in model.model_fields:
            assert f"| `{name}` |" in text, f"docs/config.md has no row for {model.__name__}.{name}"


def test_every_error_class_is_in_troubleshooting() -> None:
    from seer import errors

    headings = set(re.findall(r"^### (\w+)\s*$", (DOCS / "troubleshooting.md").read_text(), re.MULTILINE))
    classes = {
        name
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, BaseException) and cls.__module__ == errors.__name__
    }
    missing = sorted(classes - headings)
    assert not missing, f"docs/troubleshooting.md needs a '### <class>' heading for: {', '.join(missing)}"


def test_every_hook_has_a_heading_in_plugins_doc() -> None:
    from seer import hookspecs

    headings = set(re.findall(r"^### (\w+)\s*$", (DOCS / "plugins.md").read_text(), re.MULTILINE))
    hooks = {
        name
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("seer_") and hasattr(fn, "seer_spec")
    }
    assert hooks, "no hook specs found"
    missing = sorted(hooks - headings)
    assert not missing, f"docs/plugins.md needs a '### <hook>' heading for: {', '.join(missing)}"


def _documented_hooks() -> dict[str, ast.FunctionDef]:
    """Each ``### <hook>`` section of docs/plugins.md: the ``def`` of that name in its first python
    code block."""
    text = (DOCS / "plugins.md").read_text()
    found: dict[str, ast.FunctionDef] = {}
    sections = re.split(r"^### ", text, flags=re.MULTILINE)[1:]
    for section in sections:
        name = section.split("\n", 1)[0].strip()
        if not name.startswith("seer_"):
            continue
        block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
        assert block, f"docs/plugins.md: the {name} section shows no python code block with its signature"
        for node in ast.walk(ast.parse(block.group(1))):
            if isinstance(node, ast.FunctionDef) and node.name == name:
                found[name] = node
    return found


def test_every_hooks_documented_signature_is_its_spec() -> None:
    """The signature each hook's section shows is the one in hookspecs.py: the same parameters in
    the same order (pluggy calls hooks by those names), under ``@hookimpl``, and any annotation
    shown the spec's own."""
    from seer import hookspecs

    specs = {
        name: fn
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("seer_") and hasattr(fn, "seer_spec")
    }
    documented = _documented_hooks()
    assert set(documented) == set(specs), (
        f"sections without a signature: {sorted(set(specs) - set(documented))}"
    )
    problems = []
    for name, node in documented.items():
        spec = inspect.signature(specs[name])
        shown = [arg.arg for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        if shown != list(spec.parameters):
            problems.append(
                f"{name}: docs show ({', '.join(shown)}), hookspecs.py has ({', '.join(spec.parameters)})"
            )
        if not any(ast.unparse(d) == "hookimpl" for d in node.decorator_list):
            problems.append(f"{name}: the documented signature is not under @hookimpl")
        source_params = {a.arg: a.annotation for a in node.args.args}
        spec_source = inspect.getsource(specs[name])
        spec_def = next(n for n in ast.walk(ast.parse(spec_source)) if isinstance(n, ast.FunctionDef))
        spec_annotations = {a.arg: a.annotation for a in spec_def.args.args}
        for param, annotation in source_params.items():
            if annotation is not None and param in spec_annotations:
                want = spec_annotations[param]
                if want is None or ast.unparse(annotation) != ast.unparse(want):
                    problems.append(f"{name}: {param} is shown as {ast.unparse(annotation)}")
        if node.returns is not None and (
            spec_def.returns is None or ast.unparse(node.returns) != ast.unparse(spec_def.returns)
        ):
            problems.append(f"{name}: the return is shown as {ast.unparse(node.returns)}")
    assert not problems, "docs/plugins.md: " + "; ".join(problems)


def test_readme_commands_are_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash .ci/run" in readme
    assert "python examples/quickstart.py" in readme and (ROOT / "examples" / "quickstart.py").is_file()
    # The README's test command is scripts/test, and CI runs exactly that.
    assert "scripts/test" in readme
    assert re.search(r"^scripts/test\b", ci, re.MULTILINE), ".ci/run must run scripts/test"


def test_mkdocs_nav_lists_every_page() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    listed = set(re.findall(r"^\s*-\s*(?:[^:\n]*:\s*)?([\w/-]+\.md)\s*$", nav, re.MULTILINE))
    assert pages == listed, f"pages not in mkdocs.yml nav: {pages - listed}; missing files: {listed - pages}"


def _api_modules() -> list[str]:
    """The modules the API reference renders: every ``::: module`` line of docs/api/*.md."""
    found = []
    for page in sorted((DOCS / "api").glob("*.md")):
        found += re.findall(r"^::: ([\w.]+)\s*$", page.read_text(), re.MULTILINE)
    return found


def _public_names(module: ModuleType) -> list[str]:
    """``__all__``, else the public names the module defines itself (not what it imports)."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", None) == module.__name__
    ]


def _undocumented(module: ModuleType) -> list[str]:
    missing = []
    for name in _public_names(module):
        value = getattr(module, name)
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue  # constants are documented by their `#:` comments, which mkdocstrings shows
        if not inspect.getdoc(value):
            missing.append(f"{module.__name__}.{name}")
        if not inspect.isclass(value) or getattr(value, "__module__", None) != module.__name__:
            continue
        for attr, member in vars(value).items():
            if attr.startswith(("_", "test_")):
                continue  # a contract suite's tests are named for what they check
            function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            # an override without its own docstring has the overridden method's (inspect.getdoc)
            documented = inspect.getdoc(getattr(value, attr)) or (
                isinstance(member, property) and member.__doc__
            )
            if inspect.isfunction(function) and not documented:
                missing.append(f"{module.__name__}.{name}.{attr}")
    return missing


def test_api_reference_covers_the_public_modules() -> None:
    modules = set(_api_modules())
    wanted = {
        "seer.environment",
        "seer.workspace.workspace",
        "seer.workspace.library",
        "seer.workspace.skill",
        "seer.execution",
        "seer.config.schema",
        "seer.config.files",
        "seer.sandbox.sandbox",
        "seer.sandbox.bootstrap",
        "seer.sandbox.model_cache",
        "seer.notebook.session",
        "seer.notebook.server",
        "seer.sessions.shell",
        "seer.sessions.workdir",
        "seer.sandbox.scoped",
        "seer.rpc.client",
        "seer.expose.modes",
        "seer.providers.base",
        "seer.providers.kit.pump",
        "seer.providers.kit.machine",
        "seer.providers.kit.ledger",
        "seer.providers.kit.gpus",
        "seer.testing.conformance",
        "seer.hookspecs",
        "seer.errors",
    }
    assert wanted <= modules, f"docs/api/ renders none of: {sorted(wanted - modules)}"


@pytest.mark.parametrize("name", _api_modules())
def test_every_public_name_has_a_docstring(name: str) -> None:
    import importlib

    module = importlib.import_module(name)
    assert module.__doc__, f"{name} has no module docstring"
    missing = _undocumented(module)
    assert not missing, f"public names without a docstring: {', '.join(missing)}"
