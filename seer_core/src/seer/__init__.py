"""seer: ready GPU environments for interpretability research and the agents doing it.

from seer import Sandbox, SandboxConfig, ModelConfig

with Sandbox(SandboxConfig(python_packages=["numpy"])).start() as sandbox:
    print(sandbox.exec("python -c 'import numpy; print(numpy.__version__)'"))
"""

from __future__ import annotations

from importlib import import_module, metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: Where each name of the package's API lives. ``import seer`` loads none of them (a process that
#: needs only ``seer.errors``, like an MCP server starting, or the in-sandbox runtime, skips the
#: config models and the sandbox machinery); the first use of a name imports its module.
_LAZY = {
    **dict.fromkeys(
        ("ExecutionMode", "ExperimentConfig", "ModelConfig", "RepoConfig", "SandboxConfig"), "seer.config"
    ),
    **dict.fromkeys(
        ("ConfigError", "ExecError", "ExecTimeoutError", "SandboxError", "SandboxStartError", "SeerError"),
        "seer.errors",
    ),
    "hookimpl": "seer.hookspecs",
    "load_config": "seer.loader",
    "ExecResult": "seer.providers.base",
    "Snapshot": "seer.providers.base",
    "RepoHandle": "seer.sandbox",
    "Sandbox": "seer.sandbox",
    "ScopedSandbox": "seer.scoped",
    **dict.fromkeys(("Library", "Skill", "Workspace"), "seer.workspace"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'seer' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
