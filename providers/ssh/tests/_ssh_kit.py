"""Helpers shared by the seer-ssh tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from seer.config import SandboxConfig


class Box:
    """A test host (``SshHost``) with a known_hosts file of its own key and a hosts file naming it."""

    def __init__(self, host: Any, folder: Path):
        self.host = host
        self.known_hosts = host.write_known_hosts(folder / "known_hosts")
        self.hosts_file = folder / "ssh-hosts.toml"
        self.hosts_file.write_text(
            "[hosts.box]\n"
            # JSON's strings, numbers and booleans are TOML's too
            + "".join(f"{k} = {json.dumps(v)}\n" for k, v in self.options().items())
        )

    @staticmethod
    def host_env() -> dict[str, str]:
        """The client's pip settings that also hold in the host (the base image has the wheel
        folder), so a sandbox installs torch as the client would."""
        return {k: os.environ[k] for k in ("PIP_FIND_LINKS", "PIP_DEFAULT_TIMEOUT") if os.environ.get(k)}

    def options(self, **changes: Any) -> dict[str, Any]:
        options = {
            "host": self.host.host,
            "port": self.host.port,
            "user": self.host.user,
            "key_file": str(self.host.key_path),
            "known_hosts": str(self.known_hosts),
            "use_agent": False,
        }
        options.update(changes)
        return options

    def config(self, **changes: Any) -> SandboxConfig:
        """An ssh sandbox config for this host (cli mode, 15 minutes) with ``changes``."""
        data: dict[str, Any] = {"provider": "ssh", "execution_mode": "cli", "timeout": 900}
        options = self.options(**changes.pop("provider_options", {}))
        data.update(changes)
        data["provider_options"] = options
        return SandboxConfig.model_validate(data)
