"""seer-slurm's test kit: a real SLURM cluster (slurmctld, slurmd, munge, sshd from Debian's
packages) in containers on the local Docker engine; see :mod:`seer_slurm.testing.cluster`. For
pytest, import the ``slurm_cluster`` fixture from :mod:`seer_slurm.testing.pytest_plugin`."""

from seer_slurm.testing.cluster import (
    CLUSTER_LABEL,
    IMAGE_LABEL,
    SlurmCluster,
    SlurmClusterError,
    cluster_image,
    engine_problem,
    remove_cluster_images,
)

__all__ = [
    "CLUSTER_LABEL",
    "IMAGE_LABEL",
    "SlurmCluster",
    "SlurmClusterError",
    "cluster_image",
    "engine_problem",
    "remove_cluster_images",
]
