"""The provider matrix (scripts/matrix): every provider in the repository joins it, each session
installs only core, the provider and the members it depends on, and the plugin check catches a
provider that loads another's plugins or fails alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "matrix"


@pytest.fixture(scope="module")
def matrix() -> ModuleType:
    loader = SourceFileLoader("seer_matrix_under_test", str(SCRIPT))
    module = module_from_spec(spec_from_loader(loader.name, loader))  # type: ignore[arg-type]
    sys.modules[loader.name] = module
    loader.exec_module(module)
    return module


def _provider_members() -> list[Path]:
    """Folders under providers/ whose distribution registers seer plugins, and the test
    distributions that do (the toy provider)."""
    found = []
    for pyproject in [*ROOT.glob("providers/*/pyproject.toml"), *ROOT.glob("tests/plugins/*/pyproject.toml")]:
        with open(pyproject, "rb") as fh:
            if tomllib.load(fh)["project"].get("entry-points", {}).get("seer"):
                found.append(pyproject.parent.relative_to(ROOT))
    return sorted(found)


def test_every_provider_distribution_joins_the_matrix(matrix: ModuleType) -> None:
    members = {s.member for s in matrix.sessions()}
    missing = [str(m) for m in _provider_members() if m not in members]
    assert not missing, f"provider distributions without a [tool.seer.matrix] table: {missing}"
    assert {"local", "docker", "toy"} <= {s.provider for s in matrix.sessions()}


def test_each_session_installs_only_core_and_its_provider(matrix: ModuleType) -> None:
    by_name = {s.provider: s for s in matrix.sessions()}
    assert by_name["local"].installs == [Path("seer_core"), Path(".")]
    assert by_name["local"].plugins == ["seer-core"]
    docker = by_name["docker"]
    assert sorted(map(str, docker.installs)) == [".", "providers/docker", "seer_core"]
    assert docker.plugins == ["seer-core", "seer-docker"]
    for session in by_name.values():
        other = [p for p in session.installs if p.parts[:1] == ("providers",) and p != session.member]
        # a provider pulls another only through its own dependencies (seer-runpod needs seer-ssh)
        for folder in other:
            with open(ROOT / session.member / "pyproject.toml", "rb") as fh:
                deps = " ".join(tomllib.load(fh)["project"].get("dependencies", []))
            with open(ROOT / folder / "pyproject.toml", "rb") as fh:
                assert tomllib.load(fh)["project"]["name"] in deps, (session.provider, folder)
        for test in session.tests + session.quick + session.quick_e2e:
            assert (ROOT / test).exists(), f"{session.provider}: {test} does not exist"


def test_dependencies_between_members_are_followed(
    matrix: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider built on another member (as seer-runpod is on seer-ssh) gets that member and its
    plugins in its session, and nothing else."""
    members = {
        "seer": (Path("."), {"project": {"name": "seer", "dependencies": ["seer-core==1"]}}),
        "seer-core": (Path("core"), {"project": {"name": "seer-core", "entry-points": {"seer": {"x": "y"}}}}),
        "seer-base": (
            Path("providers/base"),
            {"project": {"name": "seer-base", "entry-points": {"seer": {}}}},
        ),
        "seer-lean": (
            Path("providers/lean"),
            {
                "project": {
                    "name": "seer-lean",
                    "dependencies": ["seer-core[notebook-client]==1", "seer-ssh-ish>=2", "seer_base==1"],
                    "entry-points": {"seer": {"lean": "seer_lean"}},
                    "optional-dependencies": {"testing": ["docker"]},
                },
                "tool": {"seer": {"matrix": {"provider": "lean", "tests": ["t.py"], "quick": ["q"]}}},
            },
        ),
    }
    # seer-base registers no plugins ({}), seer-ssh-ish is no member of the workspace
    monkeypatch.setattr(matrix, "workspace_members", lambda: members)
    [lean] = matrix.sessions()
    assert lean.installs == [Path("providers/lean"), Path("core"), Path("providers/base"), Path(".")]
    assert lean.plugins == ["seer-core", "seer-lean"]
    assert lean.testing_extra
    assert matrix.pytest_runs(lean, quick=False) == [["t.py"]]
    assert matrix.pytest_runs(lean, quick=True) == [["-m", "unit", "q"]]


