"""Benchmark plumbing: every test here is marked ``bench``; one report prints and saves the figures.

The normal test run never comes here (``norecursedirs`` in pyproject.toml); run the benchmarks
with ``nox -s bench`` or ``scripts/bench``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _harness import BenchReport

_REPORT = BenchReport()
_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.bench)


@pytest.fixture(scope="session")
def bench_report() -> BenchReport:
    """The run's report: ``bench_report.add(group, compare(...))``."""
    return _REPORT


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _REPORT.groups:
        return
    terminalreporter.section("seer benchmarks (medians; ratio = seer / baseline)")
    for group in _REPORT.groups:
        terminalreporter.write_line(_REPORT.table(group))
        terminalreporter.write_line("")
    for path in _REPORT.write_json():
        terminalreporter.write_line(f"wrote {path}")
