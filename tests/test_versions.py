"""Versions move in lockstep: every released workspace member has the root's version, and every
pin of one member on another (``seer-core==X`` in the meta-package's dependencies and extras,
``seer-core==X`` in a provider's) names that same version.

Test distributions under ``tests/`` (e.g. ``tests/plugins/seer-toy-provider``) are workspace
members too, but are never released, so they are not held to the release version.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


ROOT_PROJECT = _load(ROOT / "pyproject.toml")
VERSION: str = ROOT_PROJECT["project"]["version"]


#: Where released members live. Found by globbing the tree, not read from the workspace list, so a
#: new member (e.g. ``contrib/toolkit``) is held to the rules the moment its pyproject.toml lands.
MEMBER_GLOBS = ("seer_core", "providers/*", "plugins/*", "contrib/*")
#: The unrelated project that holds the name ``seer`` on the public index, at its newest release:
#: our version must be above it, or ``pip install "seer[...]"`` resolves to that project.
UNRELATED_PUBLIC_SEER = "0.1.1"


def _member_dirs() -> list[Path]:
    """The released members' directories: every ``pyproject.toml`` under :data:`MEMBER_GLOBS`."""
    return sorted({p.parent for pattern in MEMBER_GLOBS for p in ROOT.glob(f"{pattern}/pyproject.toml")})


def _workspace_dirs() -> set[Path]:
    """The directories the root's ``tool.uv.workspace.members`` globs name (test distributions too)."""
    found: set[Path] = set()
    for pattern in ROOT_PROJECT["tool"]["uv"]["workspace"]["members"]:
        found |= {p.parent for p in ROOT.glob(f"{pattern}/pyproject.toml")}
    return found


MEMBERS = _member_dirs()
MEMBER_PROJECTS = {d: _load(d / "pyproject.toml")["project"] for d in MEMBERS}
#: distribution name -> its directory, for the root and every released member
INTERNAL = {canonicalize_name(p["name"]): d for d, p in MEMBER_PROJECTS.items()} | {
    canonicalize_name(ROOT_PROJECT["project"]["name"]): ROOT
}
#: names the meta-package's extras promise (some members arrive in later releases)
PROMISED = {
    canonicalize_name(Requirement(r).name)
    for reqs in ROOT_PROJECT["project"].get("optional-dependencies", {}).values()
    for r in reqs
}


def _all_requirements(project: dict[str, Any]) -> list[tuple[str, Requirement]]:
    out = [("dependencies", Requirement(r)) for r in project.get("dependencies", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        out += [(f"optional-dependencies.{extra}", Requirement(r)) for r in reqs]
    return out


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path != ROOT else "."


#: The released distributions, written out: the globs above find what is on disk, this says what
#: must be, so a member that goes missing (or one added without a decision) fails here.
RELEASED = {
    "seer-core": "seer_core",
    "seer-docker": "providers/docker",
    "seer-ssh": "providers/ssh",
    "seer-runpod": "providers/runpod",
    "seer-slurm": "providers/slurm",
    "seer-modal": "providers/modal",
    "seer-mcp": "plugins/mcp",
    "seer-openai": "plugins/openai",
    "seer-claude": "plugins/claude",
    "seer-toolkit": "contrib/toolkit",
}
#: The meta-package's extras and what each pulls, written out: a typo in pyproject.toml's name of
#: an extra or of the member it pulls fails here (not only checks derived from the same table).
META_EXTRAS = {
    "models": "seer-core[models]",
    "notebook": "seer-core[notebook]",
    "docker": "seer-docker",
    "ssh": "seer-ssh",
    "runpod": "seer-runpod",
    "slurm": "seer-slurm",
    "modal": "seer-modal",
    "mcp": "seer-mcp",
    "openai": "seer-openai",
    "claude": "seer-claude",
    "toolkit": "seer-toolkit",
}
#: seer-core's own extras.
CORE_EXTRAS = {"models", "notebook", "notebook-client", "testing"}


def test_the_workspace_has_core() -> None:
    assert ROOT / "seer_core" in MEMBERS


def test_the_released_members_are_the_ones_written_here() -> None:
    found = {p["name"]: _rel(d) for d, p in MEMBER_PROJECTS.items()}
    assert found == RELEASED


def test_the_meta_package_extras_are_the_ones_written_here() -> None:
    extras = ROOT_PROJECT["project"]["optional-dependencies"]
    found = {}
    for extra, reqs in extras.items():
        assert len(reqs) == 1, f"extra {extra!r} pulls {reqs}: one member each"
        req = Requirement(reqs[0])
        found[extra] = req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "")
    assert found == META_EXTRAS
    assert set(META_EXTRAS.values()) - {"seer-core[models]", "seer-core[notebook]"} == set(RELEASED) - {
        "seer-core"
    }


def test_core_extras_are_the_ones_written_here() -> None:
    assert set(MEMBER_PROJECTS[ROOT / "seer_core"]["optional-dependencies"]) == CORE_EXTRAS


def test_every_member_found_is_in_the_workspace() -> None:
    # nox -s build, .ci/run and uv read the workspace list; a member missing from it is never built.
    missing = [_rel(m) for m in MEMBERS if m not in _workspace_dirs()]
    assert not missing, f"add {missing} to [tool.uv.workspace] members in pyproject.toml"


def test_the_version_is_above_the_unrelated_public_seer() -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version
    from seer.errors import OUR_VERSIONS

    # Install hints say `pip install "seer[x]>=0.2"`: this release must satisfy that, the other not.
    assert Version(VERSION) in SpecifierSet(OUR_VERSIONS)
    assert Version(UNRELATED_PUBLIC_SEER) not in SpecifierSet(OUR_VERSIONS)

    assert Version(VERSION) > Version(UNRELATED_PUBLIC_SEER), (
        f"version {VERSION} is not above {UNRELATED_PUBLIC_SEER}, the unrelated `seer` on the public "
        "index: pip would install that project for `seer[...]`"
    )


def test_the_root_version_is_a_release_version() -> None:
    from packaging.version import Version

    version = Version(VERSION)
    assert str(version) == VERSION, f"write the root version normalised: {version}"
    assert not version.local, "a release version has no local part"


@pytest.mark.parametrize("member", MEMBERS, ids=_rel)
def test_member_version_matches_the_root(member: Path) -> None:
    project = MEMBER_PROJECTS[member]
    assert "version" in project, f"{_rel(member)}/pyproject.toml: set a static version = {VERSION!r}"
    assert project["version"] == VERSION, (
        f"{_rel(member)}/pyproject.toml has version {project['version']!r}, the root has {VERSION!r}: "
        "versions move in lockstep"
    )


@pytest.mark.parametrize("member", [ROOT, *MEMBERS], ids=_rel)
def test_internal_pins_use_the_release_version(member: Path) -> None:
    project = ROOT_PROJECT["project"] if member == ROOT else MEMBER_PROJECTS[member]
    internal = set(INTERNAL) | PROMISED
    for where, req in _all_requirements(project):
        if canonicalize_name(req.name) not in internal:
            continue
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==" and specs[0].version == VERSION, (
            f"{_rel(member)}/pyproject.toml [{where}] {req}: pin internal distributions with "
            f"=={VERSION} (versions move in lockstep)"
        )


