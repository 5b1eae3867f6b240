"""What libraries, skills and workspaces share: file maps checked and read from or written to
disk, import names checked, and the one error that lists every problem."""

from __future__ import annotations

import ast
import keyword
import os
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from seer.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_ROOT",
    "FileContent",
    "PathArg",
    "identifier_problem",
    "normalise_files",
    "raise_problems",
    "read_tree",
    "syntax_problems",
    "to_identifier",
    "write_files",
]

#: A file's content: text as ``str``; anything that is not UTF-8 (package data) as ``bytes``.
FileContent = str | bytes
PathArg = str | os.PathLike[str]

#: import names a library may not take because importing them must reach seer itself
_RESERVED_NAMES = frozenset({"seer"})
_SKIP_SUFFIXES = (".pyc", ".pyo")
DEFAULT_ROOT = ".seer/workspace"


# --- small helpers ---------------------------------------------------------------------------
def identifier_problem(name: object) -> str | None:
    """Why ``name`` cannot be a library's import name (None if it can)."""
    if not isinstance(name, str) or not name:
        return f"must be a non-empty string, got {name!r}"
    if not name.isidentifier():
        return (
            f"{name!r} is not a valid Python identifier (letters, digits and '_', not starting with a digit)"
        )
    if keyword.iskeyword(name):
        return f"{name!r} is a Python keyword and cannot be imported"
    if name in sys.stdlib_module_names:
        return f"{name!r} would shadow the standard-library module {name!r}; pick another name"
    if name in _RESERVED_NAMES:
        return f"{name!r} would shadow seer itself; pick another name"
    return None


def to_identifier(text: str) -> str:
    """``"steering-hook"`` -> ``"steering_hook"``: the import name a file or skill name gives."""
    ident = re.sub(r"[^0-9A-Za-z_]", "_", text)
    return f"_{ident}" if ident[:1].isdigit() else ident


def _relpath_problem(path: object) -> str | None:
    """Why ``path`` cannot be a file's place inside a library or skill (None if it can)."""
    if not isinstance(path, str) or not path.strip():
        return f"a file path must be a non-empty string, got {path!r}"
    if "\\" in path:
        return f"{path!r}: use '/' to separate directories"
    if PurePosixPath(path).is_absolute() or re.match(r"[A-Za-z]:", path):
        return f"{path!r} is absolute; file paths are relative to the library or skill"
    if ".." in PurePosixPath(path).parts:
        return f"{path!r} contains '..'; file paths must stay inside the library or skill"
    if PurePosixPath(path).as_posix() in ("", "."):
        return f"{path!r} names no file"
    return None


def normalise_files(files: object, where: str, problems: list[ConfigProblem]) -> dict[str, FileContent]:
    """``files`` checked (relative paths, text or bytes) with paths in one spelling."""
    if not isinstance(files, Mapping):
        problems.append(
            ConfigProblem(where, f"expected a mapping of path -> content, got {type(files).__name__}")
        )
        return {}
    out: dict[str, FileContent] = {}
    for path, content in files.items():
        problem = _relpath_problem(path)
        if problem is not None:
            problems.append(ConfigProblem(f"{where}[{path!r}]" if isinstance(path, str) else where, problem))
            continue
        if not isinstance(content, str | bytes):
            problems.append(
                ConfigProblem(
                    f"{where}[{path!r}]", f"content must be str or bytes, got {type(content).__name__}"
                )
            )
            continue
        out[PurePosixPath(path).as_posix()] = content
    return out


def syntax_problems(files: Mapping[str, FileContent], where: Callable[[str], str]) -> list[ConfigProblem]:
    """A problem (with file and line) for each ``.py`` file that does not parse."""
    problems = []
    for path, source in files.items():
        if not path.endswith(".py"):
            continue
        filename = where(path)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # e.g. SyntaxWarning for "\d": not ours to report
                ast.parse(source, filename=filename)
        except SyntaxError as exc:
            problems.append(
                ConfigProblem(f"files[{path!r}]", f"syntax error: {exc.msg}", file=filename, line=exc.lineno)
            )
        except ValueError as exc:  # e.g. null bytes
            problems.append(ConfigProblem(f"files[{path!r}]", f"cannot be parsed: {exc}", file=filename))
    return problems


def read_tree(root: Path) -> dict[str, FileContent]:
    """Every file under ``root`` (relative POSIX path -> text, or bytes when not UTF-8), leaving
    out ``__pycache__``, compiled files and anything hidden (``.git``, ``.DS_Store``, ...)."""
    out: dict[str, FileContent] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for filename in sorted(filenames):
            if filename.startswith(".") or filename.endswith(_SKIP_SUFFIXES):
                continue
            path = Path(dirpath) / filename
            data = path.read_bytes()
            rel = path.relative_to(root).as_posix()
            try:
                out[rel] = data.decode("utf-8")
            except UnicodeDecodeError:
                out[rel] = data
    return out


def write_files(root: Path, files: Mapping[str, FileContent]) -> None:
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)


def raise_problems(problems: list[ConfigProblem], title: str) -> None:
    if problems:
        raise ConfigError(problems, title=title)
