"""Declarative configuration: what a sandbox should hold.

``SandboxConfig`` (with ``ModelConfig`` and ``RepoConfig``) is the one thing a user writes, in
Python or in a YAML/JSON file read by :func:`seer.load_config`. Everything is validated when the
object is built, so a bad config fails before anything is provisioned, with the field named by its
full path (``models[1].base_model``, ``secrets[0]``, ``local_files[2]``). What can only be checked
against the chosen provider (GPU availability, provider options) or the local machine at start
time (secrets) is checked by :meth:`SandboxConfig.preflight`, still before anything is made.
"""

from __future__ import annotations

import builtins
import difflib
import enum
import keyword
import os
import posixpath
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, NoReturn, get_args

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from seer.errors import ConfigError, ConfigProblem, MissingSecretError, UnknownPluginError
from seer.runtime.loading import tokenizer_var_name

__all__ = [
    "DEFAULT_PROVIDER",
    "GPU_CATALOGUE",
    "ExecutionMode",
    "ExperimentConfig",
    "ModelConfig",
    "RepoConfig",
    "SandboxConfig",
    "format_loc",
    "known_gpu_types",
    "problems_from",
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
_HUB_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_OWNER_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$")
_REMOTE_URL = re.compile(r"^(https?|ssh|git|file)://\S+$|^[\w.-]+@[\w.-]+:\S+$")
#: A URL whose host (after ``scheme://``, ``user@``) starts with '-': ssh would take it for an option.
_URL_HOST_OPTION = re.compile(r"^(?:[a-z+]+://)?(?:[^/@]*@)?-")
_DEB_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+:~-]+)?$")
_MAX_TIMEOUT = 7 * 24 * 3600
_MAX_HUB_NAME = 96

#: Field names people carry over from other tools (or older seer), and what seer calls them.
_ALIASES: dict[str, tuple[str, ...]] = {
    "gpu_type": ("gpu",),
    "gpus": ("gpu_count",),
    "num_gpus": ("gpu_count",),
    "github_repos": ("repos",),
    "repositories": ("repos",),
    "packages": ("python_packages",),
    "pip_packages": ("python_packages",),
    "requirements": ("python_packages",),
    "apt_packages": ("system_packages",),
    "mode": ("execution_mode",),
    "model": ("models",),
    "branch": ("ref", "revision"),
    "tag": ("ref", "revision"),
    "commit": ("ref", "revision"),
    "model_name": ("name",),
    "repo": ("url",),
    "peft": ("is_peft",),
    "adapter": ("is_peft",),
    "variable": ("var_name",),
    "torch_dtype": ("dtype",),
    "device_map": ("device",),
}
#: Model-loading knobs that ModelConfig deliberately does not have: seer loads models itself
#: (``dtype`` and ``device`` are what it lets you choose).
_LOADING_KNOBS = frozenset(
    {
        "load_kwargs",
        "quantization",
        "load_in_8bit",
        "load_in_4bit",
        "trust_remote_code",
        "attn_implementation",
    }
)


def known_gpu_types() -> set[str]:
    """Every GPU name seer (:data:`GPU_CATALOGUE`) or an installed provider understands."""
    from seer.plugins import get_provider_class, providers

    names = set(GPU_CATALOGUE)
    for name in providers():
        names |= set(get_provider_class(name).capabilities.gpu_types)
    return names


def format_loc(loc: tuple[int | str, ...]) -> str:
    """``("models", 0, "base_model")`` -> ``"models[0].base_model"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


# --- turning pydantic errors into ConfigProblems ---------------------------------------------
def _fail(*errors: tuple[tuple[int | str, ...], str, Any]) -> NoReturn:
    """Raise a validation error at explicit locations (relative to the value being validated).

    Used by validators that know which nested field is at fault, so the problem names
    ``models[1].base_model`` rather than the model as a whole.
    """
    raise ValidationError.from_exception_data(
        "SandboxConfig",
        [
            InitErrorDetails(type=PydanticCustomError("seer_config", message), loc=loc, input=value)
            for loc, message, value in errors
        ],
    )


def _model_at(root: type[BaseModel] | None, loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The config class that holds the field at ``loc`` (e.g. ``("models", 0)`` -> ModelConfig)."""

    def inner(tp: Any) -> type[BaseModel] | None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp
        for arg in get_args(tp):
            found = inner(arg)
            if found is not None:
                return found
        return None

    cls = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = cls.model_fields.get(part) if cls is not None else None
        if field is None:
            return None
        cls = inner(field.annotation)
    return cls


