"""Developer and CI sessions: ``nox -l`` lists them, ``nox -s NAME`` runs one.

lint        ruff check + ruff format --check + lint-imports (the import contracts)
typecheck   mypy on seer_core/src/seer
tests       the test command (scripts/test, as README documents), extra arguments go to pytest;
            ``nox -s tests -- --fast`` runs the unit tests only (``-m unit``, under 2 minutes)
bench       the benchmarks in tests/bench (scripts/bench): tables printed, bench-results/*.json
build       wheels and sdists of every released workspace member into dist/
install_check  build, then install each extra alone from dist/ with the index on (slow; not in CI)
conformance the provider matrix (scripts/matrix): one session per provider, each in a venv with only
            core and that provider, running its conformance suite and seed flows
docs        the documentation site (mkdocs build --strict), after checking generated pages

Sessions use uv-made virtual environments under .nox/ and reuse them between runs.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
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
            project = nox.project.load_toml(ROOT / member / "pyproject.toml")["project"]
            testing = "testing" in project.get("optional-dependencies", {})  # its test kit's needs
            args += ["-e", f"{member}[testing]" if testing else str(member)]
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
    """The whole test suite, as README documents it (scripts/test); posargs go to pytest, except
    ``--fast``, which scripts/test turns into the unit set (``nox -s tests -- --fast``)."""
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
    build_all(session)


def build_all(session: nox.Session) -> Path:
    """Build every released member's sdist and wheel into a fresh dist/; return it."""
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
    return dist


#: The extras install_check installs one at a time ("" is the bare ``seer``).
INSTALL_CHECK_EXTRAS = [
    "",
    "docker",
    "mcp",
    "modal",
    "ssh",
    "runpod",
    "slurm",
    "toolkit",
    "models",
    "notebook",
]
#: Extras that need not bring the client-side packages (seer.extras.CLIENT_PACKAGES), as in
#: tests/test_versions.py; the bare ``seer`` must instead say which extra to install.
NOT_SELF_SUFFICIENT = {"", "models"}

#: Run in each fresh venv: what was installed, what ``seer plugins`` lists, and whether the seed
#: flow's imports and the client-side packages work. Prints one JSON object.
_INSTALL_PROBE = """
import json, subprocess, sys
from importlib import metadata
out = {"versions": {}, "errors": []}
for dist in ("seer", "seer-core"):
    try:
        out["versions"][dist] = metadata.version(dist)
    except metadata.PackageNotFoundError:
        out["versions"][dist] = None
try:
    from seer.environment import Sandbox, SandboxConfig, ExecutionMode, ModelConfig
    from seer.workspace import Workspace
    from seer.execution import create_notebook_session
except Exception as exc:
    out["errors"].append(f"seed imports: {type(exc).__name__}: {exc}")
try:
    from seer.errors import MissingExtraError
    from seer.extras import CLIENT_PACKAGES, require
    out["client"] = {}
    for module in CLIENT_PACKAGES:
        try:
            require(module, "install_check")
            out["client"][module] = "ok"
        except MissingExtraError as exc:
            out["client"][module] = str(exc)
except Exception as exc:
    out["errors"].append(f"client packages: {type(exc).__name__}: {exc}")
seer = [sys.executable, "-c", "from seer.cli import main; main()"]
run = subprocess.run([*seer, "plugins", "--json"], capture_output=True, text=True)
if run.returncode:
    out["errors"].append(f"seer plugins --json exited {run.returncode}: {run.stderr[-2000:]}")
else:
    report = json.loads(run.stdout)
    out["plugins"] = sorted({p["distribution"] for p in report["plugins"] if p["loaded"]})
    out["skipped"] = [f"{p['name']}: {p['skipped']}" for p in report["plugins"] if not p["loaded"]]
print(json.dumps(out))
"""


def expected_plugin_distributions(extra: str) -> list[str]:
    """The distributions whose ``seer`` plugins ``seer[extra]`` brings: seer-core's built-ins,
    and every member it pulls (through the workspace's own pins) that publishes entry points. The
    same walk the provider matrix uses (scripts/matrix)."""
    members = MATRIX.workspace_members()
    pulled = MATRIX.closure(members, f"seer[{extra}]" if extra else "seer")
    return MATRIX.plugin_distributions(members, pulled)


