"""Core bootstrap: the steps ``Sandbox.start()`` runs in a freshly provisioned machine.

A provider only gets a machine and talks to it (:mod:`seer.providers.base`); everything seer does
*in* the machine is written once, here, on top of those primitives: install the config's Python
packages (unless the provider already did, ``Machine.packages_installed``), copy local files and
folders in, clone repositories. The ``models`` step is :func:`seer.sandbox.model_cache.prepare_models`;
the last step is the execution mode's ``prepare``. :meth:`seer.sandbox.Sandbox.start` runs them in
order, one named progress step each, and tears everything down if one fails.
"""

from __future__ import annotations

import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

from seer.errors import SandboxError

if TYPE_CHECKING:
    from seer.config import RepoConfig, SandboxConfig
    from seer.progress import Progress
    from seer.sandbox.sandbox import Sandbox

__all__ = ["RepoHandle", "clone_repo", "copy_local_files", "install_packages", "with_required"]


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


def install_packages(sandbox: Sandbox, packages: list[str], progress: Progress) -> None:
    """The ``packages`` step: ``pip install`` into the sandbox's Python, output as progress."""
    sandbox.exec(
        [sandbox.machine.python, "-m", "pip", "install", *packages],
        on_output=lambda _s, text: progress.update(text.strip()),
        check=True,
    )


def copy_local_files(sandbox: Sandbox, config: SandboxConfig) -> None:
    """The ``files`` step: the config's ``local_files`` and ``local_dirs``, copied in."""
    for local, remote in config.local_files:
        sandbox.upload_file(local, remote)
    for local, remote in config.local_dirs:
        sandbox.upload_dir(local, remote)


def clone_repo(sandbox: Sandbox, repo: RepoConfig) -> RepoHandle:
    """The ``repos`` step for one repository: clone it (a local path is cloned on the client and
    copied in, since the machine may not see the client's disk), check out its ref, install it."""
    # "--" ends git's options: a URL or ref is never read as one, whatever the config let by.
    dest = sandbox.machine.resolve(repo.dir_name)
    url = repo.clone_url
    if url.startswith("/") or url.startswith("file://"):
        with tempfile.TemporaryDirectory(prefix="seer-clone-") as tmp:
            _git(["clone", "--quiet", "--", url, tmp + "/r"])
            if repo.ref:
                _git(["-C", tmp + "/r", "checkout", "--quiet", repo.ref, "--"])
            sandbox.machine.put_dir(tmp + "/r", dest)
    else:
        sandbox.exec(["git", "clone", "--quiet", "--", url, dest], check=True)
        if repo.ref:
            sandbox.exec(["git", "-C", dest, "checkout", "--quiet", repo.ref, "--"], check=True)
    commit = sandbox.exec(["git", "-C", dest, "rev-parse", "HEAD"], check=True).stdout.strip()
    if repo.install is True:
        sandbox.exec([sandbox.machine.python, "-m", "pip", "install", "-e", dest], check=True)
    elif isinstance(repo.install, str):
        sandbox.exec(repo.install, cwd=dest, check=True)
    return RepoHandle(repo.dir_name, repo.url, dest, commit, bool(repo.install))


def _git(args: list[str]) -> None:
    proc = subprocess.run(["git", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SandboxError(f"git {shlex.join(args)} failed: {proc.stderr.strip()}")
