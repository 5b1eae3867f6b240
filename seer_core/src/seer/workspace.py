"""Workspaces: the libraries, skills and files an agent's session starts with.

A :class:`Library` is Python source the agent can import (one module or a package) together with
docs the agent is shown. A :class:`Skill` is an agent-skills folder: ``SKILL.md`` (YAML front
matter with ``name`` and ``description``, then instructions) plus any other files. A
:class:`Workspace` bundles libraries and skills with local files, start-up code and the
model-loading switches of a session.

``Workspace.install(sandbox)`` writes all of it into a sandbox through the public
:class:`~seer.sandbox.Sandbox` API, so it works on every provider, and returns an
:class:`InstalledWorkspace` saying where things went; ``Workspace.install_local(directory)`` does
the same on this machine. User code is never imported here: docs come from parsing the source
with :mod:`ast`, which also catches a syntax error when a library is built, naming file and line.
"""

from __future__ import annotations

import ast
import keyword
import os
import posixpath
import re
import shutil
import sys
import tempfile
import textwrap
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml

from seer.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from seer.sandbox import Sandbox

__all__ = ["InstalledWorkspace", "Library", "Skill", "Workspace"]

#: A file's content: text as ``str``; anything that is not UTF-8 (package data) as ``bytes``.
FileContent = str | bytes
PathArg = str | os.PathLike[str]

#: import names a library may not take because importing them must reach seer itself
_RESERVED_NAMES = frozenset({"seer"})
_SKILL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_MAX_DESCRIPTION = 1024
_SKIP_SUFFIXES = (".pyc", ".pyo")
DEFAULT_ROOT = ".seer/workspace"


# --- small helpers ---------------------------------------------------------------------------
def _identifier_problem(name: object) -> str | None:
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


def _to_identifier(text: str) -> str:
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


def _normalise_files(files: object, where: str, problems: list[ConfigProblem]) -> dict[str, FileContent]:
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


def _syntax_problems(files: Mapping[str, FileContent], where: Callable[[str], str]) -> list[ConfigProblem]:
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


def _read_tree(root: Path) -> dict[str, FileContent]:
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


def _write_files(root: Path, files: Mapping[str, FileContent]) -> None:
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)


def _fail(problems: list[ConfigProblem], title: str) -> None:
    if problems:
        raise ConfigError(problems, title=title)


