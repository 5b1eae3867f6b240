"""Every code block of README.md and docs/*.md runs (or is marked cloud/GPU-only and checked), on
the local provider with the tiny offline model: tests/_doc_runner.py says how blocks are told
apart. SKILL.md's blocks run through the same runner in tests/test_skill.py."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import pytest
from _doc_runner import ROOT, census, page_env, run_page
from _model_kit import install_all, tiny_dirs

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def skill_md(tmp: Path) -> Path:
    """seer's SKILL.md as the package renders it, in a file the runner can parse."""
    from seer import guide as skill

    path = tmp / "SKILL.md"
    path.write_text(skill.skill().skill_md)
    return path


def summary(counts: dict[str, Counter[str]]) -> str:
    total: Counter[str] = sum(counts.values(), Counter())
    checked = sum(n for kind, n in total.items() if kind.startswith("check:"))
    why = ", ".join(f"{kind[6:]} {n}" for kind, n in sorted(total.items()) if kind.startswith("check:"))
    return (
        f"{sum(total.values()) - total['setup']} code blocks in {len(counts)} files: {total['run']} run, "
        f"{total['file']} written as files for the blocks after them, {checked} syntax-checked only "
        f"({why}), {total['data']} data parsed, {total['text']} text; {total['unmarked']} unmarked "
        f"(and {total['setup']} hidden set-up blocks run)"
    )


def census_line() -> str:
    """The census of README.md, docs/ and SKILL.md in one line (printed at the end of a run that
    ran these tests: tests/conftest.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        return summary(census([*PAGES, skill_md(Path(tmp))]))


pytestmark = pytest.mark.e2e


@pytest.mark.unit
def test_every_block_is_run_or_marked(tmp_path: Path) -> None:
    """The census: each block of every page is run, a file, check-only (marked why), data or
    text; none is left out silently. The counts are printed for the run's report."""
    counts = census([*PAGES, skill_md(tmp_path)])
    unmarked = {path: c["unmarked"] for path, c in counts.items() if c["unmarked"]}
    line = summary(counts)
    print(line)
    assert not unmarked, f"{line}\nblocks neither run nor marked: {unmarked}"
    assert sum(c["run"] for c in counts.values()) >= 50, line


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """An HF home whose hub cache holds the tiny models under the substituted ids."""
    home = tmp_path_factory.mktemp("docs-hf-home")
    install_all(tiny_dirs(tmp_path_factory, worker_id), home / "hub")
    return home


@pytest.mark.slow
@pytest.mark.parametrize("path", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_blocks_run(path: Path, tmp_path: Path, hf_home: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    run_page(path, workdir, page_env(tmp_path / "seer-home", hf_home))


def _page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text)
    return path


def test_a_block_that_stops_working_fails(tmp_path: Path) -> None:
    """A python block that raises, a shell block that exits non-zero, and a check-only block
    naming a seer name that does not exist each fail the page, naming the block's line."""
    from _doc_runner import run_page

    env = page_env(tmp_path / "seer-home", tmp_path / "hf")
    broken = {
        "python": "```python\nfrom seer import SandboxConfig\n\nSandboxConfig(gpuu=None)\n```\n",
        "shell": "```bash\nseer ls\nfalse\n```\n",
        "check": "<!-- seer: cloud -->\n```python\nfrom seer.environment import NoSuchSandbox\n```\n",
        "synopsis": "<!-- seer: synopsis -->\n```bash\nseer ls [--colour]\n```\n",
    }
    for name, block in broken.items():
        workdir = tmp_path / name
        workdir.mkdir()
        path = _page(workdir, f"# {name}\n\ntext\n\n{block}")
        with pytest.raises(Exception, match=r"line 5|:5\b|page\.md") as failure:
            run_page(path, workdir, env)
        assert failure.type.__name__ != "NotEvaluated", name


@pytest.mark.unit
def test_an_unmarked_block_is_reported(tmp_path: Path) -> None:
    path = _page(tmp_path, "# page\n\n```\nwhat is this?\n```\n\n```text\noutput\n```\n")
    counts = census([path])[str(path)]
    assert counts["unmarked"] == 1 and counts["text"] == 1
    assert "1 unmarked" in summary({str(path): counts})
