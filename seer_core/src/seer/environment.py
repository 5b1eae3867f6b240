"""The seed-compatible import path: ``from seer.environment import Sandbox, SandboxConfig, ...``."""

from seer.config import ExecutionMode, ModelConfig, RepoConfig, SandboxConfig
from seer.providers.base import Snapshot
from seer.sandbox import RepoHandle, Sandbox
from seer.scoped import ScopedSandbox

__all__ = [
    "ExecutionMode",
    "ModelConfig",
    "RepoConfig",
    "RepoHandle",
    "Sandbox",
    "SandboxConfig",
    "ScopedSandbox",
    "Snapshot",
]
