"""Load the sandbox's models into a Python process (runs inside the sandbox; the notebook kernel
pre-loads models with it).

:func:`load_model` takes one entry of the model manifest (see :mod:`seer.runtime.models`) and
returns ``(model, tokenizer)``; :func:`describe` writes the ``model_info_text`` the agent reads.
In the kernel, a model is bound to its ``var_name`` and its tokenizer to
:func:`tokenizer_var_name` of it: ``tokenizer`` for the default ``model``, ``<var_name>_tokenizer``
for any other (``model_a`` -> ``model_a_tokenizer``).

Loading is decided here; the user chooses only ``ModelConfig.dtype`` and ``.device`` (a device
map), carried in the manifest entry. By default: the first GPU when there is one
(``device_map="auto"`` across several), in bfloat16, else the CPU in float32;
a PEFT adapter is applied with ``peft`` on top of its base model. A hidden model's identity is
scrubbed from everything the loaded objects carry (:func:`scrub_identity`).

torch, transformers and peft are imported only when a model is loaded.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from seer.kernel_names import tokenizer_var_name

__all__ = [
    "HIDDEN_NAME",
    "describe",
    "format_parameters",
    "kernel_namespace",
    "load_all",
    "load_model",
    "scrub_identity",
    "tokenizer_var_name",
    "warn_on_reload",
]

#: What a hidden model's name and paths are replaced with in loaded objects.
HIDDEN_NAME = "hidden-model"
HIDDEN_DISPLAY_NAME = "hidden model"
_TOKENIZER_FILES = (
    "tokenizer_config.json",
    "tokenizer.json",
    "tokenizer.model",
    "vocab.json",
    "spiece.model",
)


#: Device maps that spread a model over whatever devices there are (accelerate decides).
_SPREAD = ("auto", "balanced", "balanced_low_0", "sequential")


def _placement(device: str | None, dtype: str | None = None) -> tuple[str, Any, Any]:
    """``(device, device_map, dtype)`` for loading: ``device`` is where the model goes without
    accelerate (a torch device), ``device_map`` what ``from_pretrained`` gets with it.

    ``device`` and ``dtype`` are the model's ``ModelConfig.device`` / ``.dtype`` (None: seer
    chooses the GPU when there is one, in bfloat16, else the CPU in float32; ``dtype="auto"``:
    the checkpoint's own precision)."""
    import torch

    has_gpu = torch.cuda.is_available()
    if device is None:
        device = "cuda" if has_gpu else "cpu"
    device_map: Any = device
    if device in _SPREAD:
        device = "cuda" if has_gpu else "cpu"
    elif device == "cuda":
        device_map = "auto" if torch.cuda.device_count() > 1 else "cuda:0"
    if dtype is None:
        chosen: Any = torch.bfloat16 if device.startswith("cuda") else torch.float32
    elif dtype == "auto":
        chosen = "auto"
    else:
        chosen = getattr(torch, dtype)
    return device, device_map, chosen


