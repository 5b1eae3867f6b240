"""Developer and CI sessions: ``nox -l`` lists them, ``nox -s NAME`` runs one.

lint        ruff check + ruff format --check + lint-imports (the import contracts)
typecheck   mypy on seer_core/src/seer
tests       the test command (scripts/test, as README documents), extra arguments go to pytest
bench       the benchmarks in tests/bench (scripts/bench): tables printed, bench-results/*.json
build       wheels and sdists of every released workspace member into dist/
docs        the documentation site (mkdocs build --strict), after checking generated pages

Sessions use uv-made virtual environments under .nox/ and reuse them between runs.
"""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "typecheck", "tests", "docs", "build"]

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
#: torch==2.13.0's CPU wheel lives here on the project's machines (see .ci/run)
WHEELS = Path("/opt/wheels")


def released_members() -> list[Path]:
    """Workspace members that are released: everything the workspace globs match, except the
    test distributions under tests/."""
    members = []
    for pattern in PYPROJECT["tool"]["uv"]["workspace"]["members"]:
        if pattern.split("/", 1)[0] == "tests":
            continue
        members += sorted(Path(p).parent for p in glob.glob(f"{pattern}/pyproject.toml", root_dir=ROOT))
    return members


def test_distributions() -> list[Path]:
    return sorted(Path(p).parent for p in glob.glob("tests/plugins/*/pyproject.toml", root_dir=ROOT))


def install(session: nox.Session, *groups: str, members: bool = True, test_dists: bool = False) -> None:
    """Install dependency groups from pyproject.toml, and (editable) the workspace members."""
    args: list[str] = []
    if WHEELS.is_dir():
        args += ["--find-links", str(WHEELS)]
    if members:
        args += ["-e", "."]
        for member in released_members():
            args += ["-e", str(member)]
    if test_dists:
        for dist in test_distributions():
            args += ["-e", str(dist)]
    for group in groups:
        args += nox.project.dependency_groups(PYPROJECT, group)
    session.install(*args)


def venv_python(session: nox.Session) -> str:
    bindir = session.bin
    assert bindir is not None, "this session needs a virtual environment"
    return str(Path(bindir) / "python")


def source_roots() -> list[str]:
    """The ``src`` folders of the workspace members, test distributions included: where the
    import contracts' root packages are found."""
    members = [*released_members(), *test_distributions()]
    return [str(ROOT / m / "src") for m in members if (ROOT / m / "src").is_dir()]


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repository, then the import contracts
    (``[tool.importlinter]`` in pyproject.toml) with lint-imports. The contracts read the members'
    source through PYTHONPATH, so nothing but the lint tools is installed."""
    install(session, "lint", members=False)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports", "--no-cache", env={"PYTHONPATH": os.pathsep.join(source_roots())})


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy on the core package (configuration in pyproject.toml)."""
    install(session, "typecheck", "ml")
    session.run("mypy", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite, as README documents it (scripts/test); posargs go to pytest."""
    install(session, "dev", test_dists=True)
    session.run(
        "bash", "scripts/test", *session.posargs, env={"SEER_PYTHON": venv_python(session)}, external=True
    )


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmarks (tests/bench): seer against hand-written baselines in the same run."""
    install(session, "test", "ml")
    session.run(
        "bash", "scripts/bench", *session.posargs, env={"SEER_PYTHON": venv_python(session)}, external=True
    )


@nox.session
def build(session: nox.Session) -> None:
    """Build the sdist and wheel of every released workspace member into dist/."""
    install(session, "build", members=False)
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    for member in [Path("."), *released_members()]:
        session.run("python", "-m", "build", "--no-isolation", "--outdir", str(dist), str(member))
    wheels = sorted(p.name for p in dist.glob("*.whl"))
    session.log("built: " + ", ".join(sorted(os.listdir(dist))))
    expected = 1 + len(released_members())
    if len(wheels) != expected:
        session.error(f"expected {expected} wheels in dist/, found {wheels}")


@nox.session
def docs(session: nox.Session) -> None:
    """Check the generated reference pages (and, with bench-results/, the benchmark figures) are
    current, then mkdocs build --strict into site/: the API reference comes from the docstrings."""
    install(session, "docs")
    session.run("python", "scripts/gen_docs.py", "--check")
    session.run("python", "scripts/bench_plots.py", "--check")  # when bench-results/ is here
    # NO_MKDOCS_2_WARNING: mkdocs-material's end-of-life banner, which says nothing about our pages.
    session.run("mkdocs", "build", "--strict", *session.posargs, env={"NO_MKDOCS_2_WARNING": "1"})
