"""The entry-point module of seer-runpod: registers the ``runpod`` provider.

Kept cheap to import: the runpod SDK (a heavy import) and paramiko load when a pod is first made
or listed.
"""

from __future__ import annotations

from typing import Any

import seer


@seer.hookimpl
def seer_register_providers(register: Any) -> None:
    from seer_runpod.provider import RunPodProvider

    register(RunPodProvider)
