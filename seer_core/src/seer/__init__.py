"""seer: ready GPU environments for interpretability research and the agents doing it.

from seer import Sandbox, SandboxConfig, ModelConfig

with Sandbox(SandboxConfig(python_packages=["numpy"])).start() as sandbox:
    print(sandbox.exec("python -c 'import numpy; print(numpy.__version__)'"))

Importing ``seer`` is lazy (PEP 562): each public name is imported from its module the first
time it is used. The code that runs inside a sandbox (:mod:`seer.runtime`) imports ``seer`` as
its parent package, so an eager ``__init__`` would load the whole client side there (pydantic,
pluggy, the config schema); lazily, the RPC server and the model fetcher load only what they use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seer.config import ExecutionMode, ExperimentConfig, ModelConfig, RepoConfig, SandboxConfig
    from seer.config.files import load_config
    from seer.errors import (
        ConfigError,
        ExecError,
        ExecTimeoutError,
        SandboxError,
        SandboxStartError,
        SeerError,
    )
    from seer.hookspecs import hookimpl
    from seer.providers.base import ExecResult, Snapshot
    from seer.sandbox import RepoHandle, Sandbox
    from seer.sandbox.scoped import ScopedSandbox
    from seer.workspace import Library, Skill, Workspace

    __version__: str

#: Public name -> the module that defines it (imported on first use); ``__all__`` lists the same.
_LAZY: dict[str, str] = {
    "ConfigError": "seer.errors",
    "ExecError": "seer.errors",
    "ExecResult": "seer.providers.base",
    "ExecTimeoutError": "seer.errors",
    "ExecutionMode": "seer.config",
    "ExperimentConfig": "seer.config",
    "Library": "seer.workspace",
    "ModelConfig": "seer.config",
    "RepoConfig": "seer.config",
    "RepoHandle": "seer.sandbox",
    "Sandbox": "seer.sandbox",
    "SandboxConfig": "seer.config",
    "SandboxError": "seer.errors",
    "SandboxStartError": "seer.errors",
    "ScopedSandbox": "seer.sandbox.scoped",
    "SeerError": "seer.errors",
    "Skill": "seer.workspace",
    "Snapshot": "seer.providers.base",
    "Workspace": "seer.workspace",
    "hookimpl": "seer.hookspecs",
    "load_config": "seer.config.files",
}

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


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("seer-core")
    except metadata.PackageNotFoundError:  # running from a source tree
        return "0.0.0+unknown"


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use, then keep it as a plain attribute."""
    if name == "__version__":
        value: Any = _version()
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'seer' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