def _accelerate_available() -> bool:
    try:
        import accelerate  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """No per-weight progress bars while loading (they would fill the notebook)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover
        yield
        return
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # deprecation notices from inside peft
            yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def _from_pretrained(path: str, device: str, device_map: Any, dtype: Any) -> Any:
    from transformers import AutoModelForCausalLM

    if _accelerate_available():
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, device_map=device_map)
    # Without accelerate transformers takes no device_map: load on the CPU, then move.
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    return model.to("cuda:0" if device == "cuda" else device)  # type: ignore[arg-type]


#: What loading models in the sandbox imports: (module, distribution), in the order checked.
_LOADING_MODULES = (("torch", "torch"), ("transformers", "transformers"))
_LOADING_PURPOSE = (
    "loading the sandbox's models into the kernel (add it to the config's python_packages, or "
    "install seer's models extra where the sandbox's Python runs: on the local provider, here)"
)


def _require_loading_packages(peft: bool = False) -> None:
    """Raise :class:`~seer.errors.MissingExtraError` naming the package and the ``models`` extra
    when torch, transformers (or, for an adapter, peft) is not installed in the sandbox, instead of
    a bare ``No module named 'transformers'`` from the model-loading cell."""
    import importlib

    from seer.errors import MissingExtraError

    for module, distribution in (*_LOADING_MODULES, *((("peft", "peft"),) if peft else ())):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            raise MissingExtraError(distribution, "models", _LOADING_PURPOSE, module=module) from None


def _has_tokenizer(path: str) -> bool:
    return any(os.path.isfile(os.path.join(path, name)) for name in _TOKENIZER_FILES)


def load_model(entry: Mapping[str, Any], *, device: str | None = None) -> tuple[Any, Any]:
    """Load the model of a manifest ``entry``; return ``(model, tokenizer)``, the model in eval mode.

    The entry's ``device`` (a device map: ``"auto"``, ``"cpu"``, ``"cuda:1"``) and ``dtype``
    (``"float32"``, ``"bfloat16"``, ``"float16"``, ``"auto"``) come from ``ModelConfig``; the
    ``device`` argument overrides the entry's. By default the GPU when there is one
    (``device_map="auto"`` across several GPUs) in bfloat16, else the CPU in float32. For a PEFT
    adapter (``is_peft``) the base model is loaded from ``base_path`` and the adapter from ``path``
    is applied with ``peft``; the tokenizer comes from the adapter's directory when it has one,
    else from the base's. For a hidden model, :func:`scrub_identity` runs on both.
    """
    _require_loading_packages(peft=bool(entry.get("is_peft")))
    from transformers import AutoTokenizer

    path = str(entry["path"])
    device, device_map, dtype = _placement(device or entry.get("device"), entry.get("dtype"))
    with _quiet_loading():
        if entry.get("is_peft"):
            base_path = entry.get("base_path")
            if not base_path:
                var_name = entry.get("var_name")
                raise ValueError(
                    f"model {var_name!r} is a PEFT adapter, but its manifest entry has no base_path"
                )
            from peft import PeftModel

            base = _from_pretrained(str(base_path), device, device_map, dtype)
            model = PeftModel.from_pretrained(base, path)
            tokenizer_dir = path if _has_tokenizer(path) else str(base_path)
        else:
            model = _from_pretrained(path, device, device_map, dtype)
            tokenizer_dir = path
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    model.eval()
    if entry.get("hidden"):
        scrub_identity(model, tokenizer, paths=[p for p in (path, entry.get("base_path")) if p])
    return model, tokenizer


def _model_objects(model: Any) -> list[Any]:
    """The model and every wrapped model inside it (a PeftModel's base and its inner model)."""
    out: list[Any] = []
    todo = [model]
    while todo:
        obj = todo.pop()
        if obj is None or any(obj is seen for seen in out):
            continue
        out.append(obj)
        for attr in ("base_model", "model"):
            inner = obj.__dict__.get("_modules", {}).get(attr) if hasattr(obj, "__dict__") else None
            if inner is not None:
                todo.append(inner)
        get_base = getattr(obj, "get_base_model", None)
        if callable(get_base):
            with contextlib.suppress(Exception):
                todo.append(get_base())
    return out


def _scrub_strings(mapping: dict[str, Any], paths: list[str]) -> None:
    for key, value in list(mapping.items()):
        if isinstance(value, str) and any(p and p in value for p in paths):
            mapping[key] = HIDDEN_NAME


def scrub_identity(model: Any, tokenizer: Any, *, paths: list[str] | None = None) -> None:
    """Replace every name and path a loaded model and tokenizer carry with ``"hidden-model"``.

    Covers, on the model and every model it wraps: ``name_or_path``, ``config._name_or_path``,
    ``config._commit_hash``, the generation config's, and each PEFT config's
    ``base_model_name_or_path`` (and ``revision``); on the tokenizer: ``name_or_path`` and
    ``init_kwargs["name_or_path"]``. Any other string attribute of these objects that contains one
    of ``paths`` (the directories loaded from) is replaced too.
    """
    paths = [str(p) for p in (paths or []) if p]
    for obj in _model_objects(model):
        if "name_or_path" in getattr(obj, "__dict__", {}):
            obj.name_or_path = HIDDEN_NAME
        for cfg in (getattr(obj, "config", None), getattr(obj, "generation_config", None)):
            if cfg is None or not hasattr(cfg, "__dict__"):
                continue
            if hasattr(cfg, "_name_or_path"):
                cfg._name_or_path = HIDDEN_NAME
            if getattr(cfg, "_commit_hash", None) is not None:
                cfg._commit_hash = HIDDEN_NAME
            _scrub_strings(cfg.__dict__, paths)
        peft_configs = getattr(obj, "peft_config", None)
        if isinstance(peft_configs, dict):
            for pc in peft_configs.values():
                if hasattr(pc, "base_model_name_or_path"):
                    pc.base_model_name_or_path = HIDDEN_NAME
                if getattr(pc, "revision", None) is not None:
                    pc.revision = None
                _scrub_strings(pc.__dict__, paths)
    if tokenizer is not None:
        with contextlib.suppress(AttributeError):
            tokenizer.name_or_path = HIDDEN_NAME
        init_kwargs = getattr(tokenizer, "init_kwargs", None)
        if isinstance(init_kwargs, dict):
            if "name_or_path" in init_kwargs:
                init_kwargs["name_or_path"] = HIDDEN_NAME
            _scrub_strings(init_kwargs, paths)
        if hasattr(tokenizer, "__dict__"):
            _scrub_strings(tokenizer.__dict__, paths)


def load_all(
    manifest: Mapping[str, Any] | None = None, *, device: str | None = None
) -> dict[str, tuple[Any, Any, dict[str, Any]]]:
    """Load every model of the manifest (default: the sandbox's); ``{var_name: (model, tokenizer,
    entry)}``, ready for :func:`describe` and :func:`kernel_namespace`."""
    from seer.runtime.models import load_manifest

    data = manifest if manifest is not None else load_manifest()
    loaded: dict[str, tuple[Any, Any, dict[str, Any]]] = {}
    for entry in data["models"]:
        model, tokenizer = load_model(entry, device=device)
        loaded[entry["var_name"]] = (model, tokenizer, dict(entry))
    return loaded


def kernel_namespace(models: Mapping[str, tuple[Any, Any, Mapping[str, Any]]]) -> dict[str, Any]:
    """The kernel variables for loaded models: each model under its var_name, its tokenizer under
    :func:`tokenizer_var_name`."""
    ns: dict[str, Any] = {}
    for var_name, (model, tokenizer, _entry) in models.items():
        ns[var_name] = model
        ns[tokenizer_var_name(var_name)] = tokenizer
    return ns


def _loaded_as(target: Any, entries: Sequence[Mapping[str, Any]]) -> str | None:
    """The var_name of the loaded model ``target`` (a repo id or a directory) names, if any."""
    from seer.runtime.models import manifest_entry

    if not isinstance(target, str | os.PathLike):
        return None
    text = os.fspath(target)
    if not isinstance(text, str) or not text:
        return None
    real = os.path.realpath(text) if os.path.isdir(text) else None
    for entry in entries:
        paths = [p for p in (entry.get("path"), entry.get("base_path")) if p]
        if real is not None and any(os.path.realpath(str(p)) == real for p in paths):
            return str(entry["var_name"])
        if not entry.get("hidden") and text == entry.get("base_model"):
            return str(entry["var_name"])
    try:
        found = manifest_entry(text, {"models": [dict(e) for e in entries]})
    except KeyError:
        return None
    # A bare var_name ("model") names a local folder, not the loaded model.
    return None if found.get("var_name") == text else str(found["var_name"])


def warn_on_reload(models: Mapping[str, tuple[Any, Any, Mapping[str, Any]]]) -> None:
    """Make ``from_pretrained`` print a warning (to stderr: the cell's output) when it is asked
    for a model that is already loaded in this process under a variable.

    A second copy is harmless on a CPU and runs a GPU out of memory; the agent should use the
    variable. The warning names the variable only (a hidden model's name stays hidden). Applied
    by the kernel's model-loading cell, after the models are loaded.
    """
    import sys

    try:
        import transformers
    except ImportError:  # nothing can load a second copy the usual way
        return
    entries = [dict(entry, var_name=var_name) for var_name, (_m, _t, entry) in models.items()]
    base = transformers.PreTrainedModel
    current = base.__dict__.get("from_pretrained")
    if not isinstance(current, classmethod):
        return
    original = getattr(current.__func__, "__seer_original__", current.__func__)

    def from_pretrained(
        cls: Any, pretrained_model_name_or_path: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        var_name = _loaded_as(pretrained_model_name_or_path, entries)
        if var_name is not None:
            print(
                f"seer warning: this model is already loaded in the kernel as `{var_name}` "
                f"(tokenizer: `{tokenizer_var_name(var_name)}`); from_pretrained loads a second copy, "
                f"which can run the GPU out of memory. Use `{var_name}` instead.",
                file=sys.stderr,
                flush=True,
            )
        return original(cls, pretrained_model_name_or_path, *args, **kwargs)

    from_pretrained.__doc__ = original.__doc__
    from_pretrained.__wrapped__ = original  # type: ignore[attr-defined]
    from_pretrained.__seer_original__ = original  # type: ignore[attr-defined]
    if entries:
        base.from_pretrained = classmethod(from_pretrained)  # type: ignore[method-assign, assignment]
    else:
        base.from_pretrained = classmethod(original)  # type: ignore[method-assign, assignment]


def format_parameters(n: int) -> str:
    """A parameter count the way people say it: ``9.24B``, ``1.20M``, ``12.50K``."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.2f}{suffix}"
    return str(n)


def _device_text(model: Any) -> str:
    device_map = getattr(model, "hf_device_map", None)
    if isinstance(device_map, dict):
        devices = sorted({str(d) for d in device_map.values()})
        if len(devices) > 1:
            return f"{', '.join(devices)} (device_map=auto)"
    with contextlib.suppress(Exception):
        return str(model.device)
    with contextlib.suppress(StopIteration, AttributeError):
        return str(next(model.parameters()).device)
    return "unknown"


def _dtype_text(model: Any) -> str:
    """The precision of the model's parameters (``float32``; several listed when they differ)."""
    with contextlib.suppress(Exception):
        names = sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()})
        if names:
            return ", ".join(names)
    return "unknown"


