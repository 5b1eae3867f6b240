"""The entry-point module of seer-slurm: registers the ``slurm`` provider.

Kept cheap to import: paramiko loads when a cluster is first reached.
"""

from __future__ import annotations

from typing import Any

import seer


@seer.hookimpl
def seer_register_providers(register: Any) -> None:
    from seer_slurm.provider import SlurmProvider

    register(SlurmProvider)
