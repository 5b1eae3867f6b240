"""Helpers shared by the seer-modal provider tests (the fixtures are in conftest.py)."""

from __future__ import annotations

from typing import Any

from seer.config import SandboxConfig
from seer_modal.testing import LOCAL_PIP_OPTIONS

#: How ``uv pip install`` finds packages on this machine (the fake's base image's wheels and mirrors).
PIP_OPTIONS = LOCAL_PIP_OPTIONS


def modal_config(**changes: Any) -> SandboxConfig:
    """A modal sandbox config whose packages install on this machine."""
    options: dict[str, Any] = {"pip_options": PIP_OPTIONS}
    options.update(changes.pop("provider_options", {}))
    data: dict[str, Any] = {"provider": "modal", "execution_mode": "cli", "timeout": 900}
    data.update(changes)
    data["provider_options"] = options
    return SandboxConfig.model_validate(data)
