"""Find the sandbox's configured models from code running in it (runs inside the sandbox).

Core writes a manifest of the fetched models (``$SEER_MODELS_MANIFEST``, by default
``$SEER_WORKDIR/.seer/models.json``) and sets ``MODEL_<ID>_PATH`` for every model that is not
hidden. These helpers read them::

    from seer.runtime.models import get_model_path, list_configured_models

    path = get_model_path("google/gemma-2-9b")     # or a var_name: get_model_path("model")
    list_configured_models()                        # hidden ones show as "hidden model"

``get_model_path`` and ``list_configured_models`` are what an interface file served over RPC
finds injected. A hidden model is found by its name only where the client handed over the
sandbox's models key (an interface served over RPC, whose code is the user's: its server reads
the key from a file private to the user that it deletes once read, and hands it to
:func:`set_models_key`, so it is in no process's environment, where ``/proc/<pid>/environ`` would
show it): the manifest holds a keyed hash of the name, and without the key nothing in the sandbox
can test a name against it. Everywhere else (the kernel, a shell) a hidden model is found by its
``var_name``. Standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from pathlib import Path
from typing import Any

__all__ = [
    "MANIFEST_ENV",
    "env_var_for",
    "get_model_path",
    "list_configured_models",
    "load_manifest",
    "manifest_entry",
    "name_hmac",
    "set_models_key",
]

MANIFEST_ENV = "SEER_MODELS_MANIFEST"
#: A variable that may hold the key of the manifest's ``name_hmac``, for code run by hand; seer
#: itself never sets it (see :func:`set_models_key`).
MODELS_KEY_ENV = "SEER_MODELS_KEY"
HIDDEN_DISPLAY_NAME = "hidden model"

#: The models key of this process, given by :func:`set_models_key` (the RPC server's).
_models_key: str | None = None


def set_models_key(key: str | None) -> None:
    """Give this process the sandbox's models key (the RPC server does, from its key file), so
    that ``get_model_path(name)`` finds a hidden model by its name here. Kept in memory only:
    neither this process's environment nor its children's get it."""
    global _models_key
    _models_key = key or None


def env_var_for(name: str) -> str:
    """The variable holding a model's path: ``google/gemma-2-9b`` -> ``MODEL_GOOGLE_GEMMA_2_9B_PATH``."""
    return "MODEL_" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper() + "_PATH"


def _manifest_file(path: str | os.PathLike[str] | None) -> Path | None:
    if path is not None:
        return Path(path)
    if os.environ.get(MANIFEST_ENV):
        return Path(os.environ[MANIFEST_ENV])
    if os.environ.get("SEER_WORKDIR"):
        return Path(os.environ["SEER_WORKDIR"], ".seer", "models.json")
    return None


def load_manifest(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The manifest (``{"models": [...]}``); an empty one when the sandbox has no models."""
    file = _manifest_file(path)
    if file is None or not file.is_file():
        return {"models": []}
    with open(file) as fh:
        data = json.load(fh)
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise ValueError(f"{file} is not a seer model manifest (expected {{'models': [...]}})")
    return data


def name_hmac(key: str, name: str) -> str:
    """The manifest's ``name_hmac`` of a hidden model: HMAC-SHA256 of ``"seer-hidden:" + name``
    keyed with the sandbox's models key (hex), which the client keeps."""
    return hmac.new(bytes.fromhex(key), ("seer-hidden:" + name).encode(), hashlib.sha256).hexdigest()


def manifest_entry(
    name: str, manifest: dict[str, Any] | None = None, key: str | None = None
) -> dict[str, Any]:
    """The manifest entry of the model ``name`` (a repo id, a var_name, or a hidden model's id
    when the models ``key`` is given, set by :func:`set_models_key`, or in ``$SEER_MODELS_KEY``).

    Raises KeyError, listing the configured models, when there is none.
    """
    data = manifest if manifest is not None else load_manifest()
    entries = data.get("models", [])
    key = key if key is not None else (_models_key or os.environ.get(MODELS_KEY_ENV))
    digest = None
    if key:
        try:
            digest = name_hmac(key, name)
        except ValueError:  # not a hex key: no hidden model can match
            digest = None
    for entry in entries:
        if entry.get("name") == name:
            return dict(entry)
        if digest and entry.get("hidden") and hmac.compare_digest(str(entry.get("name_hmac") or ""), digest):
            return dict(entry)
    for entry in entries:
        if entry.get("var_name") == name:
            return dict(entry)
    raise KeyError(_unknown(name, entries))


def _unknown(name: str, entries: list[dict[str, Any]]) -> str:
    visible = [e["name"] for e in entries if not e.get("hidden") and e.get("name")]
    hidden = sum(1 for e in entries if e.get("hidden"))
    listing = ", ".join(repr(n) for n in visible) or "none"
    extra = (
        f" (and {hidden} hidden model{'s' if hidden != 1 else ''}, found here by var_name: "
        + ", ".join(repr(e.get("var_name")) for e in entries if e.get("hidden"))
        + ")"
        if hidden
        else ""
    )
    return f"no configured model named {name!r}; configured models: {listing}{extra}"


def get_model_path(name: str) -> str:
    """The directory ``from_pretrained`` loads for the configured model ``name``.

    ``name`` is the id given in ``ModelConfig(name=...)``, or its ``var_name``. A hidden model's
    id works only in an interface served over RPC (see the module docstring); elsewhere use its
    ``var_name``. A PEFT adapter's path is the adapter's directory. A PEFT adapter's base model
    is found by its id too (through its ``MODEL_<ID>_PATH`` variable). Raises KeyError listing the
    configured models otherwise.
    """
    manifest = load_manifest()
    try:
        return str(manifest_entry(name, manifest)["path"])
    except KeyError:
        from_env = os.environ.get(env_var_for(name))
        if from_env:
            return from_env
        raise


def list_configured_models() -> list[dict[str, Any]]:
    """The configured models: var_name, name, path, revision, commit, PEFT base path, env var.

    A hidden model is listed as ``"hidden model"``, without its name, commit or revision.
    """
    out = []
    for entry in load_manifest()["models"]:
        if entry.get("hidden"):
            out.append(
                {
                    "var_name": entry["var_name"],
                    "display_name": HIDDEN_DISPLAY_NAME,
                    "hidden": True,
                    "path": entry["path"],
                    "is_peft": entry.get("is_peft", False),
                    "base_path": entry.get("base_path"),
                }
            )
            continue
        out.append(
            {
                "var_name": entry["var_name"],
                "name": entry.get("name"),
                "display_name": entry.get("display_name") or entry.get("name"),
                "hidden": False,
                "path": entry["path"],
                "revision": entry.get("revision"),
                "commit": entry.get("commit"),
                "is_peft": entry.get("is_peft", False),
                "base_path": entry.get("base_path"),
                "env_var": entry.get("env_var"),
            }
        )
    return out
