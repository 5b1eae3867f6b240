"""Tests follow distributions, and every test is a ``unit`` or an ``e2e`` test.

Each released workspace member keeps its tests beside its ``src/`` (``seer_core/tests``,
``providers/docker/tests``, ``plugins/mcp/tests``, ...), listed in pyproject's ``testpaths`` so the
plain run finds them; ``tests/`` holds the flows that cross distributions. The root conftest.py
refuses a collection with an unclassified test, and ``scripts/test --fast`` runs the unit set.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PYTEST = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]


def released_members() -> list[Path]:
    """The workspace members with code of their own (a ``src/``), test distributions aside."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]["members"]
    found = {p.parent for pattern in patterns for p in ROOT.glob(f"{pattern}/pyproject.toml")}
    return sorted(m for m in found if (m / "src").is_dir() and m.relative_to(ROOT).parts[0] != "tests")


def test_every_member_has_its_own_tests_in_testpaths() -> None:
    testpaths = set(PYTEST["testpaths"])
    missing = [
        str(member.relative_to(ROOT))
        for member in released_members()
        if not list((member / "tests").glob("test_*.py"))
        or str((member / "tests").relative_to(ROOT)) not in testpaths
    ]
    assert not missing, f"members without their own tests/ in testpaths: {missing}"
    assert "tests" in testpaths  # the cross-distribution flows


def test_every_test_module_is_under_a_testpath() -> None:
    """A test file outside ``testpaths`` would silently never run (tests/bench runs on its own)."""
    roots = [ROOT / p for p in PYTEST["testpaths"]]
    bench = ROOT / "tests" / "bench"
    # hidden folders (.venv, .nox, .matrix: pytest's norecursedirs has ".*") hold installed packages
    skip = {"node_modules", "site", "build", "dist"}
    stray = [
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("test_*.py")
        if not skip & set(path.relative_to(ROOT).parts)
        and not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
        and bench not in path.parents
        and not any(root in path.parents for root in roots)
    ]
    assert not stray, f"test modules no test run collects: {stray}"


@pytest.fixture
def sample_suite(tmp_path: Path) -> Path:
    """A suite of its own with the repository's kinds plugin and marker registrations: a module
    that defaults to ``unit`` with one ``e2e`` test, and one that defaults to ``e2e``."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["_test_kinds"]\n')
    markers = "\n".join(f"    {m}" for m in PYTEST["markers"])
    (tmp_path / "pytest.ini").write_text(
        f"[pytest]\naddopts = --strict-markers\npythonpath = {ROOT / 'tests'}\nmarkers =\n{markers}\n"
    )
    (tmp_path / "test_mostly_unit.py").write_text(
        textwrap.dedent(
            """
            import pytest

            pytestmark = pytest.mark.unit

            def test_pure(): pass

            @pytest.mark.e2e
            def test_starts_something(): pass

            class TestGroup:
                def test_in_a_class(self): pass
            """
        )
    )
    (tmp_path / "test_mostly_e2e.py").write_text(
        textwrap.dedent(
            """
            import pytest

            pytestmark = [pytest.mark.e2e, pytest.mark.slow]

            def test_a_sandbox(): pass

            @pytest.mark.unit
            @pytest.mark.parametrize("n", [1, 2])
            def test_pure_too(n): pass
            """
        )
    )
    return tmp_path


def _collect(suite: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SEER_TEST_"))}
    pytest_cmd = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider"]
    return subprocess.run(
        [*pytest_cmd, "--collect-only", "-q", *args, str(suite)],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _ids(run: subprocess.CompletedProcess[str]) -> set[str]:
    return {line.strip() for line in run.stdout.splitlines() if "::" in line}


@pytest.mark.e2e
def test_unit_and_e2e_split_the_suite_the_closest_mark_winning(sample_suite: Path) -> None:
    unit, e2e = _collect(sample_suite, "-m", "unit"), _collect(sample_suite, "-m", "e2e")
    assert unit.returncode == 0 and e2e.returncode == 0, unit.stdout + unit.stderr + e2e.stdout
    assert _ids(unit) == {
        "test_mostly_e2e.py::test_pure_too[1]",
        "test_mostly_e2e.py::test_pure_too[2]",
        "test_mostly_unit.py::test_pure",
        "test_mostly_unit.py::TestGroup::test_in_a_class",
    }
    assert _ids(e2e) == {"test_mostly_e2e.py::test_a_sandbox", "test_mostly_unit.py::test_starts_something"}
    # the other marks of a module stay on its tests
    assert _ids(_collect(sample_suite, "-m", "slow")) == {
        "test_mostly_e2e.py::test_a_sandbox",
        "test_mostly_e2e.py::test_pure_too[1]",
        "test_mostly_e2e.py::test_pure_too[2]",
    }


@pytest.mark.e2e
def test_an_unclassified_test_fails_collection_naming_it(sample_suite: Path) -> None:
    (sample_suite / "test_new.py").write_text(
        "import pytest\n\ndef test_forgotten(): pass\n\n"
        "@pytest.mark.unit\n@pytest.mark.e2e\ndef test_torn(): pass\n"
    )
    for args in ((), ("-m", "unit")):  # also when -m would deselect them
        run = _collect(sample_suite, *args)
        assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
        assert "test_new.py::test_forgotten: marked neither unit nor e2e" in run.stderr
        assert "test_new.py::test_torn: marked both unit and e2e" in run.stderr
        assert "test_mostly_unit.py" not in run.stderr


@pytest.mark.e2e
def test_scripts_test_fast_runs_only_the_unit_tests() -> None:
    """``scripts/test --fast`` is ``-m unit``, in process; extra arguments still go to pytest."""
    module = "seer_core/tests/test_cli.py"
    env = {**os.environ, "SEER_PYTHON": sys.executable}
    env.pop("SEER_TEST_WORKERS", None)
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "test"), "--fast", "--collect-only", "-q", module],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    ids = _ids(run)
    assert f"{module}::test_help_documents_every_command" in ids
    assert f"{module}::test_python_dash_m_seer" not in ids  # marked e2e in a unit module
    assert "deselected" in run.stdout and "created: " not in run.stdout  # no xdist workers