# --- docs from source, without importing it -------------------------------------------------
def _declared_all(tree: ast.Module) -> set[str] | None:
    """The names in a literal ``__all__``, if the module has one."""
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and isinstance(
            value, ast.List | ast.Tuple
        ):
            return {e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return None


def _docstring_lines(doc: str | None) -> list[str]:
    if not doc:
        return []
    doc = doc.replace('"""', r"\"\"\"")
    return [f'"""{doc}"""'] if "\n" not in doc else [f'"""{doc}', '"""']


def _function_stub(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    lines = []
    for deco in node.decorator_list:
        text = ast.unparse(deco)
        if text in ("property", "staticmethod", "classmethod") or text.endswith(".setter"):
            lines.append(f"@{text}")
    head = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    sig = f"{head} {node.name}({ast.unparse(node.args)})"
    if node.returns is not None:
        sig += f" -> {ast.unparse(node.returns)}"
    body = _docstring_lines(ast.get_docstring(node)) or ["..."]
    return [*lines, f"{sig}:", *(textwrap.indent(line, "    ") for line in body)]


def _class_stub(node: ast.ClassDef) -> list[str]:
    bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
    body = _docstring_lines(ast.get_docstring(node))
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and (
            not item.name.startswith("_") or item.name in ("__init__", "__call__")
        ):
            body += _function_stub(item)
    return [
        f"class {node.name}({', '.join(bases)}):" if bases else f"class {node.name}:",
        *(textwrap.indent(line, "    ") for line in body or ["..."]),
    ]


def _module_api(source: FileContent) -> tuple[str, str]:
    """A module's docstring and the stubs (signature + docstring) of its public functions and
    classes (those in ``__all__`` if it declares one, else those not starting with ``_``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(source)
    public = _declared_all(tree)
    stubs: list[str] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if (node.name not in public) if public is not None else node.name.startswith("_"):
            continue
        if stubs:
            stubs.append("")
        stubs += _function_stub(node) if not isinstance(node, ast.ClassDef) else _class_stub(node)
    return (ast.get_docstring(tree) or "").strip(), "\n".join(stubs)


def _module_docs(source: FileContent) -> str:
    doc, stubs = _module_api(source)
    return "\n\n".join(p for p in (doc, f"```python\n{stubs}\n```" if stubs else "") if p)


def _generated_docs(name: str, files: Mapping[str, FileContent]) -> str:
    """Docs for a library in canonical layout: its module's API, or for a package the API of
    ``__init__`` and of each public submodule."""
    if list(files) == [f"{name}.py"]:
        return _module_docs(files[f"{name}.py"])
    parts = [_module_docs(files[f"{name}/__init__.py"])]
    for path in sorted(files):
        rel = PurePosixPath(path).relative_to(name)
        if rel.suffix != ".py" or rel == PurePosixPath("__init__.py"):
            continue
        mod_parts = rel.with_suffix("").parts
        if mod_parts[-1] == "__init__":
            mod_parts = mod_parts[:-1]
        if any(p.startswith("_") for p in mod_parts):
            continue
        text = _module_docs(files[path])
        if text:
            parts.append(f"**`{'.'.join((name, *mod_parts))}`**\n\n{text}")
    return "\n\n".join(p for p in parts if p)


def _demote_headings(text: str, levels: int) -> str:
    """Markdown headings pushed down ``levels`` levels (outside code fences), so a library's
    own headings nest under the heading the workspace docs give it."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6}\s", line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)


# --- Library ---------------------------------------------------------------------------------
class Library:
    """Python source the agent can import, with the docs it is shown.

    ``files`` maps paths to sources. A *single-file* library is ``{"<name>.py": source}`` and
    installs as ``<name>.py``; a *package* is ``{"<name>/__init__.py": ..., "<name>/sub.py":
    ...}`` (package data included) and installs as ``<name>/...``. Paths relative to the package
    (``{"__init__.py": ..., "sub.py": ...}``) and a single file under another name are accepted
    and put into that layout. Text is ``str``; a data file that is not UTF-8 is ``bytes``.

    Everything is checked on construction (the import name, the paths, that every ``.py`` file
    parses); a problem raises :class:`~seer.errors.ConfigError` naming it.
    """

    def __init__(self, name: str, files: Mapping[str, FileContent], docs: str = ""):
        problems: list[ConfigProblem] = []
        name_problem = _identifier_problem(name)
        if name_problem is not None:
            problems.append(ConfigProblem("name", name_problem))
        if not isinstance(docs, str):
            problems.append(ConfigProblem("docs", f"must be a string, got {type(docs).__name__}"))
        normalised = _normalise_files(files, "files", problems)
        if isinstance(files, Mapping) and not files:
            problems.append(ConfigProblem("files", "a library needs at least one file"))
        canonical: dict[str, FileContent] = {}
        if normalised and name_problem is None:
            keys = list(normalised)
            if "__init__.py" in normalised:  # package-relative paths
                canonical = {f"{name}/{k}": v for k, v in normalised.items()}
            elif f"{name}/__init__.py" in normalised and all(k.startswith(f"{name}/") for k in keys):
                canonical = dict(normalised)
            elif len(keys) == 1 and keys[0].endswith(".py") and "/" not in keys[0]:
                canonical = {f"{name}.py": normalised[keys[0]]}
            else:
                problems.append(
                    ConfigProblem(
                        "files",
                        f"a library is one module (a single .py file) or a package with __init__.py; "
                        f"got {sorted(keys)!r}",
                    )
                )
        problems += _syntax_problems(canonical, where=lambda p: p)
        _fail(problems, f"Invalid library {name!r}" if isinstance(name, str) else "Invalid library")
        self.name: str = name
        self.files: dict[str, FileContent] = canonical
        self.docs: str = docs

    # --- constructors ---------------------------------------------------------------------
    @classmethod
    def from_code(cls, code: str, name: str) -> Library:
        """A single-module library from source text; docs from its docstrings."""
        if not isinstance(code, str):
            raise ConfigError([ConfigProblem("code", f"must be a string, got {type(code).__name__}")])
        lib = cls(name=name, files={f"{name}.py": code})
        lib.docs = _module_docs(code)
        return lib

    @classmethod
    def from_file(cls, path: PathArg, name: str | None = None) -> Library:
        """A single-module library from a ``.py`` file, imported as ``name`` (default: the
        file's name). Docs are the module docstring and its public functions' and classes'
        signatures and docstrings."""
        file = Path(path).expanduser()
        title = f"Invalid library {name or file.stem!r}"
        if not file.is_file():
            what = "is a directory (use Library.from_directory)" if file.is_dir() else "does not exist"
            raise ConfigError([ConfigProblem("path", f"{str(file)!r} {what}")], title=title)
        if file.suffix != ".py":
            raise ConfigError(
                [ConfigProblem("path", f"{str(file)!r} is not a Python (.py) file")], title=title
            )
        lib_name = name if name is not None else _derived_name(file.stem, "file")
        source = _read_source(file, title)
        _fail(_syntax_problems({f"{lib_name}.py": source}, where=lambda _p: str(file)), title)
        return cls(name=lib_name, files={f"{lib_name}.py": source}, docs=_module_docs(source))

    @classmethod
    def from_directory(cls, path: PathArg, name: str | None = None) -> Library:
        """A package from a directory with ``__init__.py``: every file under it (modules and
        package data) except ``__pycache__``, compiled and hidden files. Imported as ``name``
        (default: the directory's name)."""
        root = Path(path).expanduser()
        title = f"Invalid library {name or root.name!r}"
        if not root.is_dir():
            what = "is a file (use Library.from_file)" if root.is_file() else "does not exist"
            raise ConfigError([ConfigProblem("path", f"{str(root)!r} {what}")], title=title)
        if not (root / "__init__.py").is_file():
            raise ConfigError(
                [
                    ConfigProblem(
                        "path",
                        f"{str(root)!r} has no __init__.py, so it is not a package; add one, or use "
                        "Library.from_file for a single module",
                    )
                ],
                title=title,
            )
        lib_name = name if name is not None else _derived_name(root.resolve().name, "directory")
        files = _read_tree(root)
        _fail(_syntax_problems(files, where=lambda p: str(root / p)), title)
        canonical = {f"{lib_name}/{k}": v for k, v in files.items()}
        return cls(name=lib_name, files=canonical, docs=_generated_docs(lib_name, canonical))

    @classmethod
    def from_skill_dir(cls, path: PathArg) -> Library:
        """A library from a skill folder: ``SKILL.md`` (front matter with ``name`` and
        ``description``) and ``code.py``. It is imported by the skill's name made an identifier
        (``steering-hook`` -> ``steering_hook``); its docs are the body of ``SKILL.md``."""
        skill = Skill.from_dir(path)
        code_file = Path(path).expanduser() / "code.py"
        lib_name = _to_identifier(skill.name)
        title = f"Invalid library {lib_name!r}"
        if not code_file.is_file():
            raise ConfigError(
                [ConfigProblem("path", f"skill folder {str(Path(path))!r} has no code.py to import")],
                title=title,
            )
        source = _read_source(code_file, title)
        _fail(_syntax_problems({"code.py": source}, where=lambda _p: str(code_file)), title)
        name_problem = _identifier_problem(lib_name)
        if name_problem is not None:
            raise ConfigError(
                [
                    ConfigProblem(
                        "name",
                        f"the skill name {skill.name!r} gives the import name {lib_name!r}, which cannot "
                        f"be used: {name_problem}",
                    )
                ],
                title=title,
            )
        return cls(
            name=lib_name, files={f"{lib_name}.py": source}, docs=skill.body.strip() or skill.description
        )

    # --- what it is -----------------------------------------------------------------------
    @property
    def is_single_file(self) -> bool:
        """True for one module (``<name>.py``), False for a package."""
        return list(self.files) == [f"{self.name}.py"]

    @property
    def import_statement(self) -> str:
        """The statement that imports the library (``import name``)."""
        return f"import {self.name}"

    def install_into(self, directory: PathArg) -> Path:
        """Write the library's files into ``directory`` (a folder on ``sys.path``); returns the
        module file or package folder written."""
        root = Path(directory)
        _write_files(root, self.files)
        return root / (f"{self.name}.py" if self.is_single_file else self.name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Library):
            return NotImplemented
        return (self.name, self.files, self.docs) == (other.name, other.files, other.docs)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Library(name={self.name!r}, files={sorted(self.files)!r})"


def _derived_name(stem: str, what: str) -> str:
    derived = _to_identifier(stem)
    problem = _identifier_problem(derived)
    if problem is not None:
        raise ConfigError(
            [
                ConfigProblem(
                    "name",
                    f"the {what} name gives the import name {derived!r}, which cannot be used: {problem}; "
                    "pass name=...",
                )
            ],
            title=f"Invalid library {derived!r}",
        )
    return derived


def _read_source(file: Path, title: str) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [ConfigProblem("path", f"{str(file)!r} is not UTF-8 text ({exc.reason})", file=str(file))],
            title=title,
        ) from None


