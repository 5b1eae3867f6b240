"""The seed-compatible import path: ``from seer.environment import Sandbox, SandboxConfig, ...``,
and the Stage-1 entry point :func:`setup_environment`.

::

    from seer import load_config
    from seer.environment import setup_environment

    env = setup_environment(load_config("experiment.yaml"))
    print(env.sandbox_id, env.jupyter_url)   # all an agent's notebook MCP server needs
    env.terminate()
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from seer.config import ExecutionMode, ExperimentConfig, ModelConfig, RepoConfig, SandboxConfig
from seer.errors import ConfigError, ConfigProblem
from seer.providers.base import Snapshot
from seer.sandbox import RepoHandle, Sandbox
from seer.sandbox.scoped import ScopedSandbox

__all__ = [
    "EnvironmentHandle",
    "ExecutionMode",
    "ExperimentConfig",
    "ModelConfig",
    "RepoConfig",
    "RepoHandle",
    "Sandbox",
    "SandboxConfig",
    "ScopedSandbox",
    "Snapshot",
    "setup_environment",
]


@dataclass
class EnvironmentHandle:
    """What :func:`setup_environment` returns: a started sandbox with Jupyter running, and how to
    reach it. ``jupyter_url`` (token included) is all an agent's notebook MCP server needs;
    ``jupyter_port`` is the port in that URL. ``status`` is the sandbox's status when the handle
    was made (``sandbox.status`` is the live one). ``terminate()`` (or leaving a ``with`` block)
    tears the sandbox down."""

    sandbox_id: str
    jupyter_url: str
    jupyter_port: int
    jupyter_token: str
    status: str
    sandbox: Sandbox = field(repr=False)
    experiment_config: SandboxConfig = field(repr=False)

    def terminate(self) -> None:
        """Tear the sandbox down (idempotent), keeping its notebooks and outputs on this machine."""
        self.sandbox.terminate()

    def __enter__(self) -> EnvironmentHandle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.terminate()


def setup_environment(
    config: SandboxConfig | str | os.PathLike[str], *, name: str | None = None, quiet: bool = False
) -> EnvironmentHandle:
    """Stage 1: start a sandbox for ``config`` (a config, or a YAML/JSON file's path read with
    :func:`seer.load_config`) with its packages installed, models downloaded, repos cloned and a
    Jupyter server running, and return its :class:`EnvironmentHandle`.

    Models are fetched into the sandbox; the kernels a notebook session starts load them. The
    config's ``execution_mode`` must be ``notebook`` (the default), since this stage's product is
    the Jupyter server: anything else is a :class:`~seer.errors.ConfigError` before anything is
    provisioned, as is any other config problem. ``name`` defaults to the config's ``name``.
    """
    if isinstance(config, str | os.PathLike):
        from seer.config.files import load_config

        config = load_config(Path(config))
    if config.execution_mode != ExecutionMode.NOTEBOOK:
        raise ConfigError(
            [
                ConfigProblem(
                    "execution_mode",
                    f"setup_environment starts a Jupyter server, which needs execution_mode 'notebook', "
                    f"not {str(config.execution_mode)!r}; use Sandbox(config).start() for other modes",
                )
            ]
        )
    sandbox = Sandbox(config).start(name=name, quiet=quiet)
    try:
        service: dict[str, Any] = dict(sandbox.services["jupyter"])
        url = str(sandbox.jupyter_url)
        port = urlsplit(service["url"]).port or int(service["port"])
        return EnvironmentHandle(
            sandbox_id=sandbox.sandbox_id,
            jupyter_url=url,
            jupyter_port=port,
            jupyter_token=str(service["token"]),
            status=str(sandbox.status),
            sandbox=sandbox,
            experiment_config=config,
        )
    except BaseException:
        sandbox.terminate(force=True)
        raise