def describe(models: Mapping[str, tuple[Any, Any, Mapping[str, Any]]]) -> str:
    """The ``model_info_text`` for loaded models (``{var_name: (model, tokenizer, entry)}``)::

        ### Pre-loaded Models

        The following models are already loaded in the kernel:

        **model** (google/gemma-2-9b-it)
        - Type: Gemma2ForCausalLM
        - Device: cuda:0
        - Dtype: bfloat16
        - Parameters: 9.24B

        **tokenizer** (google/gemma-2-9b-it)
        - Type: GemmaTokenizerFast
        - Vocab size: 256,000

        **IMPORTANT:** Do NOT reload these models. They are already loaded and ready to use.

    A hidden model shows as ``(hidden model)``; a PEFT adapter gets a line saying so.
    """
    lines = ["### Pre-loaded Models", "", "The following models are already loaded in the kernel:", ""]
    for var_name, (model, tokenizer, entry) in models.items():
        hidden = bool(entry.get("hidden"))
        shown = entry.get("display_name") or entry.get("name") or var_name
        label = HIDDEN_DISPLAY_NAME if hidden else str(shown)
        params = sum(p.numel() for p in model.parameters())
        lines += [
            f"**{var_name}** ({label})",
            f"- Type: {type(model).__name__}",
            f"- Device: {_device_text(model)}",
            f"- Dtype: {_dtype_text(model)}",
            f"- Parameters: {format_parameters(params)}",
        ]
        if entry.get("is_peft"):
            lines.append(
                f"- PEFT adapter: applied (`with {var_name}.disable_adapter():` runs the base model)"
            )
        lines.append("")
        if tokenizer is not None:
            lines += [
                f"**{tokenizer_var_name(var_name)}** ({label})",
                f"- Type: {type(tokenizer).__name__}",
                f"- Vocab size: {len(tokenizer):,}",
                "",
            ]
    lines.append("**IMPORTANT:** Do NOT reload these models. They are already loaded and ready to use.")
    return "\n".join(lines)