# --- Skill -----------------------------------------------------------------------------------
def _parse_skill_md(text: str, filename: str) -> tuple[dict[str, Any], str, dict[str, int]]:
    """``SKILL.md`` split into its front matter, its body, and the line each top-level key is on."""
    title = "Invalid skill"
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ConfigError(
            [
                ConfigProblem(
                    "front matter",
                    "no front matter: SKILL.md must start with a '---' line, then YAML with name: and "
                    "description:, then another '---' line",
                    file=filename,
                    line=1,
                )
            ],
            title=title,
        )
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise ConfigError(
            [
                ConfigProblem(
                    "front matter",
                    "the front matter is never closed (no second '---' line)",
                    file=filename,
                    line=1,
                )
            ],
            title=title,
        )
    try:
        data = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        reason = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            [
                ConfigProblem(
                    "front matter",
                    f"the front matter is not valid YAML: {reason}",
                    file=filename,
                    line=mark.line + 2 if mark is not None else 1,
                )
            ],
            title=title,
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            [
                ConfigProblem(
                    "front matter",
                    "the front matter must be a mapping (name: ..., description: ...)",
                    file=filename,
                    line=2,
                )
            ],
            title=title,
        )
    key_lines: dict[str, int] = {}
    for i in range(1, end):
        match = re.match(r"([^\s:#][^:]*):", lines[i])
        if match:
            key_lines.setdefault(match.group(1).strip(), i + 1)
    return data, "".join(lines[end + 1 :]), key_lines


