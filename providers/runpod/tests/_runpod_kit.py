"""Helpers shared by the seer-runpod provider tests (the fixtures are in conftest.py)."""

from __future__ import annotations

from typing import Any

from seer import SandboxConfig


def runpod_config(volume: str | None = None, **changes: Any) -> SandboxConfig:
    """A CLI-mode RunPod sandbox's config (900 s), on the network volume ``volume`` where given,
    with ``changes`` over it."""
    data: dict[str, Any] = {"provider": "runpod", "execution_mode": "cli", "timeout": 900}
    if volume is not None:
        data["provider_options"] = {"network_volume_id": volume}
    data.update(changes)
    return SandboxConfig.model_validate(data)