@pytest.mark.parametrize(
    ("text", "name", "extras"),
    [
        ("seer-core==0.2.0", "seer-core", set()),
        (
            "Seer_Core[Notebook-Client, models]>=0.2; python_version >= '3.11'",
            "seer-core",
            {"notebook-client", "models"},
        ),
        ("seer.ssh", "seer-ssh", set()),
        ("a__b[]", "a-b", set()),
    ],
)
def test_requirements_are_read_as_packaging_reads_them(
    matrix: ModuleType, text: str, name: str, extras: set[str]
) -> None:
    assert matrix.parse_requirement(text) == (name, frozenset(extras))
    # the script stays stdlib-only (.ci/run runs it before any venv exists); packaging agrees
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    parsed = Requirement(text)
    assert canonicalize_name(parsed.name) == name
    assert {canonicalize_name(e) for e in parsed.extras} == extras


def test_a_requirement_that_is_not_one_is_refused(matrix: ModuleType) -> None:
    with pytest.raises(ValueError, match="not a requirement: '>=1'"):
        matrix.parse_requirement(">=1")


def test_the_walk_follows_extras_only_where_asked(matrix: ModuleType) -> None:
    """``seer[runpod]`` pulls seer-runpod and, through it, seer-ssh; bare ``seer`` pulls neither.
    install_check (noxfile.py) asks this walk which plugins each extra brings."""
    members = matrix.workspace_members()
    assert matrix.closure(members, "seer") == ["seer", "seer-core"]
    runpod = matrix.closure(members, "seer[runpod]")
    assert set(runpod) == {"seer", "seer-core", "seer-runpod", "seer-ssh"}
    assert matrix.plugin_distributions(members, runpod) == ["seer-core", "seer-runpod", "seer-ssh"]
    # seer-toolkit is a plugin: it gives kernels its modules through the seer_kernel_libraries hook.
    toolkit = matrix.closure(members, "seer[toolkit]")
    assert matrix.plugin_distributions(members, toolkit) == ["seer-core", "seer-toolkit"]


@pytest.mark.e2e
def test_the_plugin_check_names_what_loaded_that_should_not(matrix: ModuleType) -> None:
    """Run against this repository's .venv, where every distribution is installed: the local
    session's check must fail, naming the extra plugins."""
    [local] = [s for s in matrix.sessions() if s.provider == "local"]
    problem = matrix.check_plugins(local, Path(sys.executable))
    assert problem is not None and "seer-docker" in problem and "expected exactly ['seer-core']" in problem


@pytest.mark.e2e
def test_list_and_unknown_provider() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--list", "--quick", "local"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    [row] = json.loads(out.stdout)
    assert row["provider"] == "local" and row["runs"] == [["seer_core/tests/test_conformance_local.py"]]
    bad = subprocess.run([sys.executable, str(SCRIPT), "no-such"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no provider named no-such" in bad.stderr and "local" in bad.stderr


def test_quick_runs_each_providers_unit_tests_by_default(matrix: ModuleType) -> None:
    """--quick runs a provider's own unit tests unless its table says otherwise: no session passes
    having run nothing it could have run."""
    by_name = {s.provider: s for s in matrix.sessions()}
    for name in ("docker", "ssh", "runpod", "slurm", "modal"):
        assert matrix.pytest_runs(by_name[name], quick=True) == [["-m", "unit", f"providers/{name}/tests"]]


def test_the_summary_says_what_ran(matrix: ModuleType, tmp_path: Path) -> None:
    """A session's last line is counted from pytest's report: a run that collected nothing (no
    report, or one of zero tests) says so instead of "passed"."""
    assert matrix.summary(matrix.count_outcomes(tmp_path / "absent.xml")) == "plugins loaded, no tests run"
    empty = tmp_path / "empty.xml"
    empty.write_text(
        '<testsuites><testsuite name="pytest" tests="0" skipped="0" failures="0" errors="0"/></testsuites>'
    )
    assert matrix.summary(matrix.count_outcomes(empty)) == "plugins loaded, no tests run"
    ran = tmp_path / "ran.xml"
    ran.write_text(
        '<testsuites><testsuite name="pytest" tests="12" skipped="3" failures="1" errors="0"/></testsuites>'
    )
    assert matrix.count_outcomes(ran) == {"passed": 8, "failed": 1, "skipped": 3}
    assert matrix.summary(matrix.count_outcomes(ran)) == "8 passed, 1 failed, 3 skipped"


@pytest.mark.e2e
def test_quick_reports_the_tests_it_ran(tmp_path: Path) -> None:
    """The real script on two providers: runpod has no unit tests and says so; ssh runs its unit
    tests and reports how many passed."""
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "runpod", "ssh"], capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "    runpod: plugins loaded, no tests run in " in out.stdout
    assert re.search(r"^    ssh: (\d+) passed", out.stdout, re.MULTILINE), out.stdout[-3000:]
    assert ": passed in " not in out.stdout