def _unknown_field_message(name: str, owner: type[BaseModel] | None) -> str:
    if owner is None:
        return "unknown field (check the spelling)"
    fields = list(owner.model_fields)
    listing = f"{owner.__name__} fields: {', '.join(fields)}"
    if name in _LOADING_KNOBS and issubclass(owner, ModelConfig):
        return (
            f"{owner.__name__} has no {name!r}: seer loads models itself (choose the precision with "
            f"dtype and the placement with device); {listing}"
        )
    suggestion = next((a for a in _ALIASES.get(name, ()) if a in fields), None)
    if suggestion is None:
        close = difflib.get_close_matches(name.lower(), fields, n=1, cutoff=0.6)
        suggestion = close[0] if close else None
    hint = f" (did you mean {suggestion!r}?)" if suggestion else ""
    return f"unknown field{hint}; {listing}"


def problems_from(
    exc: ValidationError, prefix: tuple[int | str, ...] = (), model: type[BaseModel] | None = None
) -> list[ConfigProblem]:
    """One :class:`ConfigProblem` per pydantic error, located by the full dotted field path.

    ``prefix`` is where the validated value sits in the config (a provider validating
    ``provider_options`` passes ``("provider_options",)``); ``model`` is the config class that was
    validated, so an unknown field's message can list the fields it has."""
    problems = []
    for err in exc.errors(include_url=False):
        # Drop pydantic's internal tags (e.g. "function-after[...]") from the location.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        msg = err["msg"]
        for lead in ("Value error, ", "Assertion failed, "):
            msg = msg.removeprefix(lead)
        if err["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
            msg = _unknown_field_message(loc[-1], _model_at(model, loc[:-1]))
        elif err["type"] == "missing":
            msg = "required field is missing"
        problems.append(ConfigProblem(field=format_loc(prefix + loc), message=msg))
    return problems


_depth: ContextVar[int] = ContextVar("seer_config_depth", default=0)


@contextmanager
def _validating(cls: type[BaseModel]) -> Iterator[None]:
    """Turn a ValidationError into a ConfigError, but only at the outermost config object.

    pydantic builds nested configs through their ``__init__``; there the ValidationError must
    pass through untouched so pydantic can prefix its location (``models[0]`` + ``base_model``).
    """
    depth = _depth.get()
    token = _depth.set(depth + 1)
    try:
        yield
    except ValidationError as exc:
        if depth:
            raise
        raise ConfigError(problems_from(exc, model=cls), title=f"Invalid {cls.__name__}") from None
    finally:
        _depth.reset(token)


class _Strict(BaseModel):
    """Base of every config model: unknown fields are errors, errors are ConfigError."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, use_enum_values=False)

    def __init__(self, **data: Any) -> None:
        with _validating(type(self)):
            super().__init__(**data)

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul_bytes(cls, value: Any) -> Any:
        """Refuse a NUL byte in any string, for every field: such a string cannot reach a
        process's argv or environment (the OS refuses it) and would fail only once the sandbox runs."""
        errors = list(_nul_bytes(value))
        if errors:
            _fail(*errors)
        return value

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Any:
        with _validating(cls):
            return super().model_validate(obj, **kwargs)

    @classmethod
    def model_validate_json(cls, json_data: Any, **kwargs: Any) -> Any:
        with _validating(cls):
            return super().model_validate_json(json_data, **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        with _validating(type(self)):
            super().__setattr__(name, value)


_NUL_MESSAGE = "contains a NUL byte (\\x00), which no command argument, path or environment variable can hold"


def _nul_bytes(
    value: Any, loc: tuple[int | str, ...] = ()
) -> Iterator[tuple[tuple[int | str, ...], str, Any]]:
    """``(location, message, value)`` for each string with a NUL byte in a raw field value, looking
    into lists, tuples and mappings (keys too: an ``env`` name is a key). Config objects already
    built were checked when they were."""
    stack: list[tuple[tuple[int | str, ...], Any]] = [(loc, value)]
    seen: set[int] = set()  # a self-containing list or dict is walked once
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                yield where, _NUL_MESSAGE, item
        elif isinstance(item, dict | list | tuple) and id(item) not in seen:
            seen.add(id(item))
            if isinstance(item, dict):
                for key, sub in reversed(item.items()):
                    if isinstance(key, str) and "\x00" in key:
                        yield where, f"the name {key!r} {_NUL_MESSAGE}", key
                    else:
                        stack.append(((*where, key), sub))
            else:
                stack.extend(reversed([((*where, i), sub) for i, sub in enumerate(item)]))


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
    """A built-in mode's name as its :class:`ExecutionMode` member (found without loading any
    plugin), a registered plugin mode's name as that name; anything else is refused, listing the
    registered modes (and the extra that installs the mode, where a known one does)."""
    if isinstance(value, ExecutionMode) or not isinstance(value, str):
        return value
    try:
        return ExecutionMode(value)
    except ValueError:
        pass
    from seer.plugins import execution_modes, install_hint

    registered = list(execution_modes())
    match = next((n for n in registered if n == value), None) or next(
        (n for n in registered if n.lower() == value.strip().lower()), None
    )
    if match is not None:
        return match
    ordered = [m.value for m in ExecutionMode] + sorted(set(registered) - {m.value for m in ExecutionMode})
    hint = install_hint("execution mode", value)
    listing = ", ".join(repr(n) for n in ordered)
    raise ValueError(
        f"unknown execution mode {value!r}; registered modes: {listing}" + (f". {hint}" if hint else "")
    )


# --- value checks shared by several fields ----------------------------------------------------
def _is_local_path(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~")) or value in (".", "..")


def _is_adapter_dir(value: str) -> bool:
    """Whether ``value`` is a local directory holding a PEFT adapter (not a whole model)."""
    if not value.startswith("/"):
        return False
    root = Path(value)
    return (root / "adapter_config.json").is_file() and not (root / "config.json").is_file()


def _check_hub_id(value: str) -> str | None:
    """Why ``value`` is not a Hugging Face repo id (``name`` or ``org/name``), or None if it is."""
    parts = value.split("/")
    if len(parts) > 2:
        return "has more than one '/'"
    for part in parts:
        if not _HUB_PART.match(part):
            return "may only use letters, digits, '-', '_' and '.', and must start with a letter or digit"
        if "--" in part or ".." in part:
            return "must not contain '--' or '..'"
        if part.endswith(("-", ".")):
            return "must not end with '-' or '.'"
        if len(part) > _MAX_HUB_NAME:
            return f"is longer than {_MAX_HUB_NAME} characters"
    return None


def _git_ref_problem(value: str) -> str | None:
    """Why ``value`` cannot be a git branch, tag or commit (``git check-ref-format`` rules)."""
    if not value.strip():
        return "must not be empty"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        return "must not contain spaces or control characters"
    bad = sorted(set(value) & set("~^:?*[\\"))
    if bad:
        return f"must not contain {' '.join(repr(c) for c in bad)}"
    if ".." in value or "@{" in value or "//" in value or value == "@":
        return "must not contain '..', '@{' or '//'"
    if value.startswith(("-", "/", ".")) or value.endswith(("/", ".", ".lock")):
        return "must not start with '-', '/' or '.', nor end with '/', '.' or '.lock'"
    return None


#: What the Jupyter kernel defines before any cell runs: IPython's history and helpers
#: (``_``, ``_i``, ``_3``, ``In``, ``Out``, ...). seer's own kernel names all start with ``__seer``.
_IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "display", "_ih", "_oh", "_dh"})
_IPYTHON_HISTORY = re.compile(r"^_+$|^_i+$|^_i?\d+$")


def _reserved_name_problem(name: str) -> str | None:
    """Why the kernel variable ``name`` would break something already in the kernel, or None.

    Models and tokenizers are bound into the kernel's global namespace, so a name that is a
    builtin (``print``), one IPython defines (``In``, ``_``) or a dunder (``__builtins__``, and
    seer's own ``__seer_...`` helpers) would shadow or break what the agent's code relies on.
    """
    if name.startswith("__"):
        return "starts with '__', which is kept for Python's and seer's own names"
    if name in _IPYTHON_NAMES or _IPYTHON_HISTORY.match(name):
        return "is a name IPython defines in the kernel"
    if hasattr(builtins, name):
        return "is a Python builtin and would shadow it in the kernel"
    return None


def _check_requirement(value: str) -> str:
    req = value.strip()
    if not req:
        raise ValueError("must not be empty")
    if req.startswith("-"):
        raise ValueError(
            f"{req!r} is a pip option, not a requirement; list packages only "
            "(index URLs and other pip settings belong in pip's config or the provider's options)"
        )
    if req.startswith(("git+", "http://", "https://", "file:")) or _is_local_path(req):
        return req
    try:
        Requirement(req)
    except InvalidRequirement as exc:
        first = str(exc).splitlines()[0]
        why = f"{req!r} is not a valid requirement (PEP 508, like 'torch>=2.1'): {first}"
        raise ValueError(why) from None
    return req


def _check_system_package(value: str) -> str:
    if not _DEB_PACKAGE.match(value):
        raise ValueError(
            f"{value!r} is not a valid system package name "
            "(lower-case letters, digits, '+', '-', '.', optionally '=version')"
        )
    return value


def _check_env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError(
            f"{value!r} is not a valid environment variable name (letters, digits and '_', not starting "
            "with a digit)"
        )
    return value


def _check_pair(local: str, remote: str, kind: str) -> tuple[str, str]:
    if not local or not local.strip():
        raise ValueError("the local path is empty")
    path = Path(local).expanduser()
    if kind == "file" and not path.is_file():
        what = "is a directory (use local_dirs)" if path.is_dir() else "does not exist"
        raise ValueError(f"local file {local!r} {what}")
    if kind == "dir" and not path.is_dir():
        what = "is a file (use local_files)" if path.exists() else "does not exist"
        raise ValueError(f"local directory {local!r} {what}")
    if not remote or not remote.strip():
        raise ValueError(f"the sandbox path for {local!r} is empty")
    why = _sandbox_path_problem(remote)
    if why:
        raise ValueError(f"the sandbox path {remote!r} for {local!r} {why}")
    return (str(path.resolve()), remote)


def _sandbox_path_problem(path: str) -> str | None:
    """Why ``path`` is not a place inside the sandbox's working directory, or None if it is.

    Copies land in the working directory, which teardown removes; a path outside it would write
    wherever it points (on the ``local`` provider: the client's own disk) and outlive the sandbox.
    An absolute path is refused too: each provider puts the working directory somewhere else.
    """
    if path.startswith(("/", "~")):
        return "must be relative to the sandbox's working directory (e.g. 'data/file.txt'), not absolute"
    normal = posixpath.normpath(path)
    if normal == ".." or normal.startswith("../"):
        return "leads out of the sandbox's working directory ('..'); keep it inside (e.g. 'data/file.txt')"
    return None


def _check_file_pair(pair: tuple[str, str]) -> tuple[str, str]:
    return _check_pair(*pair, kind="file")


def _check_dir_pair(pair: tuple[str, str]) -> tuple[str, str]:
    return _check_pair(*pair, kind="dir")


#: The precisions ``ModelConfig.dtype`` takes (``auto``: the one the checkpoint was saved in).
MODEL_DTYPES = ("auto", "float32", "bfloat16", "float16")
_DTYPE_SHORTHANDS = {
    "fp32": "float32",
    "f32": "float32",
    "float": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "f16": "float16",
    "half": "float16",
}
#: The device maps ``ModelConfig.device`` takes besides ``cuda:N`` (transformers' device_map).
_DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential", "cpu", "cuda")
_CUDA_DEVICE = re.compile(r"^cuda:\d{1,2}$")


def _model_device_problems(
    models: list[ModelConfig], gpu: str | None, gpu_count: int
) -> list[tuple[tuple[int | str, ...], str, Any]]:
    """An error at ``models[i].device`` for a GPU placement the sandbox has no GPU for: ``cuda``
    without ``gpu``, or ``cuda:N`` beyond ``gpu_count``."""
    errors: list[tuple[tuple[int | str, ...], str, Any]] = []
    for i, m in enumerate(models):
        if m.device is None or not m.device.startswith("cuda"):
            continue
        if gpu is None:
            errors.append(
                (
                    ("models", i, "device"),
                    f"device {m.device!r} needs a GPU, and this config asks for none; set gpu "
                    "(e.g. 'A100'), or use device 'auto' or 'cpu'",
                    m.device,
                )
            )
        elif ":" in m.device and int(m.device.split(":")[1]) >= gpu_count:
            errors.append(
                (
                    ("models", i, "device"),
                    f"device {m.device!r} is past the sandbox's {gpu_count} GPU(s) "
                    f"(cuda:0 to cuda:{gpu_count - 1})",
                    m.device,
                )
            )
    return errors


def _whole_number(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number, got {value!r}")
    return value


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
    dtype: str | None = Field(
        None,
        description="precision the kernel loads it in: auto (the checkpoint's), float32, bfloat16, "
        "float16; default bfloat16 on a GPU, float32 on the CPU",
        json_schema_extra={"enum": [*MODEL_DTYPES, None]},
    )
    device: str | None = Field(
        None,
        description="where the kernel puts it (a device map): auto, balanced, sequential (across "
        "GPUs), cpu, cuda, cuda:N; default the GPU when there is one, else the CPU",
    )

    @field_validator("dtype", mode="before")
    @classmethod
    def _check_dtype(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"expected a dtype name ({', '.join(MODEL_DTYPES)}), got {value!r}")
        name = value.strip().lower().removeprefix("torch.")
        if name in MODEL_DTYPES:
            return name
        match = _DTYPE_SHORTHANDS.get(name)
        hint = f" (did you mean {match!r}?)" if match else ""
        raise ValueError(f"unknown dtype {value!r}{hint}; valid: {', '.join(MODEL_DTYPES)}")

    @field_validator("device", mode="before")
    @classmethod
    def _check_device(cls, value: Any) -> Any:
        if value is None:
            return None
        text = value.strip().lower() if isinstance(value, str) else None
        if text is not None and (text in _DEVICE_MAPS or _CUDA_DEVICE.match(text)):
            return text
        raise ValueError(
            f"unknown device {value!r}; valid: {', '.join(_DEVICE_MAPS)}, or cuda:N (a GPU's index)"
        )

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
        why = _check_hub_id(value)
        if why:
            raise ValueError(
                f"{value!r} is neither a Hugging Face repo id (org/name) nor a local directory: it {why}"
            )
        return value

    @field_validator("revision")
    @classmethod
    def _check_revision(cls, value: str) -> str:
        why = _git_ref_problem(value)
        if why:
            raise ValueError(f"revision {value!r} is not a branch, tag or commit: it {why}")
        return value

    @field_validator("var_name")
    @classmethod
    def _check_var_name(cls, value: str) -> str:
        if keyword.iskeyword(value):
            raise ValueError(f"{value!r} is a Python keyword; pick another variable name")
        if not value.isidentifier():
            raise ValueError(f"{value!r} is not a valid Python variable name (e.g. 'model_b')")
        why = _reserved_name_problem(value)  # its tokenizer's name, "<value>_tokenizer", is then safe too
        if why:
            raise ValueError(f"{value!r} {why}; pick another variable name (e.g. 'model_b')")
        return value

    @model_validator(mode="after")
    def _check_peft(self) -> ModelConfig:
        if self.is_peft and not self.base_model:
            _fail(
                (
                    ("base_model",),
                    "is_peft=True needs base_model, the model the adapter applies to",
                    None,
                )
            )
        if self.base_model and not self.is_peft:
            _fail(
                (
                    ("base_model",),
                    "base_model is only used with is_peft=True; set is_peft=True or drop base_model",
                    self.base_model,
                )
            )
        if self.hidden and not self.is_peft and _is_adapter_dir(self.name):
            _fail(
                (
                    ("is_peft",),
                    f"{self.name} is a PEFT adapter (adapter_config.json, no config.json): a hidden "
                    "adapter needs is_peft=True and base_model (the model it applies to), since the "
                    "base model's id is scrubbed from its hidden copy",
                    self.is_peft,
                )
            )
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
    dockerfile: str | None = Field(
        None, description="Dockerfile in the repo the image is built from (providers that build images)"
    )
    install: bool | str = Field(False, description="pip install -e the repo, or a shell command")

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be empty")
        if value.startswith("-") or _URL_HOST_OPTION.match(value):
            raise ValueError(
                f"{value!r} starts (or its host starts) with '-', which git and ssh would read as an "
                "option; give owner/repo, a git URL or a local path"
            )
        if _is_local_path(value):
            path = Path(value).expanduser()
            if not path.is_dir():
                raise ValueError(f"local repository {value!r} does not exist")
            return str(path.resolve())
        if _OWNER_REPO.match(value) or _REMOTE_URL.match(value):
            return value
        raise ValueError(
            f"{value!r} is not owner/repo, a git URL (https://, ssh://, git@host:path, file://) "
            "or an existing local path (./dir, /abs/dir)"
        )

    @field_validator("ref")
    @classmethod
    def _check_ref(cls, value: str | None) -> str | None:
        why = _git_ref_problem(value) if value is not None else None
        if why:
            raise ValueError(f"ref {value!r} is not a branch, tag or commit: it {why}")
        return value

    @field_validator("dockerfile")
    @classmethod
    def _check_dockerfile(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip() or value.startswith(("/", "~")) or ".." in Path(value).parts:
            raise ValueError(
                f"dockerfile {value!r} must be a relative path inside the repository "
                "(e.g. 'docker/Dockerfile')"
            )
        return value

    @field_validator("install", mode="before")
    @classmethod
    def _check_install(cls, value: Any) -> Any:
        if not isinstance(value, bool | str):
            raise ValueError(
                f"expected true/false (pip install -e the repo) or a shell command, got {value!r}"
            )
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


def _kernel_name_clashes(models: list[ModelConfig]) -> list[tuple[tuple[int | str, ...], str, Any]]:
    """An error at ``models[i].var_name`` for each model that would bind a kernel variable an
    earlier model already binds: each model defines its ``var_name`` and its tokenizer's name
    (:func:`~seer.runtime.loading.tokenizer_var_name`), and a later binding silently replaces
    the earlier (``var_name: tokenizer`` next to the default ``model``, or ``m`` next to
    ``m_tokenizer``)."""
    bound: dict[str, tuple[int, str]] = {}  # kernel name -> (model index, what it holds there)
    errors: list[tuple[tuple[int | str, ...], str, Any]] = []
    for i, m in enumerate(models):
        tokenizer = tokenizer_var_name(m.var_name)
        for name, what in ((m.var_name, "model"), (tokenizer, "tokenizer")):
            if name not in bound:
                continue
            j, other = bound[name]
            if what == "model" and other == "model":
                why = f"{name!r} is already used by models[{j}]"
            elif what == "model":
                why = (
                    f"{name!r} is where models[{j}]'s tokenizer goes in the kernel; "
                    "one would replace the other"
                )
            else:
                why = (
                    f"this model's tokenizer would be bound to {name!r}, which is models[{j}]'s var_name; "
                    "one would replace the other"
                )
            errors.append(
                (
                    ("models", i, "var_name"),
                    f"{why}; give each model its own var_name (e.g. var_name: model_{i})",
                    m.var_name,
                )
            )
            break
        else:
            bound[m.var_name] = (i, "model")
            bound[tokenizer] = (i, "tokenizer")
    return errors


def _model_path_variable_clashes(models: list[ModelConfig]) -> list[tuple[tuple[int | str, ...], str, Any]]:
    """An error at ``models[i].name`` for each model whose ``MODEL_<ID>_PATH`` variable an earlier
    model with another name already sets (``org/a-b`` and ``org/a_b`` both give
    ``MODEL_ORG_A_B_PATH``): one path would silently replace the other in every shell and kernel.
    Hidden models set no such variable, and the same model listed twice sets the same path."""
    seen: dict[str, tuple[int, str]] = {}  # env id -> (model index, model name)
    errors: list[tuple[tuple[int | str, ...], str, Any]] = []
    for i, m in enumerate(models):
        if m.hidden:
            continue
        j, other = seen.setdefault(m.env_id, (i, m.name))
        if other != m.name:
            errors.append(
                (
                    ("models", i, "name"),
                    f"its path variable MODEL_{m.env_id}_PATH is also models[{j}]'s ({other!r}); "
                    "one path would replace the other in every shell and kernel (a hidden model sets none)",
                    m.name,
                )
            )
    return errors


def _file_pairs(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    out = []
    for item in value:
        if isinstance(item, dict) and set(item) == {"local", "remote"}:
            item = (item["local"], item["remote"])
        out.append(item)
    return out


_Requirement = Annotated[str, AfterValidator(_check_requirement)]
_SystemPackage = Annotated[str, AfterValidator(_check_system_package)]
_EnvName = Annotated[str, AfterValidator(_check_env_name)]
_FilePair = Annotated[tuple[str, str], AfterValidator(_check_file_pair)]
_DirPair = Annotated[tuple[str, str], AfterValidator(_check_dir_pair)]


class SandboxConfig(_Strict):
    """Everything a sandbox should hold. See docs/config.md for each field."""

    gpu: str | None = Field(None, description="GPU type (see GPU_CATALOGUE) or None for CPU")
    gpu_count: int = Field(1, ge=1, le=16, description="number of GPUs")
    execution_mode: ExecutionMode | str = Field(
        ExecutionMode.NOTEBOOK,
        description="how the agent works: notebook, cli, local or a plugin's registered mode",
    )
    models: list[ModelConfig] = Field(default_factory=list, description="models to download")
    repos: list[RepoConfig] = Field(default_factory=list, description="git repos to clone")
    python_packages: list[_Requirement] = Field(default_factory=list, description="pip requirements")
    system_packages: list[_SystemPackage] = Field(default_factory=list, description="apt packages")
    secrets: list[_EnvName] = Field(
        default_factory=list, description="names of local env vars passed into the sandbox"
    )
    env: dict[str, str] = Field(default_factory=dict, description="environment variables")
    timeout: int = Field(
        3600,
        description="lifetime limit in seconds (at most 7 days)",
        json_schema_extra={"exclusiveMinimum": 0, "maximum": _MAX_TIMEOUT},
    )
    local_files: list[_FilePair] = Field(
        default_factory=list, description="(local file, sandbox path) pairs copied in"
    )
    local_dirs: list[_DirPair] = Field(
        default_factory=list, description="(local dir, sandbox path) pairs copied in"
    )
    debug: bool = Field(
        False,
        description=(
            "start a VS Code server, code-server (only on a provider with the code_server capability: "
            "local, docker)"
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
        return _file_pairs(value)

    @field_validator("local_dirs", mode="before")
    @classmethod
    def _dirs_pairs(cls, value: Any) -> Any:
        return _file_pairs(value)

    @field_validator("gpu_count", mode="before")
    @classmethod
    def _gpu_count_number(cls, value: Any) -> Any:
        return _whole_number(value)

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
        if value > _MAX_TIMEOUT:
            raise ValueError(f"at most {_MAX_TIMEOUT} s (7 days), got {value}")
        return value

    @field_validator("gpu")
    @classmethod
    def _check_gpu(cls, value: str | None) -> str | None:
        if value is None:
            return None
        known = known_gpu_types()
        if value in known:
            return value
        if value.strip().lower() in ("none", "cpu", "null", ""):
            raise ValueError(f"unknown GPU {value!r}; for CPU write null in YAML, None in Python")
        norm = {re.sub(r"[\s_]+", "-", k.upper()): k for k in known}
        wanted = re.sub(r"[\s_]+", "-", value.strip().upper())
        match = norm.get(wanted)
        if match is None:
            close = difflib.get_close_matches(wanted, list(norm), n=1, cutoff=0.8)
            match = norm[close[0]] if close else None
        hint = f" (did you mean {match!r}?)" if match else ""
        raise ValueError(f"unknown GPU {value!r}{hint}; valid: {', '.join(sorted(known))}, or None for CPU")

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
            _fail(*errors)
        return value

    @field_validator("env")
    @classmethod
    def _check_env(cls, value: dict[str, str]) -> dict[str, str]:
        errors = []
        for name in value:
            if not _ENV_NAME.match(name):
                errors.append(((name,), f"{name!r} is not a valid environment variable name", name))
        if errors:
            _fail(*errors)
        return value

    @field_validator("provider")
    @classmethod
    def _check_provider(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from seer.plugins import get_provider_class

        try:
            get_provider_class(value)
        except UnknownPluginError as exc:  # names what is installed and the extra to install
            raise ValueError(str(exc)) from None
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
        errors += _kernel_name_clashes(self.models)
        errors += _model_path_variable_clashes(self.models)
        errors += _model_device_problems(self.models, self.gpu, self.gpu_count)
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
            _fail(*errors)
        return self

    # --- derived ----------------------------------------------------------------------------
    @property
    def provider_name(self) -> str:
        """The provider this config runs on: ``provider``, else ``$SEER_PROVIDER``, else local."""
        return self.provider or os.environ.get("SEER_PROVIDER") or DEFAULT_PROVIDER

    def preflight(self, *, dotenv: str | os.PathLike[str] | None = ".env") -> dict[str, str]:
        """Check what depends on this machine and the chosen provider; return the secret values.

        Raises :class:`~seer.errors.ConfigError` (naming every field at fault) for a missing
        secret, a GPU or option the provider does not offer, or a provider that is not installed
        or cannot be used here; :class:`~seer.errors.MissingSecretError` when secrets are the only
        problem. Nothing is provisioned.
        """
        from seer.config.secrets import resolve_secrets
        from seer.plugins import get_provider_class

        name = self.provider_name
        try:
            provider_cls = get_provider_class(name)
        except UnknownPluginError as exc:
            from_env = not self.provider and os.environ.get("SEER_PROVIDER")
            source = "$SEER_PROVIDER names a provider that is not installed: " if from_env else ""
            problem = ConfigProblem("provider", f"{source}{exc}")
            raise ConfigError([problem], title="Unknown provider") from None
        problems = list(provider_cls.check_config(self))
        try:
            values = resolve_secrets(self.secrets, dotenv=dotenv)
        except MissingSecretError as exc:
            if not problems:
                raise
            problems += exc.problems
        if problems:
            raise ConfigError(problems, title=f"Config not valid for provider {name!r}")
        return values


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
