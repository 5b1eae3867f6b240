"""The entry-point module of seer-ssh: registers the ``ssh`` provider.

Kept cheap to import: paramiko is imported when a host is first talked to.
"""

from __future__ import annotations

from typing import Any

import seer


@seer.hookimpl
def seer_register_providers(register: Any) -> None:
    from seer_ssh.provider import SshProvider

    register(SshProvider)
