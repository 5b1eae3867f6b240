"""The seer-slurm tests run against a real SLURM cluster in containers (``SlurmCluster``): one
login node (slurmctld, munge, sshd) and two offline compute nodes (slurmd), a shared home.

One ``slurm_cluster`` serves the whole session (it skips, saying why, without a Docker engine);
its nodes' system Python has this client's ML packages, as a cluster's torch module would.
``slurm_home`` gives each test module a ``$SEER_HOME`` of its own and fails if a job of seer's is
left in the queue at its end. Without paramiko or seer-slurm installed, nothing here is collected.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if any(importlib.util.find_spec(name) is None for name in ("paramiko", "seer_slurm", "docker")):
    collect_ignore_glob = ["test_*.py"]
else:
    from seer_slurm.testing import SlurmCluster
    from seer_slurm.testing.pytest_plugin import slurm_cluster  # noqa: F401  (the fixture)

    sys.path.insert(0, str(Path(__file__).resolve().parent))

    @pytest.fixture(scope="session")
    def slurm_cluster_python_packages() -> list[str]:
        """The nodes have this client's torch, transformers, accelerate and Jupyter in their system
        Python: a sandbox's environment installs nothing heavy (it is still made, and reused)."""
        from seer_ssh.testing import client_pins

        return client_pins()

    @pytest.fixture(scope="module")
    def no_leaked_jobs(slurm_cluster: SlurmCluster) -> Iterator[None]:  # noqa: F811
        """Fails the module if it leaves a job of seer's in the queue (after cancelling it)."""
        yield
        deadline = time.monotonic() + 30
        left = []
        while time.monotonic() < deadline:
            left = [j for j in slurm_cluster.jobs() if j["name"].startswith("seer-")]
            if not left:
                break
            time.sleep(0.5)
        if left:
            slurm_cluster.run("scancel -u seer")
        assert not left, f"jobs of seer's left in the queue: {left}"

    @pytest.fixture(scope="module")
    def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
        """The tiny model served on 127.0.0.1: the login node reaches it, compute nodes do not."""
        from _model_kit import MODEL_ID, tiny_dirs
        from seer.testing.hub_server import HubServer

        dirs = tiny_dirs(tmp_path_factory, "master")
        with HubServer({MODEL_ID: dirs.model}) as server:
            yield server
