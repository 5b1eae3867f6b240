"""Whether a package index can be reached from a machine, as its environment says.

seer does not probe the network for it (an index that is slow to refuse would stall every start):
the variables below say it, on the client (the local provider) or as a remote machine's
environment reports them (seer-ssh's and seer-slurm's ``debug`` check,
:mod:`seer.providers.code_server_upload`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["OFFLINE_ENV", "OFFLINE_SIGNALS", "index_unreachable"]

#: Set (``1``) where no package index can be reached from this machine: seer then installs nothing
#: and refuses a requirement the client's Python lacks. ``PIP_NO_INDEX``, ``UV_OFFLINE`` and
#: ``UV_NO_INDEX`` say the same to pip and uv, and seer reads them too.
OFFLINE_ENV = "SEER_OFFLINE"
#: Every variable that says so.
OFFLINE_SIGNALS = (OFFLINE_ENV, "PIP_NO_INDEX", "UV_OFFLINE", "UV_NO_INDEX")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def index_unreachable(env: Mapping[str, str] | None = None) -> str | None:
    """Why no package index can be reached from here (the variable that says so), or None.

    ``$SEER_OFFLINE``, ``$PIP_NO_INDEX``, ``$UV_OFFLINE`` or ``$UV_NO_INDEX`` set to a true value
    (``1``, ``true``, ``yes``, ``on``) in ``env`` (default: this process's) says it."""
    env = os.environ if env is None else env
    for name in OFFLINE_SIGNALS:
        if _truthy(env.get(name)):
            return f"${name} is set"
    return None