@nox.session
def install_check(session: nox.Session) -> None:
    """Install seer as users are told to, one extra at a time: build every wheel, then for each
    extra make a fresh venv with the package index on, ``pip install --find-links dist
    "seer[<extra>]"``, and check that our seer was installed (not the unrelated ``seer`` 0.1.1 on
    the public index), that ``seer plugins`` lists exactly the plugins that extra brings, that the
    seed flow's imports work, and that the client-side packages are there (or, for the bare
    ``seer``, that their absence is a clear error naming the extra). Posargs pick extras (``bare``
    for none). Slow (it downloads what each extra needs), so not part of .ci/run."""
    import json
    import tempfile

    dist = build_all(session)
    extras = [("" if e == "bare" else e) for e in session.posargs] or INSTALL_CHECK_EXTRAS
    version = PYPROJECT["project"]["version"]
    links = ["--find-links", str(dist)]
    if WHEELS.is_dir():  # torch (seer[models] pulls it through peft): the local CPU wheel
        links += ["--find-links", str(WHEELS)]
    failures: list[str] = []
    for extra in extras:
        spec = f"seer[{extra}]" if extra else "seer"
        with tempfile.TemporaryDirectory(prefix="seer-install-check-") as tmp:
            venv = Path(tmp) / "venv"
            session.run("python", "-m", "venv", str(venv), silent=True)
            python = str(venv / "bin" / "python")
            session.log(f"{spec}: pip install {' '.join(links)} {spec!r}")
            session.run(python, "-m", "pip", "install", "--quiet", *links, spec, external=True)
            probe = session.run(python, "-c", _INSTALL_PROBE, external=True, silent=True)
        got = json.loads(str(probe).strip().splitlines()[-1])
        problems = list(got["errors"])
        if got["versions"] != {"seer": version, "seer-core": version}:
            problems.append(f"installed {got['versions']}, not seer {version}")
        want = expected_plugin_distributions(extra)
        if got.get("plugins") is not None and got["plugins"] != want:
            problems.append(f"seer plugins lists {got['plugins']}, expected {want} ({got['skipped']})")
        for module, state in got.get("client", {}).items():
            if extra not in NOT_SELF_SUFFICIENT and state != "ok":
                problems.append(f"client package {module!r} missing: {state}")
            if not extra and (state == "ok" or 'pip install "seer[' not in state):
                problems.append(f"bare seer: {module!r} should be missing with a hint, got {state!r}")
        verdict = "ok" if not problems else "FAILED: " + "; ".join(problems)
        session.log(f"{spec}: seer {got['versions']['seer']}, plugins {got.get('plugins')}: {verdict}")
        failures += [f"{spec}: {p}" for p in problems]
    if failures:
        session.error("install_check failed:\n  " + "\n  ".join(failures))


#: scripts/matrix, the provider matrix's one implementation (.ci/run runs it with --quick)
_MATRIX_LOADER = SourceFileLoader("seer_matrix", str(ROOT / "scripts" / "matrix"))
MATRIX = module_from_spec(spec_from_loader("seer_matrix", _MATRIX_LOADER))  # type: ignore[arg-type]
sys.modules["seer_matrix"] = MATRIX  # its dataclasses look their module up there
_MATRIX_LOADER.exec_module(MATRIX)


@nox.session(venv_backend="none")
@nox.parametrize("provider", [s.provider for s in MATRIX.sessions()])
def conformance(session: nox.Session, provider: str) -> None:
    """One provider of the matrix: ``scripts/matrix <provider>`` makes ``.matrix/<provider>/``
    with only seer-core and that provider's distribution, checks ``seer plugins`` loads exactly
    those, and runs the provider's ``[tool.seer.matrix]`` tests (conformance and seed flows). A
    provider whose engine is missing here passes with its tests skipped, saying why. Posargs go
    to scripts/matrix (``-- --quick`` for the cheap independence check .ci/run does)."""
    session.run(sys.executable, "scripts/matrix", provider, *session.posargs, external=True)


@nox.session
def docs(session: nox.Session) -> None:
    """Check the generated reference pages (and, with bench-results/, the benchmark figures) are
    current, then mkdocs build --strict into site/: the API reference comes from the docstrings."""
    install(session, "docs")
    session.run("python", "scripts/gen_docs.py", "--check")
    session.run("python", "scripts/bench_plots.py", "--check")  # when bench-results/ is here
    # NO_MKDOCS_2_WARNING: mkdocs-material's end-of-life banner, which says nothing about our pages.
    session.run("mkdocs", "build", "--strict", *session.posargs, env={"NO_MKDOCS_2_WARNING": "1"})
