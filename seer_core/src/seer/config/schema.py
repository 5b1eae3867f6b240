"""Declarative configuration: what a sandbox should hold, as values.

``SandboxConfig`` (with ``ModelConfig`` and ``RepoConfig``) is the one thing a user writes, in
Python or in a YAML/JSON file read by :func:`seer.load_config`. Its shape and values are validated
when the object is built, so a malformed config fails before anything is provisioned, with the
field named by its full path (``models[1].base_model``, ``secrets[0]``, ``local_files[2]``).
Nothing here asks the plugin registry: which providers, execution modes and GPU types are
installed, whether the provider takes the options and whether the secrets are set is the one
resolve step, :func:`seer.preflight.preflight`, which ``Sandbox.start()`` and the CLI call before
anything is made.

The package is split by concept: :mod:`~seer.config.gpus` (the GPU catalogue),
:mod:`~seer.config.base` (the strict base model, pydantic errors as ``ConfigProblem`` s),
:mod:`~seer.config.checks` (single values), :mod:`~seer.config.models` (``ModelConfig``,
``RepoConfig``); this module holds ``SandboxConfig`` and names them all, as before the split.
"""

from __future__ import annotations

import enum
import os
import re
from typing import Any

from pydantic import Field, PrivateAttr, field_validator, model_validator

from seer.config.base import ConfigSource, StrictModel, fail_at, format_loc, problems_from
from seer.config.checks import (
    ENV_NAME,
    MAX_TIMEOUT,
    DirPair,
    EnvName,
    FilePair,
    PipRequirement,
    SystemPackage,
    file_pairs,
    whole_number,
)
from seer.config.gpus import GPU_CATALOGUE
from seer.config.models import (
    MODEL_DTYPES,
    ModelConfig,
    RepoConfig,
    kernel_name_clashes,
    model_device_problems,
    model_path_variable_clashes,
)

__all__ = [
    "DEFAULT_PROVIDER",
    "GPU_CATALOGUE",
    "MODEL_DTYPES",
    "ConfigSource",
    "ExecutionMode",
    "ExperimentConfig",
    "ModelConfig",
    "RepoConfig",
    "SandboxConfig",
    "format_loc",
    "problems_from",
]

DEFAULT_PROVIDER = "local"


class ExecutionMode(enum.StrEnum):
    """seer's built-in execution modes: how the agent works with the sandbox. Names are
    case-insensitive: ``"NOTEBOOK"`` works. ``SandboxConfig.execution_mode`` also takes the name
    of any mode a plugin registers (``seer_register_execution_modes``), as a plain string."""

    NOTEBOOK = "notebook"  #: a Jupyter kernel in the sandbox, models pre-loaded
    CLI = "cli"  #: a shell in the sandbox
    LOCAL = "local"  #: the agent runs locally and calls exposed functions over RPC

    @classmethod
    def _missing_(cls, value: object) -> ExecutionMode | None:
        if isinstance(value, str):
            return cls.__members__.get(value.upper()) or cls._value2member_map_.get(value.lower())  # type: ignore[return-value]
        return None


def _execution_mode(value: Any) -> Any:
    """A built-in mode's name (any case) as its :class:`ExecutionMode` member; another name as
    itself, stripped: whether a plugin registers it is the preflight's question, not the schema's."""
    if isinstance(value, ExecutionMode) or not isinstance(value, str):
        return value
    try:
        return ExecutionMode(value)
    except ValueError:
        pass
    name = value.strip()
    if not name or any(c.isspace() for c in name):
        listing = ", ".join(repr(m.value) for m in ExecutionMode)
        raise ValueError(
            f"{value!r} is not an execution mode name; built-in modes: {listing} (or a plugin's mode's name)"
        )
    return name


