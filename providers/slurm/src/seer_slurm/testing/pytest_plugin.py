"""The ``slurm_cluster`` pytest fixture: one started :class:`SlurmCluster` per test session,
removed after. Import it into a ``conftest.py``::

    from seer_slurm.testing.pytest_plugin import slurm_cluster  # noqa: F401

Tests using it skip, saying why, when no Docker engine (or no local base image) is there. A
``conftest.py`` that overrides ``slurm_cluster_python_packages`` gives every node's system Python
those packages, as a cluster's module of torch would.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from seer_slurm.testing.cluster import SlurmCluster

__all__ = ["slurm_cluster", "slurm_cluster_python_packages"]


@pytest.fixture(scope="session")
def slurm_cluster_python_packages() -> Sequence[str]:
    """The pip requirements in every node's system Python: none (override it in a conftest.py)."""
    return ()


@pytest.fixture(scope="session")
def slurm_cluster(slurm_cluster_python_packages: Sequence[str]) -> Iterator[SlurmCluster]:
    """A running cluster (a login node, two compute nodes) shared by the session's tests."""
    problem = SlurmCluster.problem()
    if problem:
        pytest.skip(f"no SLURM test cluster here: {problem}")
    with SlurmCluster(python_packages=slurm_cluster_python_packages) as cluster:
        yield cluster
