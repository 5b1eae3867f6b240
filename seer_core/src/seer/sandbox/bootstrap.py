"""Core bootstrap: the steps ``Sandbox.start()`` runs in a freshly provisioned machine.

A provider only gets a machine and talks to it (:mod:`seer.providers.base`); everything seer does
*in* the machine is written once, here, on top of those primitives: install the config's Python
packages (unless the provider already did, ``Machine.packages_installed``), copy local files and
folders in, clone repositories. The ``models`` step is :func:`seer.sandbox.model_cache.prepare_models`;
the last step is the execution mode's ``prepare``. :meth:`seer.sandbox.Sandbox.start` runs them in
order, one named progress step each, and tears everything down if one fails. Each step takes the
machine and what it needs, and returns what it made (a :class:`RepoHandle`, the paths copied in);
the sandbox records it. No step calls back into the ``Sandbox``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from seer.errors import SandboxError

if TYPE_CHECKING:
    from seer.config import RepoConfig, SandboxConfig
    from seer.progress import Progress
    from seer.providers.base import Machine

__all__ = [
    "RepoHandle",
    "clone_repo",
    "copy_local_files",
    "install_packages",
    "upload_dir",
    "upload_file",
    "with_required",
]


@dataclass(frozen=True)
class RepoHandle:
    """A repository cloned into the sandbox."""

    name: str
    url: str
    path: str
    commit: str
    installed: bool


def with_required(packages: list[str], required: list[str]) -> list[str]:
    """``packages`` plus each of ``required`` whose project it does not already name (what the
    execution mode and the model fetcher need in the sandbox, unless the user pinned it)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    named = set()
    for raw in packages:
        try:
            named.add(canonicalize_name(Requirement(raw).name))
        except InvalidRequirement:
            continue
    return [*packages, *(r for r in required if canonicalize_name(Requirement(r).name) not in named)]


def install_packages(machine: Machine, packages: list[str], progress: Progress) -> None:
    """The ``packages`` step: ``pip install`` into the machine's Python, output as progress."""
    machine.exec(
        [machine.python, "-m", "pip", "install", *packages],
        on_output=lambda _s, text: progress.update(text.strip()),
    ).check()


def upload_file(machine: Machine, local_path: str | os.PathLike[str], remote_path: str | None = None) -> str:
    """Copy a local file into the machine (default: its name, in the working directory), keeping
    its permission bits. Returns the path in the machine."""
    local = Path(local_path)
    if not local.is_file():
        raise FileNotFoundError(f"local file {str(local)!r} does not exist")
    remote = machine.resolve(remote_path or local.name)
    machine.write_bytes(remote, local.read_bytes(), mode=local.stat().st_mode & 0o777)
    return remote


def upload_dir(machine: Machine, local_dir: str | os.PathLike[str], remote_dir: str | None = None) -> str:
    """Copy a local directory into the machine. Returns the path in the machine."""
    local = Path(local_dir)
    if not local.is_dir():
        raise NotADirectoryError(f"local directory {str(local)!r} does not exist")
    remote = machine.resolve(remote_dir or local.name)
    machine.put_dir(local, remote)
    return remote


def copy_local_files(machine: Machine, config: SandboxConfig) -> list[str]:
    """The ``files`` step: the config's ``local_files`` and ``local_dirs``, copied in. Returns
    their paths in the machine."""
    made = [upload_file(machine, local, remote) for local, remote in config.local_files]
    return made + [upload_dir(machine, local, remote) for local, remote in config.local_dirs]


def clone_repo(machine: Machine, repo: RepoConfig) -> RepoHandle:
    """The ``repos`` step for one repository: clone it (a local path is cloned on the client and
    copied in, since the machine may not see the client's disk), check out its ref, install it."""
    # "--" ends git's options: a URL or ref is never read as one, whatever the config let by.
    dest = machine.resolve(repo.dir_name)
    url = repo.clone_url
    if url.startswith("/") or url.startswith("file://"):
        with tempfile.TemporaryDirectory(prefix="seer-clone-") as tmp:
            _git(["clone", "--quiet", "--", url, tmp + "/r"])
            if repo.ref:
                _git(["-C", tmp + "/r", "checkout", "--quiet", repo.ref, "--"])
            machine.put_dir(tmp + "/r", dest)
    else:
        machine.exec(["git", "clone", "--quiet", "--", url, dest]).check()
        if repo.ref:
            machine.exec(["git", "-C", dest, "checkout", "--quiet", repo.ref, "--"]).check()
    commit = machine.exec(["git", "-C", dest, "rev-parse", "HEAD"]).check().stdout.strip()
    if repo.install is True:
        machine.exec([machine.python, "-m", "pip", "install", "-e", dest]).check()
    elif isinstance(repo.install, str):
        machine.exec(repo.install, cwd=dest).check()
    return RepoHandle(repo.dir_name, repo.url, dest, commit, bool(repo.install))


def _git(args: list[str]) -> None:
    proc = subprocess.run(["git", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SandboxError(f"git {shlex.join(args)} failed: {proc.stderr.strip()}")
