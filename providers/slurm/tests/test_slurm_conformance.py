"""The provider contract on seer-slurm: a real SLURM cluster in containers, each sandbox a job."""

from __future__ import annotations

import pytest
from seer.config import SandboxConfig
from seer.testing import ProviderConformance
from seer_slurm.testing import SlurmCluster

pytestmark = pytest.mark.e2e


@pytest.mark.usefixtures("no_leaked_jobs")
class TestSlurmConformance(ProviderConformance):
    provider_name = "slurm"
    # a start waits for the job to be scheduled and reaches its node through the login node
    expiry_timeout = 15
    # The cluster's GPUs are GRES with null devices (no nvidia-smi): test_slurm_provider checks that
    # the job holds the GRES type and count asked for.
    skip_tests = {"test_gpu": "the test cluster's GPUs are GRES without devices; a real cluster runs this"}

    @pytest.fixture(scope="class")
    @classmethod
    def sandbox_config(cls, slurm_cluster: SlurmCluster) -> SandboxConfig:
        return SandboxConfig(
            provider="slurm",
            execution_mode="cli",
            timeout=cls.sandbox_timeout,
            provider_options=slurm_cluster.options(),
        )
