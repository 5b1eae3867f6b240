"""seer-slurm: seer sandboxes as jobs on a SLURM cluster (see :mod:`seer_slurm.provider`)."""

from __future__ import annotations

__all__: list[str] = []
