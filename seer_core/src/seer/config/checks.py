"""Checks of single config values: pip requirements, system packages, environment variable
names, file pairs, hub ids, git refs, kernel variable names. Each is a plain function of the value
(and, for local paths, of this machine's disk); none needs a provider or a plugin.
"""

from __future__ import annotations

import builtins
import posixpath
import re
from pathlib import Path
from typing import Annotated, Any

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import AfterValidator

__all__ = [
    "ENV_NAME",
    "MAX_TIMEOUT",
    "OWNER_REPO",
    "REMOTE_URL",
    "URL_HOST_OPTION",
    "DirPair",
    "EnvName",
    "FilePair",
    "PipRequirement",
    "SystemPackage",
    "file_pairs",
    "git_ref_problem",
    "hub_id_problem",
    "is_adapter_dir",
    "is_local_path",
    "reserved_name_problem",
    "whole_number",
]

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HUB_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
OWNER_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$")
REMOTE_URL = re.compile(r"^(https?|ssh|git|file)://\S+$|^[\w.-]+@[\w.-]+:\S+$")
#: A URL whose host (after ``scheme://``, ``user@``) starts with '-': ssh would take it for an option.
URL_HOST_OPTION = re.compile(r"^(?:[a-z+]+://)?(?:[^/@]*@)?-")
_DEB_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+:~-]+)?$")
MAX_TIMEOUT = 7 * 24 * 3600
_MAX_HUB_NAME = 96


# --- value checks shared by several fields ----------------------------------------------------
def is_local_path(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~")) or value in (".", "..")


def is_adapter_dir(value: str) -> bool:
    """Whether ``value`` is a local directory holding a PEFT adapter (not a whole model)."""
    if not value.startswith("/"):
        return False
    root = Path(value)
    return (root / "adapter_config.json").is_file() and not (root / "config.json").is_file()


def hub_id_problem(value: str) -> str | None:
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


def git_ref_problem(value: str) -> str | None:
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


def reserved_name_problem(name: str) -> str | None:
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
    if req.startswith(("git+", "http://", "https://", "file:")) or is_local_path(req):
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
    if not ENV_NAME.match(value):
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


def whole_number(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number, got {value!r}")
    return value


def file_pairs(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    out = []
    for item in value:
        if isinstance(item, dict) and set(item) == {"local", "remote"}:
            item = (item["local"], item["remote"])
        out.append(item)
    return out


PipRequirement = Annotated[str, AfterValidator(_check_requirement)]
SystemPackage = Annotated[str, AfterValidator(_check_system_package)]
EnvName = Annotated[str, AfterValidator(_check_env_name)]
FilePair = Annotated[tuple[str, str], AfterValidator(_check_file_pair)]
DirPair = Annotated[tuple[str, str], AfterValidator(_check_dir_pair)]