class Skill:
    """An agent skill: ``SKILL.md`` (front matter with ``name`` and ``description``, then the
    instructions in ``body``) plus any other files, laid out as agent-skills folders are:
    ``<skills_dir>/<name>/SKILL.md``.

    ``files`` (read-only) is every file of the skill, ``SKILL.md`` included; pass the others as
    ``files=`` when building one. Other front-matter keys (``license``, ``allowed-tools``, ...)
    go in ``metadata``.
    """

    def __init__(
        self,
        name: str,
        description: str,
        body: str = "",
        files: Mapping[str, FileContent] | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
    ):
        problems: list[ConfigProblem] = []
        if not isinstance(name, str) or not _SKILL_NAME.fullmatch(name):
            problems.append(
                ConfigProblem(
                    "name",
                    "must be 1-64 letters, digits, '-' or '_', starting with a letter or digit (it names "
                    f"the skill's folder); got {name!r}",
                )
            )
        if not isinstance(description, str) or not description.strip():
            problems.append(ConfigProblem("description", f"must be a non-empty string, got {description!r}"))
        elif len(description) > _MAX_DESCRIPTION:
            problems.append(
                ConfigProblem("description", f"is {len(description)} characters; at most {_MAX_DESCRIPTION}")
            )
        if not isinstance(body, str):
            problems.append(ConfigProblem("body", f"must be a string, got {type(body).__name__}"))
        resources = _normalise_files(files or {}, "files", problems)
        if "SKILL.md" in resources:
            problems.append(
                ConfigProblem(
                    "files",
                    "'SKILL.md' is written from name, description and body; pass its instructions as "
                    "body= (or load the folder with Skill.from_dir)",
                )
            )
        extra = dict(metadata or {})
        clash = sorted({"name", "description"} & set(extra))
        if clash:
            problems.append(ConfigProblem("metadata", f"must not repeat {', '.join(clash)}"))
        else:
            try:
                yaml.safe_dump(extra)
            except yaml.YAMLError as exc:
                problems.append(ConfigProblem("metadata", f"cannot be written as YAML: {exc}"))
        _fail(problems, f"Invalid skill {name!r}" if isinstance(name, str) else "Invalid skill")
        self.name: str = name
        self.description: str = description.strip()
        self.body: str = body.strip("\n")
        self.metadata: dict[str, Any] = extra
        self._resources: dict[str, FileContent] = resources

    @classmethod
    def from_dir(cls, path: PathArg) -> Skill:
        """A skill from a folder holding ``SKILL.md`` and any other files (``__pycache__``,
        compiled and hidden files left out)."""
        root = Path(path).expanduser()
        if not root.is_dir():
            what = "is a file, not a skill folder" if root.is_file() else "does not exist"
            raise ConfigError([ConfigProblem("path", f"{str(root)!r} {what}")], title="Invalid skill")
        skill_md = root / "SKILL.md"
        if not skill_md.is_file():
            raise ConfigError(
                [ConfigProblem("path", f"{str(root)!r} has no SKILL.md, so it is not a skill folder")],
                title="Invalid skill",
            )
        front, body, key_lines = _parse_skill_md(skill_md.read_text(encoding="utf-8"), str(skill_md))
        files = _read_tree(root)
        files.pop("SKILL.md", None)
        metadata = {k: v for k, v in front.items() if k not in ("name", "description")}
        try:
            return cls(front.get("name"), front.get("description"), body, files, metadata=metadata)  # type: ignore[arg-type]
        except ConfigError as exc:
            # Point at SKILL.md (and the key's line) rather than at constructor arguments.
            problems = []
            for p in exc.problems:
                if p.field in ("name", "description", "metadata", "body"):
                    missing = p.field in ("name", "description") and p.field not in front
                    message = "is missing from the front matter" if missing else p.message
                    p = ConfigProblem(p.field, message, file=str(skill_md), line=key_lines.get(p.field, 1))
                problems.append(p)
            raise ConfigError(problems, title=exc.title) from None

    @property
    def skill_md(self) -> str:
        """The text of ``SKILL.md``: YAML front matter, then the body."""
        front = {"name": self.name, "description": self.description, **self.metadata}
        text = "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=4096) + "---\n"
        return text + (f"\n{self.body}\n" if self.body else "")

    @property
    def files(self) -> dict[str, FileContent]:
        """Every file of the skill, relative to its folder, ``SKILL.md`` first."""
        return {"SKILL.md": self.skill_md, **self._resources}

    def install_into(self, directory: PathArg) -> Path:
        """Write the skill as ``<directory>/<name>/SKILL.md`` plus its files; returns its folder.
        Files already there are overwritten, others left alone."""
        dest = Path(directory) / self.name
        _write_files(dest, self.files)
        return dest

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Skill):
            return NotImplemented
        return self.files == other.files

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Skill(name={self.name!r}, description={self.description!r}, files={sorted(self.files)!r})"