@pytest.mark.parametrize("member", MEMBERS, ids=_rel)
def test_members_depend_on_core_never_on_the_meta_package(member: Path) -> None:
    # An unrelated project holds the name `seer` on the public index: only the workspace may
    # resolve it, so no member may depend on it.
    project = MEMBER_PROJECTS[member]
    for where, req in _all_requirements(project):
        assert canonicalize_name(req.name) != "seer", (
            f"{_rel(member)}/pyproject.toml [{where}] depends on `seer`; depend on `seer-core`"
        )


def test_meta_package_extras_name_members_or_promised_members() -> None:
    extras = ROOT_PROJECT["project"]["optional-dependencies"]
    for extra, reqs in extras.items():
        for raw in reqs:
            name = canonicalize_name(Requirement(raw).name)
            assert name.startswith("seer-"), f"extra {extra!r} pulls {raw!r}, which is not a seer member"


def test_the_installed_core_is_this_version() -> None:
    try:
        installed = metadata.version("seer-core")
    except metadata.PackageNotFoundError:
        pytest.skip("seer-core is not installed")
    assert installed == VERSION, (
        f"the installed seer-core is {installed}, the source says {VERSION}: reinstall "
        "(uv pip install -e seer_core -e .)"
    )


def _closure(requirements: list[str]) -> set[str]:
    """Every distribution ``requirements`` bring, following the workspace's own members (and the
    extras asked of them) through their pyproject.toml; outside distributions are not followed."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        seen.add(name)
        key = (name, frozenset(req.extras))
        if key in done or name not in INTERNAL:
            continue
        done.add(key)
        project = ROOT_PROJECT["project"] if INTERNAL[name] == ROOT else MEMBER_PROJECTS[INTERNAL[name]]
        todo += [Requirement(r) for r in project.get("dependencies", [])]
        for extra in req.extras:
            todo += [Requirement(r) for r in project.get("optional-dependencies", {}).get(extra, [])]
    return seen


#: Extras that are not a way of running seer on their own, and why they may lack client packages.
NOT_SELF_SUFFICIENT = {
    "models": "the packages that load models in the sandbox (on the local provider, the client's own)",
}


@pytest.mark.parametrize("extra", sorted(META_EXTRAS))  # the literal list: a dropped extra fails too
def test_each_extra_brings_the_client_side_packages(extra: str) -> None:
    # `pip install "seer[modal]"` alone must run a Modal sandbox's notebook flow: every package
    # the client side imports lazily (seer.extras.CLIENT_PACKAGES) comes with it.
    from seer.extras import CLIENT_PACKAGES

    if extra in NOT_SELF_SUFFICIENT:
        pytest.skip(f"seer[{extra}] holds {NOT_SELF_SUFFICIENT[extra]}")
    brought = _closure([f"seer[{extra}]"])
    missing = sorted(
        p.distribution for p in CLIENT_PACKAGES.values() if canonicalize_name(p.distribution) not in brought
    )
    assert not missing, (
        f"seer[{extra}] does not bring {missing}, which the client side imports; depend on "
        "seer-core[notebook-client] in the member it pulls"
    )


def test_core_extras_named_by_client_packages_have_them() -> None:
    # MissingExtraError tells users to install seer[<extra>]: that extra must hold the package.
    from seer.extras import CLIENT_PACKAGES

    core = MEMBER_PROJECTS[ROOT / "seer_core"]
    for module, package in CLIENT_PACKAGES.items():
        assert canonicalize_name(package.distribution) in _closure([f"seer[{package.extra}]"]), (
            f"seer.extras says {module!r} comes with seer[{package.extra}], which does not bring "
            f"{package.distribution}"
        )
        assert package.extra in core.get("optional-dependencies", {}), package.extra
