"""The notebook and scoped-sandbox examples on a SLURM cluster, unchanged but for
``provider="slurm"``.

The other changes are what this machine needs, as in the seer-ssh examples: the tiny model, served
by a hub-compatible server on 127.0.0.1 (which the login node reaches and the offline compute nodes
do not: the model is fetched on the login node into the shared cache), the test cluster's address
and keys, and torch pinned to the CPU build this machine keeps a wheel of.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _model_kit import MODEL_ID
from _seed_kit import PACKAGES, attach_and_check_model, printed_by, run_setup, served_seed, setup_script
from seer.config import SandboxConfig
from seer.rpc import ServedInterface
from seer_slurm.provider import SlurmProvider
from seer_slurm.testing import SlurmCluster
from test_scoped import test_seed_interface_through_each_of_the_four_expose_modes as four_modes

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.usefixtures("no_leaked_jobs"),
]


def _running() -> set[str]:
    return {m.id for m in SlurmProvider().list() if m.status.alive}


def test_seed_notebook_setup_on_slurm(slurm_cluster: SlurmCluster, hub: Any, tmp_path: Path) -> None:
    out = run_setup(setup_script("slurm", slurm_cluster.options(), hub.env()), tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    printed = printed_by(out)
    started = set(re.findall(r"\b(slurm-[0-9a-f]{12})\b", out.stderr))
    try:
        assert len(started) == 1 and started <= _running(), (started, out.stderr[-2000:])
        # the setup script has exited; the agent attaches through the forward it left running
        assert printed["jupyter_url"].startswith("http://127.0.0.1:")
        session = attach_and_check_model(printed)
        where = session.exec("import os, socket; print(os.environ['SEER_SANDBOX_ID'], socket.gethostname())")
        sandbox_id, host = where.stdout.split()
        assert sandbox_id in started and host in slurm_cluster.node_names, "the kernel runs on a compute node"
    finally:
        for sandbox_id in started:
            SlurmProvider().terminate(sandbox_id)


@pytest.fixture(scope="module")
def seed(
    slurm_cluster: SlurmCluster, hub: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServedInterface]:
    config = SandboxConfig(
        provider="slurm",
        provider_options=slurm_cluster.options(),
        execution_mode="local",
        models=[{"name": MODEL_ID}],
        env=hub.env(),
        python_packages=PACKAGES,
        timeout=900,
    )
    with served_seed(config, "scoped-slurm", tmp_path_factory.mktemp("seed")) as served:
        yield served


def test_seed_interface_through_the_four_expose_modes_on_slurm(seed: ServedInterface, tmp_path: Path) -> None:
    assert seed.url.startswith("http://127.0.0.1:") and seed.sandbox_id.startswith("slurm-")
    four_modes(seed, tmp_path)
