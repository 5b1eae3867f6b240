"""``ModelConfig`` and ``RepoConfig``: a model and a repository a sandbox holds, and the checks
across a config's models (kernel names, path variables, GPU placement)."""

from __future__ import annotations

import keyword
import re
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from seer.config.base import StrictModel, fail_at
from seer.config.checks import (
    OWNER_REPO,
    REMOTE_URL,
    URL_HOST_OPTION,
    git_ref_problem,
    hub_id_problem,
    is_adapter_dir,
    is_local_path,
    reserved_name_problem,
)
from seer.kernel_names import tokenizer_var_name

__all__ = [
    "MODEL_DTYPES",
    "ModelConfig",
    "RepoConfig",
    "kernel_name_clashes",
    "model_device_problems",
    "model_path_variable_clashes",
]

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


def model_device_problems(
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


class ModelConfig(StrictModel):
    """A Hugging Face model (or adapter) to download, cache and load.

    ``name`` is a hub id (``org/name``) or a local directory. With ``is_peft=True`` the model is a
    PEFT adapter applied on top of ``base_model``. ``hidden=True`` keeps the model's identity out
    of everything the agent can see.
    """

    absent_fields: ClassVar[dict[str, str]] = dict.fromkeys(
        _LOADING_KNOBS,
        "seer loads models itself (choose the precision with dtype and the placement with device)",
    )

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
        if is_local_path(value):
            if not Path(value).expanduser().is_dir():
                raise ValueError(f"local model directory {value!r} does not exist")
            return str(Path(value).expanduser().resolve())
        why = hub_id_problem(value)
        if why:
            raise ValueError(
                f"{value!r} is neither a Hugging Face repo id (org/name) nor a local directory: it {why}"
            )
        return value

    @field_validator("revision")
    @classmethod
    def _check_revision(cls, value: str) -> str:
        why = git_ref_problem(value)
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
        why = reserved_name_problem(value)  # its tokenizer's name, "<value>_tokenizer", is then safe too
        if why:
            raise ValueError(f"{value!r} {why}; pick another variable name (e.g. 'model_b')")
        return value

    @model_validator(mode="after")
    def _check_peft(self) -> ModelConfig:
        if self.is_peft and not self.base_model:
            fail_at(
                (
                    ("base_model",),
                    "is_peft=True needs base_model, the model the adapter applies to",
                    None,
                )
            )
        if self.base_model and not self.is_peft:
            fail_at(
                (
                    ("base_model",),
                    "base_model is only used with is_peft=True; set is_peft=True or drop base_model",
                    self.base_model,
                )
            )
        if self.hidden and not self.is_peft and is_adapter_dir(self.name):
            fail_at(
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


class RepoConfig(StrictModel):
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
        if value.startswith("-") or URL_HOST_OPTION.match(value):
            raise ValueError(
                f"{value!r} starts (or its host starts) with '-', which git and ssh would read as an "
                "option; give owner/repo, a git URL or a local path"
            )
        if is_local_path(value):
            path = Path(value).expanduser()
            if not path.is_dir():
                raise ValueError(f"local repository {value!r} does not exist")
            return str(path.resolve())
        if OWNER_REPO.match(value) or REMOTE_URL.match(value):
            return value
        raise ValueError(
            f"{value!r} is not owner/repo, a git URL (https://, ssh://, git@host:path, file://) "
            "or an existing local path (./dir, /abs/dir)"
        )

    @field_validator("ref")
    @classmethod
    def _check_ref(cls, value: str | None) -> str | None:
        why = git_ref_problem(value) if value is not None else None
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
        if OWNER_REPO.match(self.url) and not is_local_path(self.url):
            return f"https://github.com/{self.url}.git"
        return self.url

    @property
    def dir_name(self) -> str:
        """The directory the clone lands in: the repository's name."""
        tail = self.url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        return tail.removesuffix(".git") or "repo"


def kernel_name_clashes(models: list[ModelConfig]) -> list[tuple[tuple[int | str, ...], str, Any]]:
    """An error at ``models[i].var_name`` for each model that would bind a kernel variable an
    earlier model already binds: each model defines its ``var_name`` and its tokenizer's name
    (:func:`~seer.kernel_names.tokenizer_var_name`), and a later binding silently replaces
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


def model_path_variable_clashes(models: list[ModelConfig]) -> list[tuple[tuple[int | str, ...], str, Any]]:
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
