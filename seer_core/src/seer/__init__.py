"""seer: ready GPU environments for interpretability research and the agents doing it.

from seer import Sandbox, SandboxConfig, ModelConfig

with Sandbox(SandboxConfig(python_packages=["numpy"])).start() as sandbox:
    print(sandbox.exec("python -c 'import numpy; print(numpy.__version__)'"))
"""

from __future__ import annotations

from importlib import metadata

from seer.config import ExecutionMode, ExperimentConfig, ModelConfig, RepoConfig, SandboxConfig
from seer.errors import (
    ConfigError,
    ExecError,
    ExecTimeoutError,
    SandboxError,
    SandboxStartError,
    SeerError,
)
from seer.hookspecs import hookimpl
from seer.loader import load_config
from seer.providers.base import ExecResult, Snapshot
from seer.sandbox import RepoHandle, Sandbox
from seer.scoped import ScopedSandbox
from seer.workspace import Library, Skill, Workspace

try:
    __version__ = metadata.version("seer-core")
except metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = [
    "ConfigError",
    "ExecError",
    "ExecResult",
    "ExecTimeoutError",
    "ExecutionMode",
    "ExperimentConfig",
    "Library",
    "ModelConfig",
    "RepoConfig",
    "RepoHandle",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxStartError",
    "ScopedSandbox",
    "SeerError",
    "Skill",
    "Snapshot",
    "Workspace",
    "__version__",
    "hookimpl",
    "load_config",
]