# --- Workspace -------------------------------------------------------------------------------
@dataclass(frozen=True)
class InstalledWorkspace:
    """Where an installed workspace is.

    To use it in a Python process (a kernel, a script), put :attr:`libs_dir` first on
    ``sys.path`` and run :attr:`init_code`; :attr:`setup_code` does both.
    """

    #: folder holding the libraries (absolute); put it on ``sys.path``
    libs_dir: str
    #: folder holding one sub-folder per skill (absolute)
    skills_dir: str
    #: the workspace's ``custom_init_code``
    init_code: str
    #: Markdown for the agent: each library (how to import it, its docs) and each skill
    docs: str
    library_names: list[str]
    skill_names: list[str] = field(default_factory=list)

    @property
    def root(self) -> str:
        """The folder holding ``libs`` and ``skills``."""
        return os.path.dirname(self.libs_dir)

    @property
    def setup_code(self) -> str:
        """Python that puts :attr:`libs_dir` first on ``sys.path``, then runs :attr:`init_code`."""
        code = (
            "import importlib as _seer_importlib, sys as _seer_sys\n"
            f"if {self.libs_dir!r} not in _seer_sys.path:\n"
            f"    _seer_sys.path.insert(0, {self.libs_dir!r})\n"
            "_seer_importlib.invalidate_caches()\n"
            "del _seer_importlib, _seer_sys\n"
        )
        return code + (f"{self.init_code}\n" if self.init_code.strip() else "")


def _looks_like_ipython(code: str) -> bool:
    return any(line.lstrip().startswith(("%", "!")) for line in code.splitlines())


def _file_pairs(
    value: object, field_name: str, kind: str, problems: list[ConfigProblem]
) -> list[tuple[str, str]]:
    """``[(local, path in the workspace), ...]`` checked: a bare local path keeps its name."""
    if isinstance(value, str | os.PathLike) or not isinstance(value, Sequence):
        problems.append(
            ConfigProblem(field_name, f"expected a list of (local path, workspace path), got {value!r}")
        )
        return []
    pairs = []
    for i, item in enumerate(value):
        where = f"{field_name}[{i}]"
        if isinstance(item, str | os.PathLike):
            local, remote = item, Path(item).name
        elif isinstance(item, Sequence) and len(item) == 2 and isinstance(item[0], str | os.PathLike):
            local, remote = item[0], item[1]
        else:
            problems.append(
                ConfigProblem(
                    where, f"expected a local path or a (local path, workspace path) pair, got {item!r}"
                )
            )
            continue
        path = Path(local).expanduser()
        if kind == "file" and not path.is_file():
            what = "is a directory (use local_dirs)" if path.is_dir() else "does not exist"
            problems.append(ConfigProblem(where, f"local file {str(local)!r} {what}"))
            continue
        if kind == "dir" and not path.is_dir():
            what = "is a file (use local_files)" if path.exists() else "does not exist"
            problems.append(ConfigProblem(where, f"local directory {str(local)!r} {what}"))
            continue
        if isinstance(remote, os.PathLike):
            remote = os.fspath(remote)
        if not isinstance(remote, str) or not remote.strip():
            problems.append(
                ConfigProblem(where, f"the workspace path for {str(local)!r} must be a non-empty string")
            )
            continue
        normal = posixpath.normpath(remote)
        if normal == ".." or normal.startswith("../"):
            # as for SandboxConfig.local_files: the copy would land outside the working directory
            # (on the local provider, anywhere on the client's disk) and outlive the sandbox
            problems.append(
                ConfigProblem(
                    where,
                    f"the workspace path {remote!r} leads out of the sandbox's working directory "
                    "('..'); keep it inside (e.g. 'data/file.txt')",
                )
            )
            continue
        pairs.append((str(path.resolve()), remote))
    return pairs


#: keys that make a mapping one MCP server's config (``mcpServers`` entry shape)
_MCP_SERVER_KEYS = frozenset({"command", "url"})


