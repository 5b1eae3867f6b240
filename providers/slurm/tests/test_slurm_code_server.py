"""``debug=True`` on the slurm provider (issue #28): code-server once per cluster, in a real browser.

The cluster is the real SLURM test cluster (``slurm_cluster``): its compute nodes have no network
and no compilers, so the sandboxes here name the install this machine has in the local
provider's tools folder (``provider_options.code_server_from``; ``scripts/code-server`` makes it,
CI runs it first). The first start copies it over the login node's SSH connection into
``<base>/tools`` on the shared filesystem, before the job is submitted; the job's node runs it
from there, and a second start copies nothing (counted: ``installs.log`` holds the client's
lines and one ``uploaded`` line). A person opens ``code_server_url`` in chromium (an SSH forward
through the login node to the node's 127.0.0.1): refused without the password, VS Code on the
working directory with it. The screenshot is kept: ``$SEER_TEST_ARTEFACTS``/code-server-slurm.png.
Without code_server_from, the login node's lack of compilers is refused before a job is submitted.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _browser import assert_gone, check_code_server
from _code_server_kit import (
    MARKER,
    PREPARED,
    assert_copied_once,
    assert_nothing_copied,
    prepared_or_skip,
    started,
    write_project,
)
from seer import Sandbox
from seer.config import SandboxConfig
from seer.errors import ConfigError
from seer.providers import code_server as installer
from seer_slurm.testing import SlurmCluster

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.usefixtures("no_leaked_jobs"),
]

#: The cluster's tools folder (the shared home, seer-slurm's default base).
TOOLS = "/home/seer/.seer-slurm/tools"


def _config(cluster: SlurmCluster, project: Path | None = None, **options: Any) -> SandboxConfig:
    data: dict[str, Any] = {"provider": "slurm", "execution_mode": "cli", "timeout": 600, "debug": True}
    if project is not None:
        data["local_files"] = [(str(project), "hello_debug.py")]
    return SandboxConfig.model_validate({**data, "provider_options": cluster.options(**options)})


def _installs(cluster: SlurmCluster) -> list[str]:
    return cluster.run(f"cat {installer.layout(TOOLS)['installs']}").check().stdout.splitlines()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("debug"))


@pytest.fixture(scope="module")
def first(slurm_cluster: SlurmCluster, project: Path) -> Iterator[tuple[Sandbox, list[str]]]:
    prepared_or_skip()
    with started(_config(slurm_cluster, project, code_server_from=PREPARED)) as first:
        yield first


def test_a_person_opens_vs_code_in_the_browser(first: tuple[Sandbox, list[str]]) -> None:
    sandbox, lines = first
    assert sandbox.services["code_server"]["root"] == installer.layout(TOOLS)["root"]
    # copied before the job was submitted (a job's time is not spent on it)
    copied = next(i for i, line in enumerate(lines) if line.startswith("code-server: "))
    submitted = next(i for i, line in enumerate(lines) if line.startswith("submitted job"))
    assert copied < submitted, lines
    url = str(sandbox.code_server_url)
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["folder"] == [sandbox.machine.workdir]
    check_code_server(
        url, str(sandbox.code_server_password), "hello_debug.py", MARKER, "code-server-slurm.png"
    )


def test_copied_once_per_cluster_a_second_start_copies_nothing(
    slurm_cluster: SlurmCluster, project: Path, first: tuple[Sandbox, list[str]]
) -> None:
    installs = _installs(slurm_cluster)
    assert_copied_once(installs)
    with started(_config(slurm_cluster, project, code_server_from=PREPARED)) as (second, lines):
        assert _installs(slurm_cluster) == installs
        assert_nothing_copied(lines)
        url = second.services["code_server"]["url"]
        node = second.machine.record["node"]  # type: ignore[attr-defined]
    assert_gone(int(urllib.parse.urlsplit(url).port or 0))
    assert not [cmd for _, cmd in slurm_cluster.user_processes(node) if second.sandbox_id in cmd]


def test_without_an_install_a_login_node_lacking_compilers_is_refused_first(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    base = f"~/.seer-debug-{tmp_path.name[-8:]}"
    jobs = {job["id"] for job in slurm_cluster.jobs()}
    with pytest.raises(ConfigError) as info:
        Sandbox(_config(slurm_cluster, base_dir=base)).start()
    assert info.value.fields == ["debug"]
    message = str(info.value)
    assert f"code-server {installer.VERSION} is not installed" in message and "c++" in message
    assert "code_server_from" in message
    assert {job["id"] for job in slurm_cluster.jobs()} <= jobs  # none submitted
    assert slurm_cluster.run(f"ls {base}").exit_code != 0
