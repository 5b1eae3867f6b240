"""Helpers shared by the seer-modal provider tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import os
from typing import Any

from seer.config import SandboxConfig

#: How ``uv pip install`` finds packages on this machine: the local wheels and package mirrors
#: (the base image carries them), PyPI through the machine's TLS proxy for the rest.
PIP_OPTIONS = os.environ.get(
    "SEER_MODAL_TEST_PIP_OPTIONS",
    "--system-certs --find-links /opt/wheels "
    "--extra-index-url file:///opt/pypi/simple --extra-index-url file:///opt/pypi-more/simple",
)


def modal_config(**changes: Any) -> SandboxConfig:
    """A modal sandbox config whose packages install on this machine."""
    options: dict[str, Any] = {"pip_options": PIP_OPTIONS}
    options.update(changes.pop("provider_options", {}))
    data: dict[str, Any] = {"provider": "modal", "execution_mode": "cli", "timeout": 900}
    data.update(changes)
    data["provider_options"] = options
    return SandboxConfig.model_validate(data)