class SandboxConfig(StrictModel):
    """Everything a sandbox should hold. See docs/config.md for each field."""

    gpu: str | None = Field(None, description="GPU type (see GPU_CATALOGUE) or None for CPU")
    gpu_count: int = Field(1, ge=1, le=16, description="number of GPUs")
    execution_mode: ExecutionMode | str = Field(
        ExecutionMode.NOTEBOOK,
        description="how the agent works: notebook, cli, local or a plugin's registered mode",
    )
    models: list[ModelConfig] = Field(default_factory=list, description="models to download")
    repos: list[RepoConfig] = Field(default_factory=list, description="git repos to clone")
    python_packages: list[PipRequirement] = Field(default_factory=list, description="pip requirements")
    system_packages: list[SystemPackage] = Field(default_factory=list, description="apt packages")
    secrets: list[EnvName] = Field(
        default_factory=list, description="names of local env vars passed into the sandbox"
    )
    env: dict[str, str] = Field(default_factory=dict, description="environment variables")
    timeout: int = Field(
        3600,
        description="lifetime limit in seconds (at most 7 days)",
        json_schema_extra={"exclusiveMinimum": 0, "maximum": MAX_TIMEOUT},
    )
    local_files: list[FilePair] = Field(
        default_factory=list, description="(local file, sandbox path) pairs copied in"
    )
    local_dirs: list[DirPair] = Field(
        default_factory=list, description="(local dir, sandbox path) pairs copied in"
    )
    debug: bool = Field(
        False,
        description=(
            "start a VS Code server, code-server (only on a provider with the code_server capability: "
            "local, docker, ssh, slurm, runpod, modal)"
        ),
    )
    toolkit: bool = Field(
        True,
        description="make seer-toolkit's modules (steering_hook, extract_activations, ...) importable "
        "in notebook kernels, when seer-toolkit is installed on this machine",
    )
    provider: str | None = Field(None, description="provider name; default $SEER_PROVIDER or 'local'")
    provider_options: dict[str, Any] = Field(
        default_factory=dict, description="options for the chosen provider (validated by it)"
    )

    # --- field checks ---------------------------------------------------------------------
    @field_validator("execution_mode", mode="before")
    @classmethod
    def _check_execution_mode(cls, value: Any) -> Any:
        return _execution_mode(value)

    @field_validator("models", mode="before")
    @classmethod
    def _models_from_strings(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(f"expected a list of models, got the string {value!r}; write [{value!r}]")
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("repos", mode="before")
    @classmethod
    def _repos_from_strings(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(f"expected a list of repos, got the string {value!r}; write [{value!r}]")
        if isinstance(value, list):
            return [{"url": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("python_packages", "system_packages", "secrets", mode="before")
    @classmethod
    def _not_a_bare_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(f"expected a list of strings, got the string {value!r}; write [{value!r}]")
        return value

    @field_validator("local_files", mode="before")
    @classmethod
    def _files_pairs(cls, value: Any) -> Any:
        return file_pairs(value)

    @field_validator("local_dirs", mode="before")
    @classmethod
    def _dirs_pairs(cls, value: Any) -> Any:
        return file_pairs(value)

    @field_validator("gpu_count", mode="before")
    @classmethod
    def _gpu_count_number(cls, value: Any) -> Any:
        return whole_number(value)

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout_number(cls, value: Any) -> Any:
        if isinstance(value, bool) or (isinstance(value, str) and not value.strip().isdigit()):
            raise ValueError(f"expected a whole number of seconds (e.g. 3600), got {value!r}")
        return value

    @field_validator("timeout")
    @classmethod
    def _timeout_range(cls, value: int) -> int:
        if value <= 0:
            raise ValueError(f"must be a positive number of seconds, got {value}")
        if value > MAX_TIMEOUT:
            raise ValueError(f"at most {MAX_TIMEOUT} s (7 days), got {value}")
        return value

    @field_validator("gpu")
    @classmethod
    def _check_gpu(cls, value: str | None) -> str | None:
        """Only what the value alone shows; whether a provider offers it is the preflight's."""
        if value is None:
            return None
        if value.strip().lower() in ("none", "cpu", "null", ""):
            raise ValueError(f"unknown GPU {value!r}; for CPU write null in YAML, None in Python")
        return value

    @field_validator("secrets")
    @classmethod
    def _check_secret_dupes(cls, value: list[str]) -> list[str]:
        first: dict[str, int] = {}
        errors = []
        for i, name in enumerate(value):
            if name in first:
                errors.append(((i,), f"{name!r} is listed twice (also secrets[{first[name]}])", name))
            first.setdefault(name, i)
        if errors:
            fail_at(*errors)
        return value

    @field_validator("env")
    @classmethod
    def _check_env(cls, value: dict[str, str]) -> dict[str, str]:
        errors = []
        for name in value:
            if not ENV_NAME.match(name):
                errors.append(((name,), f"{name!r} is not a valid environment variable name", name))
        if errors:
            fail_at(*errors)
        return value

    @field_validator("provider")
    @classmethod
    def _check_provider(cls, value: str | None) -> str | None:
        """Only the name's form; whether it is installed is the preflight's question."""
        if value is None:
            return None
        if not value.strip() or any(c.isspace() for c in value):
            raise ValueError(f"{value!r} is not a provider name (e.g. 'local', 'docker')")
        return value

    @model_validator(mode="after")
    def _check_whole(self) -> SandboxConfig:
        errors: list[tuple[tuple[int | str, ...], str, Any]] = []
        if self.gpu is None and self.gpu_count != 1:
            errors.append(
                (
                    ("gpu_count",),
                    f"gpu_count={self.gpu_count} needs a GPU type; set gpu (e.g. 'A100') or drop gpu_count",
                    self.gpu_count,
                )
            )
        errors += kernel_name_clashes(self.models)
        errors += model_path_variable_clashes(self.models)
        errors += model_device_problems(self.models, self.gpu, self.gpu_count)
        dirs: dict[str, int] = {}
        for i, r in enumerate(self.repos):
            if r.dir_name in dirs:
                errors.append(
                    (
                        ("repos", i),
                        f"would be cloned into {r.dir_name!r}, like repos[{dirs[r.dir_name]}]; "
                        "each repository needs its own directory name",
                        r.url,
                    )
                )
            dirs.setdefault(r.dir_name, i)
        for i, name in enumerate(self.secrets):
            if name in self.env:
                errors.append(
                    (
                        ("secrets", i),
                        f"{name!r} is set in both env and secrets; keep it in one of the two",
                        name,
                    )
                )
        if errors:
            fail_at(*errors)
        return self

    _source: ConfigSource | None = PrivateAttr(default=None)

    # --- derived ----------------------------------------------------------------------------
    @property
    def source(self) -> ConfigSource | None:
        """The file this config was read from (:func:`seer.load_config`), if any."""
        return self._source

    def set_source(self, source: ConfigSource | None) -> None:
        """Record the file this config was read from, so later problems name its lines."""
        self._source = source

    def __eq__(self, other: object) -> bool:
        """Configs with equal values are equal, wherever they were read from."""
        if not isinstance(other, SandboxConfig):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    @property
    def provider_name(self) -> str:
        """The provider this config runs on: ``provider``, else ``$SEER_PROVIDER``, else local."""
        return self.provider or os.environ.get("SEER_PROVIDER") or DEFAULT_PROVIDER


class ExperimentConfig(SandboxConfig):
    """A :class:`SandboxConfig` with an experiment ``name``: what a YAML/JSON config file holds."""

    name: str | None = Field(None, description="experiment name, used as the sandbox name")

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", value):
            raise ValueError(
                f"{value!r}: use letters, digits, '.', '_' and '-' (at most 63, no leading symbol)"
            )
        return value

    def sandbox_config(self) -> SandboxConfig:
        """This config without the experiment name."""
        return SandboxConfig.model_validate(self.model_dump(exclude={"name"}))
