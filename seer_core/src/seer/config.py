"""Declarative configuration: what a sandbox should hold.

``SandboxConfig`` (with ``ModelConfig`` and ``RepoConfig``) is the one thing a user writes, in
Python or in a YAML/JSON file read by :func:`seer.load_config`. Everything is validated when the
object is built, so a bad config fails before anything is provisioned, with the field named.
What can only be checked against the chosen provider (GPU availability, provider options) or the
local machine at start time (secrets) is checked by :meth:`SandboxConfig.preflight`, still before
anything is made.
"""

from __future__ import annotations

import enum
import keyword
import os
import re
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from seer.errors import ConfigError, ConfigProblem

__all__ = [
    "DEFAULT_PROVIDER",
    "GPU_CATALOGUE",
    "ExecutionMode",
    "ExperimentConfig",
    "ModelConfig",
    "RepoConfig",
    "SandboxConfig",
    "format_loc",
]

DEFAULT_PROVIDER = "local"

#: The GPU names seer understands, with what each is. Providers accept a subset (their catalogue).
GPU_CATALOGUE: dict[str, str] = {
    "T4": "NVIDIA T4, 16 GB",
    "L4": "NVIDIA L4, 24 GB",
    "A10G": "NVIDIA A10G, 24 GB",
    "A100": "NVIDIA A100, 40 GB (alias of A100-40GB)",
    "A100-40GB": "NVIDIA A100, 40 GB",
    "A100-80GB": "NVIDIA A100, 80 GB",
    "H100": "NVIDIA H100, 80 GB",
}

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_OWNER_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$")
_REMOTE_URL = re.compile(r"^(https?|ssh|git|file)://\S+$|^[\w.-]+@[\w.-]+:\S+$")
_DEB_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+:~-]+)?$")
_MAX_TIMEOUT = 7 * 24 * 3600


