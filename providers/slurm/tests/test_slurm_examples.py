"""The notebook and scoped-sandbox examples on a SLURM cluster, unchanged but for
``provider="slurm"``.

The other changes are what this machine needs, as in the seer-ssh examples: the tiny model, served
by a hub-compatible server on 127.0.0.1 (which the login node reaches and the offline compute nodes
do not: the model is fetched on the login node into the shared cache), the test cluster's address
and keys, and torch pinned to the CPU build this machine keeps a wheel of.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _model_kit import MODEL_ID
from seer import ScopedSandbox
from seer.config import SandboxConfig
from seer.rpc import ServedInterface
from seer_slurm.provider import SlurmProvider
from seer_slurm.testing import SlurmCluster
from test_scoped import SEED_INTERFACE
from test_scoped import test_seed_interface_through_each_of_the_four_expose_modes as four_modes
from test_seed_examples import MINIMAL_SETUP, MODEL_CHECKS

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.usefixtures("no_leaked_jobs"),
]

#: What a model-loading sandbox installs on this machine (torch: the local CPU wheel).
PACKAGES = ["torch==2.13.0", "transformers", "accelerate"]


def _slurm_setup(cluster: SlurmCluster, hub: Any) -> str:
    """Seed 004's minimal setup script, moved to the SLURM cluster."""
    script = MINIMAL_SETUP.replace(
        "    gpu=None,\n",
        f'    gpu=None,\n    provider="slurm",\n    provider_options={cluster.options()!r},\n'
        f"    env={hub.env()!r},\n",
    ).replace('python_packages=["torch", "transformers", "accelerate"]', f"python_packages={PACKAGES!r}")
    assert 'provider="slurm"' in script and "torch==2.13.0" in script
    return script


def _running() -> set[str]:
    return {m.id for m in SlurmProvider().list() if m.status.alive}


def test_seed_notebook_setup_on_slurm(slurm_cluster: SlurmCluster, hub: Any, tmp_path: Path) -> None:
    from seer.notebook import NotebookSession

    script = tmp_path / "setup.py"
    script.write_text(_slurm_setup(slurm_cluster, hub))
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "HF_TOKEN": "hf_not_a_real_token"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    printed = json.loads(out.stdout.strip().splitlines()[-1])
    started = set(re.findall(r"\b(slurm-[0-9a-f]{12})\b", out.stderr))
    try:
        assert len(started) == 1 and started <= _running(), (started, out.stderr[-2000:])
        # the setup script has exited; the agent attaches through the forward it left running
        assert printed["jupyter_url"].startswith("http://127.0.0.1:")
        session = NotebookSession.attach(printed["jupyter_url"], printed["session_id"])
        assert f"**model** ({MODEL_ID})" in session.model_info_text
        result = session.exec(MODEL_CHECKS)
        assert result.ok, result.error
        seen = json.loads(result.stdout)
        assert seen["states"] == 3 and seen["fired"] == [seen["last"]]
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
    sandbox = ScopedSandbox(config)
    try:
        sandbox.start(name="scoped-slurm")
        path = tmp_path_factory.mktemp("seed") / "interface.py"
        path.write_text(SEED_INTERFACE)
        served = sandbox.serve(path, expose_as=None)
        assert isinstance(served, ServedInterface)
        yield served
    finally:
        sandbox.terminate()


def test_seed_interface_through_the_four_expose_modes_on_slurm(seed: ServedInterface, tmp_path: Path) -> None:
    assert seed.url.startswith("http://127.0.0.1:") and seed.sandbox_id.startswith("slurm-")
    four_modes(seed, tmp_path)