def _mcp_entries(value: Mapping[Any, Any]) -> list[tuple[str | None, Any]]:
    """``(name or None, config)`` for each MCP server a mapping describes: one server's config
    (``{"command": ...}`` or ``{"url": ...}``, named by a ``name`` key or, for seer's ``mcp``
    expose mode, by the interface name in its ``env``), a ``{name: config}`` mapping, or a whole
    ``{"mcpServers": {...}}`` file."""
    if "mcpServers" in value and isinstance(value["mcpServers"], Mapping):
        return list(value["mcpServers"].items())
    if _MCP_SERVER_KEYS & set(value):
        name = value.get("name")
        env = value.get("env")
        if name is None and isinstance(env, Mapping):  # seer's `mcp` expose mode names its interface
            name = env.get("SEER_RPC_NAME")
        return [(name if isinstance(name, str) else None, {k: v for k, v in value.items() if k != "name"})]
    return list(value.items())


def _add_mcp_servers(
    value: Mapping[Any, Any], where: str, into: dict[str, dict[str, Any]], problems: list[ConfigProblem]
) -> None:
    """Check the MCP server configs in ``value`` and add them to ``into`` by name."""
    entries = _mcp_entries(value)
    if not entries:
        problems.append(ConfigProblem(where, "an empty mapping names no MCP server"))
    for name, config in entries:
        if name is not None and (not isinstance(name, str) or not name.strip()):
            problems.append(
                ConfigProblem(where, f"an MCP server's name must be a non-empty string, got {name!r}")
            )
            continue
        if not isinstance(config, Mapping) or not (_MCP_SERVER_KEYS & set(config)):
            problems.append(
                ConfigProblem(
                    f"{where}[{name!r}]" if name else where,
                    "an MCP server config must be a mapping with 'command' (stdio) or 'url' (HTTP), got "
                    + (
                        f"keys {sorted(map(str, config))!r}"
                        if isinstance(config, Mapping)
                        else type(config).__name__
                    ),
                )
            )
            continue
        if name is None:  # unnamed: mcp, mcp-2, mcp-3, ...
            name, n = "mcp", 1
            while name in into:
                n += 1
                name = f"mcp-{n}"
        if name in into:
            problems.append(ConfigProblem(where, f"an MCP server named {name!r} is already given"))
            continue
        into[name] = dict(config)