def format_loc(loc: tuple[int | str, ...]) -> str:
    """``("models", 0, "base_model")`` -> ``"models[0].base_model"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _problems_from(exc: ValidationError, prefix: tuple[int | str, ...] = ()) -> list[ConfigProblem]:
    problems = []
    for err in exc.errors(include_url=False):
        # Drop pydantic's internal tags (e.g. "function-after[...]") from the location.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        msg = err["msg"]
        for lead in ("Value error, ", "Assertion failed, "):
            msg = msg.removeprefix(lead)
        if err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; `seer schema` lists every field)"
        problems.append(ConfigProblem(field=format_loc(prefix + loc), message=msg))
    return problems


class _Strict(BaseModel):
    """Base of every config model: unknown fields are errors, errors are ConfigError."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, use_enum_values=False)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(_problems_from(exc), title=f"Invalid {type(self).__name__}") from None

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise ConfigError(_problems_from(exc), title=f"Invalid {cls.__name__}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise ConfigError(_problems_from(exc), title=f"Invalid {type(self).__name__}") from None


class ExecutionMode(enum.StrEnum):
    """How the agent works with the sandbox."""

    NOTEBOOK = "notebook"  #: a Jupyter kernel in the sandbox, models pre-loaded
    CLI = "cli"  #: a shell in the sandbox
    LOCAL = "local"  #: the agent runs locally and calls exposed functions over RPC

    @classmethod
    def _missing_(cls, value: object) -> ExecutionMode | None:
        if isinstance(value, str):
            return cls.__members__.get(value.upper()) or cls._value2member_map_.get(value.lower())  # type: ignore[return-value]
        return None


def _is_local_path(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~")) or value in (".", "..")


class ModelConfig(_Strict):
    """A Hugging Face model (or adapter) to download, cache and load.

    ``name`` is a hub id (``org/name``) or a local directory. With ``is_peft=True`` the model is a
    PEFT adapter applied on top of ``base_model``. ``hidden=True`` keeps the model's identity out
    of everything the agent can see.
    """

    name: str = Field(description="Hugging Face repo id (org/name) or a local directory")
    revision: str = Field("main", description="branch, tag or commit to pin")
    var_name: str = Field("model", description="variable the model is bound to in the kernel")
    hidden: bool = Field(False, description="hide the model's identity from the agent")
    is_peft: bool = Field(False, description="the model is a PEFT/LoRA adapter")
    base_model: str | None = Field(None, description="base model id (required with is_peft)")

    @field_validator("name", "base_model")
    @classmethod
    def _check_id(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if not value:
            raise ValueError("must not be empty")
        if _is_local_path(value):
            if not Path(value).expanduser().is_dir():
                raise ValueError(f"local model directory {value!r} does not exist")
            return str(Path(value).expanduser().resolve())
        if not _HUB_ID.match(value):
            raise ValueError(f"{value!r} is neither a Hugging Face repo id (org/name) nor a local directory")
        return value

    @field_validator("revision")
    @classmethod
    def _check_revision(cls, value: str) -> str:
        if not value.strip() or any(c.isspace() for c in value):
            raise ValueError(f"revision {value!r} must be a branch, tag or commit without spaces")
        return value

    @field_validator("var_name")
    @classmethod
    def _check_var_name(cls, value: str) -> str:
        if not value.isidentifier() or keyword.iskeyword(value):
            raise ValueError(f"{value!r} is not a valid Python variable name")
        return value

    @model_validator(mode="after")
    def _check_peft(self) -> ModelConfig:
        if self.is_peft and not self.base_model:
            raise ValueError("is_peft=True needs base_model, the model the adapter applies to")
        if self.base_model and not self.is_peft:
            raise ValueError("base_model is only used with is_peft=True; set is_peft=True or drop it")
        return self

    @property
    def env_id(self) -> str:
        """The ``MODEL_<ID>_PATH`` stem: ``google/gemma-2-9b`` -> ``GOOGLE_GEMMA_2_9B``."""
        return re.sub(r"[^A-Za-z0-9]+", "_", self.name).strip("_").upper()


class RepoConfig(_Strict):
    """A git repository cloned into the sandbox.

    ``url`` is ``owner/repo`` (GitHub), a full git URL, a ``file://`` URL or a local path.
    ``install=True`` runs ``pip install -e`` in the clone; a string is run as a shell command there.
    """

    url: str = Field(description="owner/repo, a git URL, file:// URL or a local path")
    ref: str | None = Field(None, description="branch, tag or commit to check out")
    dockerfile: str | None = Field(None, description="Dockerfile in the repo used for the image")
    install: bool | str = Field(False, description="pip install -e the repo, or a shell command")

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be empty")
        if _is_local_path(value):
            path = Path(value).expanduser()
            if not path.is_dir():
                raise ValueError(f"local repository {value!r} does not exist")
            return str(path.resolve())
        if _OWNER_REPO.match(value) or _REMOTE_URL.match(value):
            return value
        raise ValueError(f"{value!r} is not owner/repo, a git URL or an existing local path")

    @field_validator("dockerfile")
    @classmethod
    def _check_dockerfile(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("/") or ".." in Path(value).parts or not value):
            raise ValueError("dockerfile must be a relative path inside the repository")
        return value

    @field_validator("install")
    @classmethod
    def _check_install(cls, value: bool | str) -> bool | str:
        if isinstance(value, str) and not value.strip():
            raise ValueError("install command must not be empty (use true for pip install -e)")
        return value

    @property
    def clone_url(self) -> str:
        """The URL git clones from."""
        if _OWNER_REPO.match(self.url) and not _is_local_path(self.url):
            return f"https://github.com/{self.url}.git"
        return self.url

    @property
    def dir_name(self) -> str:
        """The directory the clone lands in: the repository's name."""
        tail = self.url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        return tail.removesuffix(".git") or "repo"


def _file_pairs(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    out = []
    for item in value:
        if isinstance(item, dict) and set(item) == {"local", "remote"}:
            item = (item["local"], item["remote"])
        out.append(item)
    return out


class SandboxConfig(_Strict):
    """Everything a sandbox should hold. See docs/config.md for each field."""

    gpu: str | None = Field(None, description="GPU type (see GPU_CATALOGUE) or None for CPU")
    gpu_count: int = Field(1, ge=1, le=16, description="number of GPUs")
    execution_mode: ExecutionMode = Field(ExecutionMode.NOTEBOOK, description="how the agent works")
    models: list[ModelConfig] = Field(default_factory=list, description="models to download")
    repos: list[RepoConfig] = Field(default_factory=list, description="git repos to clone")
    python_packages: list[str] = Field(default_factory=list, description="pip requirements")
    system_packages: list[str] = Field(default_factory=list, description="apt packages")
    secrets: list[str] = Field(
        default_factory=list, description="names of local env vars passed into the sandbox"
    )
    env: dict[str, str] = Field(default_factory=dict, description="environment variables")
    timeout: int = Field(3600, gt=0, le=_MAX_TIMEOUT, description="lifetime limit in seconds")
    local_files: list[tuple[str, str]] = Field(
        default_factory=list, description="(local file, sandbox path) pairs copied in"
    )
    local_dirs: list[tuple[str, str]] = Field(
        default_factory=list, description="(local dir, sandbox path) pairs copied in"
    )
    debug: bool = Field(False, description="start a VS Code server where the provider can")
    provider: str | None = Field(None, description="provider name; default $SEER_PROVIDER or 'local'")
    provider_options: dict[str, Any] = Field(
        default_factory=dict, description="options for the chosen provider (validated by it)"
    )

    # --- field checks ---------------------------------------------------------------------
    @field_validator("models", mode="before")
    @classmethod
    def _models_from_strings(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("repos", mode="before")
    @classmethod
    def _repos_from_strings(cls, value: Any) -> Any:
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
        return _file_pairs(value)

    @field_validator("local_dirs", mode="before")
    @classmethod
    def _dirs_pairs(cls, value: Any) -> Any:
        return _file_pairs(value)

    @field_validator("gpu")
    @classmethod
    def _check_gpu(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from seer.plugins import known_gpu_types

        known = known_gpu_types()
        if value not in known:
            match = {k.upper(): k for k in known}.get(value.upper())
            hint = f" (did you mean {match!r}?)" if match else ""
            raise ValueError(
                f"unknown GPU {value!r}{hint}; valid: {', '.join(sorted(known))}, or None for CPU"
            )
        return value

    @field_validator("python_packages")
    @classmethod
    def _check_requirements(cls, value: list[str]) -> list[str]:
        for i, req in enumerate(value):
            req = req.strip()
            if req.startswith("-"):
                raise ValueError(f"[{i}] {req!r}: pip options are not requirements")
            if req.startswith(("git+", "http://", "https://", "file:")) or _is_local_path(req):
                continue
            try:
                Requirement(req)
            except InvalidRequirement as exc:
                raise ValueError(f"[{i}] {req!r} is not a valid requirement: {exc}") from None
        return [r.strip() for r in value]

    @field_validator("system_packages")
    @classmethod
    def _check_system_packages(cls, value: list[str]) -> list[str]:
        for i, pkg in enumerate(value):
            if not _DEB_PACKAGE.match(pkg):
                raise ValueError(f"[{i}] {pkg!r} is not a valid system package name")
        return value

    @field_validator("secrets")
    @classmethod
    def _check_secret_names(cls, value: list[str]) -> list[str]:
        for i, name in enumerate(value):
            if not _ENV_NAME.match(name):
                raise ValueError(f"[{i}] {name!r} is not a valid environment variable name")
        dupes = sorted({n for n in value if value.count(n) > 1})
        if dupes:
            raise ValueError(f"listed more than once: {', '.join(dupes)}")
        return value

    @field_validator("env")
    @classmethod
    def _check_env(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid environment variable name")
        return value

    @field_validator("local_files")
    @classmethod
    def _check_local_files(cls, value: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [_check_pair(i, local, remote, "file") for i, (local, remote) in enumerate(value)]

    @field_validator("local_dirs")
    @classmethod
    def _check_local_dirs(cls, value: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [_check_pair(i, local, remote, "dir") for i, (local, remote) in enumerate(value)]

    @field_validator("provider")
    @classmethod
    def _check_provider(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from seer.plugins import get_provider_class

        get_provider_class(value)  # raises UnknownPluginError naming the extra to install
        return value

    @model_validator(mode="after")
    def _check_whole(self) -> SandboxConfig:
        if self.gpu is None and self.gpu_count != 1:
            raise ValueError("gpu_count > 1 needs a gpu type; set gpu (e.g. 'A100')")
        seen: dict[str, int] = {}
        for i, m in enumerate(self.models):
            if m.var_name in seen:
                raise ValueError(
                    f"models[{i}].var_name {m.var_name!r} is already used by "
                    f"models[{seen[m.var_name]}]; give each model its own var_name"
                )
            seen[m.var_name] = i
        names = [r.dir_name for r in self.repos]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"repos: two repositories would be cloned into {dupes[0]!r}")
        overlap = set(self.env) & set(self.secrets)
        if overlap:
            raise ValueError(f"{', '.join(sorted(overlap))} is set in both env and secrets")
        return self

    # --- derived ----------------------------------------------------------------------------
    @property
    def provider_name(self) -> str:
        """The provider this config runs on: ``provider``, else ``$SEER_PROVIDER``, else local."""
        return self.provider or os.environ.get("SEER_PROVIDER") or DEFAULT_PROVIDER

    def preflight(self, *, dotenv: str | os.PathLike[str] | None = ".env") -> dict[str, str]:
        """Check what depends on this machine and the chosen provider; return the secret values.

        Raises :class:`~seer.errors.ConfigError` (naming the field) for a missing secret, a GPU
        or option the provider does not offer, or a provider that cannot be used here. Nothing
        is provisioned.
        """
        from seer.plugins import get_provider_class
        from seer.secrets import resolve_secrets

        provider_cls = get_provider_class(self.provider_name)
        problems = provider_cls.check_config(self)
        if problems:
            raise ConfigError(problems, title=f"Config not valid for provider {self.provider_name!r}")
        return resolve_secrets(self.secrets, dotenv=dotenv)


def _check_pair(i: int, local: str, remote: str, kind: str) -> tuple[str, str]:
    path = Path(local).expanduser()
    if kind == "file" and not path.is_file():
        what = "is a directory (use local_dirs)" if path.is_dir() else "does not exist"
        raise ValueError(f"[{i}] local file {local!r} {what}")
    if kind == "dir" and not path.is_dir():
        what = "is a file (use local_files)" if path.exists() else "does not exist"
        raise ValueError(f"[{i}] local directory {local!r} {what}")
    if not remote or not remote.strip():
        raise ValueError(f"[{i}] the sandbox path for {local!r} is empty")
    return (str(path.resolve()), remote)


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
