"""Every git invocation that clones a configured repository ends its options with ``--``.

The config refuses a URL starting with '-' (see ``tests/test_config_errors.py``); these tests
show the clone helpers hold on their own, for a config object built without validation: a
repository really named ``-repo`` is cloned as a repository, never read as a git option.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from seer import RepoConfig, Sandbox, SandboxConfig

pytestmark = pytest.mark.e2e


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _repo_named_like_an_option(parent: Path) -> tuple[Path, str]:
    """A repository in ``parent/-repo`` with a branch ``dev`` one commit ahead; dev's commit."""
    repo = parent / "-repo"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("main\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "first")
    _git(repo, "checkout", "-qb", "dev")
    (repo / "README.md").write_text("dev\n")
    _git(repo, "commit", "-qam", "second")
    _git(repo, "checkout", "-q", "main")
    return repo, _git(repo, "rev-parse", "dev")


def _unvalidated(url: str, ref: str | None) -> RepoConfig:
    """A RepoConfig the validators never saw (as a plugin or a hand-built object could make)."""
    return RepoConfig.model_construct(url=url, ref=ref, dockerfile=None, install=False)


def test_core_clone_in_the_sandbox_reads_a_dash_url_as_a_repository(tmp_path: Path) -> None:
    repo, dev = _repo_named_like_an_option(tmp_path)
    # Cloned in the machine (not a local path or file:// URL), from the working directory.
    config = SandboxConfig(
        local_dirs=[(str(repo), "-repo")], repos=[_unvalidated("-repo/.git", "dev")], timeout=300
    )
    assert config.repos[0].url == "-repo/.git"
    sandbox = Sandbox(config).start()
    try:
        [handle] = sandbox.repo_handles
        assert handle.commit == dev
        assert sandbox.exec(["cat", "repo/README.md"]).stdout == "dev\n"
    finally:
        sandbox.terminate()


def test_docker_clone_reads_a_dash_url_as_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = pytest.importorskip("seer_docker.image")
    _repo, dev = _repo_named_like_an_option(tmp_path)
    monkeypatch.chdir(tmp_path)
    dest = tmp_path / "clone"
    assert image._clone(_unvalidated("-repo", "dev"), dest) == dev
    assert (dest / "README.md").read_text() == "dev\n"