class Workspace:
    """Libraries, skills, files and start-up code for an agent's session.

    Checked on construction: every problem (a duplicate library or skill name, a missing local
    file, a skill folder without ``SKILL.md``, ...) is reported at once in one
    :class:`~seer.errors.ConfigError`, each naming its field and index (``libraries[1]``).

    ``local_files`` and ``local_dirs`` take ``(local path, workspace path)`` pairs (or a bare
    local path, which keeps its name); a relative workspace path is taken from the sandbox's
    working directory. ``skill_dirs`` are skill folders (``SKILL.md`` plus files), installed for
    the agent like ``skills``; to make a skill's ``code.py`` importable use
    :meth:`Library.from_skill_dir`.

    ``mcp_servers`` are MCP server configs for the agent's harness to load: what
    ``ScopedSandbox.serve(..., expose_as="mcp")`` returns (named after the interface), any
    ``{"command": ...}`` or ``{"url": ...}`` entry (named by a ``name`` key), ``{name: config}``
    mappings, or a whole ``{"mcpServers": {...}}``. A mapping given in ``libraries`` is taken as
    one too, so the seed's ``Workspace(libraries=[scoped.serve(..., expose_as="mcp")])`` works.
    They are kept by name in :attr:`mcp_servers` (an unnamed one is called ``mcp``, ``mcp-2``,
    ...); installing a workspace does not start them: :func:`seer.execution.create_local_session`
    hands them on as ``session.mcp_config``.
    """

    def __init__(
        self,
        libraries: Sequence[Library] = (),
        skills: Sequence[Skill] = (),
        skill_dirs: Sequence[PathArg] = (),
        local_files: Sequence[PathArg | tuple[PathArg, str]] = (),
        local_dirs: Sequence[PathArg | tuple[PathArg, str]] = (),
        custom_init_code: str = "",
        preload_models: bool = True,
        hidden_model_loading: bool = True,
        mcp_servers: Sequence[Mapping[str, Any]] | Mapping[str, Any] = (),
    ):
        problems: list[ConfigProblem] = []
        self.libraries: list[Library] = []
        #: MCP server configs by name, in the ``mcpServers`` entry shape
        self.mcp_servers: dict[str, dict[str, Any]] = {}
        seen_libs: dict[str, str] = {}
        for i, lib in enumerate(self._list(libraries, "libraries", problems)):
            if isinstance(lib, Mapping):  # an MCP server config (expose_as="mcp")
                _add_mcp_servers(lib, f"libraries[{i}]", self.mcp_servers, problems)
            elif not isinstance(lib, Library):
                hint = " (use Library.from_file(...))" if isinstance(lib, str | os.PathLike) else ""
                problems.append(ConfigProblem(f"libraries[{i}]", f"expected a Library, got {lib!r}{hint}"))
            elif lib.name in seen_libs:
                problems.append(
                    ConfigProblem(
                        f"libraries[{i}]",
                        f"a library named {lib.name!r} is already given at {seen_libs[lib.name]}",
                    )
                )
            else:
                seen_libs[lib.name] = f"libraries[{i}]"
                self.libraries.append(lib)

        self.skills: list[Skill] = []
        self.skill_dirs: list[str] = []
        self._dir_skills: list[Skill] = []
        seen_skills: dict[str, str] = {}

        def add_skill(skill: Skill, where: str, into: list[Skill]) -> None:
            if skill.name in seen_skills:
                problems.append(
                    ConfigProblem(
                        where, f"a skill named {skill.name!r} is already given at {seen_skills[skill.name]}"
                    )
                )
            else:
                seen_skills[skill.name] = where
                into.append(skill)

        for i, skill in enumerate(self._list(skills, "skills", problems)):
            if not isinstance(skill, Skill):
                hint = (
                    " (use Skill.from_dir(...), or put the folder in skill_dirs)"
                    if isinstance(skill, str | os.PathLike)
                    else ""
                )
                problems.append(ConfigProblem(f"skills[{i}]", f"expected a Skill, got {skill!r}{hint}"))
            else:
                add_skill(skill, f"skills[{i}]", self.skills)
        for i, skill_dir in enumerate(self._list(skill_dirs, "skill_dirs", problems)):
            where = f"skill_dirs[{i}]"
            if not isinstance(skill_dir, str | os.PathLike):
                problems.append(ConfigProblem(where, f"expected a path to a skill folder, got {skill_dir!r}"))
                continue
            try:
                loaded = Skill.from_dir(skill_dir)
            except ConfigError as exc:
                problems += [
                    ConfigProblem(
                        where if p.field in ("front matter", "path") else f"{where}.{p.field}",
                        p.message,
                        p.file,
                        p.line,
                    )
                    for p in exc.problems
                ]
                continue
            self.skill_dirs.append(str(Path(skill_dir).expanduser().resolve()))
            add_skill(loaded, where, self._dir_skills)

        self.local_files: list[tuple[str, str]] = _file_pairs(local_files, "local_files", "file", problems)
        self.local_dirs: list[tuple[str, str]] = _file_pairs(local_dirs, "local_dirs", "dir", problems)
        servers = (
            [mcp_servers]
            if isinstance(mcp_servers, Mapping)
            else self._list(mcp_servers, "mcp_servers", problems)
        )
        for i, server in enumerate(servers):
            where = "mcp_servers" if isinstance(mcp_servers, Mapping) else f"mcp_servers[{i}]"
            if isinstance(server, Mapping):
                _add_mcp_servers(server, where, self.mcp_servers, problems)
            else:
                problems.append(
                    ConfigProblem(
                        where, f"expected an MCP server config (a mapping), got {type(server).__name__}"
                    )
                )

        if not isinstance(custom_init_code, str):
            problems.append(
                ConfigProblem("custom_init_code", f"must be a string, got {type(custom_init_code).__name__}")
            )
        elif custom_init_code.strip() and not _looks_like_ipython(custom_init_code):
            try:
                ast.parse(custom_init_code, filename="custom_init_code")
            except SyntaxError as exc:
                problems.append(
                    ConfigProblem(
                        "custom_init_code", f"syntax error at line {exc.lineno}: {exc.msg}", line=exc.lineno
                    )
                )
        for flag, value in (
            ("preload_models", preload_models),
            ("hidden_model_loading", hidden_model_loading),
        ):
            if not isinstance(value, bool):
                problems.append(ConfigProblem(flag, f"must be True or False, got {value!r}"))
        _fail(problems, "Invalid workspace")
        self.custom_init_code: str = custom_init_code
        self.preload_models: bool = preload_models
        self.hidden_model_loading: bool = hidden_model_loading

    @staticmethod
    def _list(value: object, field_name: str, problems: list[ConfigProblem]) -> list[Any]:
        if isinstance(value, str | bytes | os.PathLike) or not isinstance(value, Sequence):
            problems.append(ConfigProblem(field_name, f"expected a list, got {value!r}"))
            return []
        return list(value)

    # --- what it holds --------------------------------------------------------------------
    @property
    def all_skills(self) -> list[Skill]:
        """``skills`` followed by the skills loaded from ``skill_dirs``."""
        return [*self.skills, *self._dir_skills]

    @property
    def library_names(self) -> list[str]:
        """The import names of the workspace's libraries, in order."""
        return [lib.name for lib in self.libraries]

    def get_library_docs(self, skills_dir: str | None = None) -> str:
        """Markdown for the agent: a section per library (how to import it, then its docs) and a
        list of the skills with their descriptions (and, given ``skills_dir``, where they are).
        Empty when the workspace has neither."""
        sections = []
        if self.libraries:
            parts = ["# Libraries", "", "These Python libraries are importable in your environment."]
            for lib in self.libraries:
                parts += ["", f"## `{lib.name}`", "", f"```python\nimport {lib.name}\n```"]
                if lib.docs.strip():
                    parts += ["", _demote_headings(lib.docs.strip(), 2)]
            sections.append("\n".join(parts))
        skills = self.all_skills
        if skills:
            where = f"`{skills_dir}/<name>/SKILL.md`" if skills_dir else "each skill's `SKILL.md`"
            parts = ["# Skills", "", f"Read a skill's instructions in {where} before using it.", ""]
            parts += [f"- **{s.name}**: {s.description}" for s in skills]
            sections.append("\n".join(parts))
        return "\n\n".join(sections) + ("\n" if sections else "")

    # --- installing -----------------------------------------------------------------------
    def _stage(self, root: Path) -> None:
        """Write libraries into ``root/libs`` and skills into ``root/skills``."""
        (root / "libs").mkdir(parents=True, exist_ok=True)
        (root / "skills").mkdir(parents=True, exist_ok=True)
        for lib in self.libraries:
            lib.install_into(root / "libs")
        for skill in self.all_skills:
            skill.install_into(root / "skills")

    def _installed(self, libs_dir: str, skills_dir: str) -> InstalledWorkspace:
        return InstalledWorkspace(
            libs_dir=libs_dir,
            skills_dir=skills_dir,
            init_code=self.custom_init_code,
            docs=self.get_library_docs(skills_dir=skills_dir),
            library_names=self.library_names,
            skill_names=[s.name for s in self.all_skills],
        )

    def install(self, sandbox: Sandbox, root: str = DEFAULT_ROOT) -> InstalledWorkspace:
        """Write the workspace into a started sandbox: libraries into ``<root>/libs``, skills
        into ``<root>/skills/<name>/``, local files and directories at their workspace paths
        (relative ones from the sandbox's working directory). Files already there are
        overwritten; nothing else is removed. Uses only the public Sandbox API, so it works on
        every provider."""
        root_abs = sandbox.machine.resolve(root)
        libs_dir, skills_dir = posixpath.join(root_abs, "libs"), posixpath.join(root_abs, "skills")
        with tempfile.TemporaryDirectory(prefix="seer-workspace-") as tmp:
            self._stage(Path(tmp))
            # One directory transfer each (a single tar over exec on most providers).
            sandbox.upload_dir(Path(tmp) / "libs", libs_dir)
            sandbox.upload_dir(Path(tmp) / "skills", skills_dir)
        for local, remote in self.local_files:
            sandbox.upload_file(local, remote)
        for local, remote in self.local_dirs:
            sandbox.upload_dir(local, remote)
        return self._installed(libs_dir, skills_dir)

    def install_local(self, directory: PathArg, root: str = DEFAULT_ROOT) -> InstalledWorkspace:
        """Install the workspace on this machine, ``directory`` playing the sandbox's working
        directory: libraries into ``directory/<root>/libs``, skills into
        ``directory/<root>/skills``, local files and directories at their workspace paths, which
        must be relative and stay inside ``directory``."""
        base = Path(directory).expanduser().resolve()
        targets: list[tuple[str, Path, bool]] = []
        problems = []
        for field_name, pairs, is_dir in (
            ("local_files", self.local_files, False),
            ("local_dirs", self.local_dirs, True),
        ):
            for i, (local, remote) in enumerate(pairs):
                dest = (base / remote).resolve()
                if PurePosixPath(remote).is_absolute() or not dest.is_relative_to(base):
                    problems.append(
                        ConfigProblem(
                            f"{field_name}[{i}]",
                            f"{remote!r} is outside {str(base)!r}; a local install needs a relative "
                            "workspace path",
                        )
                    )
                targets.append((local, dest, is_dir))
        _fail(problems, "Invalid workspace")
        root_path = (base / root).resolve()
        self._stage(root_path)
        for local, dest, is_dir in targets:
            if Path(local).resolve() == dest:
                continue
            if is_dir:
                shutil.copytree(local, dest, dirs_exist_ok=True, symlinks=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(local, dest)
        return self._installed(str(root_path / "libs"), str(root_path / "skills"))

    def __repr__(self) -> str:
        return (
            f"Workspace(libraries={self.library_names!r}, skills={[s.name for s in self.all_skills]!r}, "
            f"local_files={len(self.local_files)}, local_dirs={len(self.local_dirs)}"
            + (f", mcp_servers={sorted(self.mcp_servers)!r}" if self.mcp_servers else "")
            + ")"
        )
