"""Every code block of README.md and docs/*.md runs (or is marked cloud/GPU-only and checked), on
the local provider with the tiny offline model: tests/_doc_runner.py says how blocks are told
apart. SKILL.md's blocks run through the same runner in tests/test_skill.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from _doc_runner import ROOT, census, page_env, run_page
from _model_kit import install_all, tiny_dirs

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def skill_md(tmp: Path) -> Path:
    """seer's SKILL.md as the package renders it, in a file the runner can parse."""
    from seer import skill

    path = tmp / "SKILL.md"
    path.write_text(skill.skill().skill_md)
    return path


def summary(counts: dict[str, Counter[str]]) -> str:
    total: Counter[str] = sum(counts.values(), Counter())
    checked = sum(n for kind, n in total.items() if kind.startswith("check:"))
    why = ", ".join(f"{kind[6:]} {n}" for kind, n in sorted(total.items()) if kind.startswith("check:"))
    return (
        f"{sum(total.values())} code blocks in {len(counts)} files: {total['run']} run, "
        f"{total['file']} written as files for the blocks after them, {checked} syntax-checked only "
        f"({why}), {total['data']} data parsed, {total['text']} text; {total['unmarked']} unmarked"
    )


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
