"""The docs say what the code does: generated tables are current, every hook has its heading,
and the README's commands are the ones CI runs. (``nox -s docs`` builds the site itself.)"""

from __future__ import annotations

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
    pages = {p.name for p in DOCS.glob("*.md")}
    listed = set(re.findall(r":\s*([\w-]+\.md)\s*$", nav, re.MULTILINE))
    assert pages == listed, f"pages not in mkdocs.yml nav: {pages - listed}; missing files: {listed - pages}"
