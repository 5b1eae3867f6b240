"""The entry-point module of seer-docker: registers the ``docker`` provider.

Kept cheap to import: nothing here (nor in :mod:`seer_docker.provider` at import time) imports
the Docker SDK; it is imported when a Docker engine is first talked to.
"""

from __future__ import annotations

from typing import Any

import seer


@seer.hookimpl
def seer_register_providers(register: Any) -> None:
    from seer_docker.provider import DockerProvider

    register(DockerProvider)
