"""A :class:`Library`: Python source the agent can import (one module or a package) together with
the docs the agent is shown."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from seer.errors import ConfigError, ConfigProblem
from seer.workspace.docs import generated_docs, module_docs
from seer.workspace.files import (
    FileContent,
    PathArg,
    identifier_problem,
    normalise_files,
    raise_problems,
    read_tree,
    syntax_problems,
    to_identifier,
    write_files,
)
from seer.workspace.skill import Skill

if TYPE_CHECKING:
    pass

__all__ = ["Library"]


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
        name_problem = identifier_problem(name)
        if name_problem is not None:
            problems.append(ConfigProblem("name", name_problem))
        if not isinstance(docs, str):
            problems.append(ConfigProblem("docs", f"must be a string, got {type(docs).__name__}"))
        normalised = normalise_files(files, "files", problems)
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
        problems += syntax_problems(canonical, where=lambda p: p)
        raise_problems(problems, f"Invalid library {name!r}" if isinstance(name, str) else "Invalid library")
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
        lib.docs = module_docs(code)
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
        raise_problems(syntax_problems({f"{lib_name}.py": source}, where=lambda _p: str(file)), title)
        return cls(name=lib_name, files={f"{lib_name}.py": source}, docs=module_docs(source))

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
        files = read_tree(root)
        raise_problems(syntax_problems(files, where=lambda p: str(root / p)), title)
        canonical = {f"{lib_name}/{k}": v for k, v in files.items()}
        return cls(name=lib_name, files=canonical, docs=generated_docs(lib_name, canonical))

    @classmethod
    def from_skill_dir(cls, path: PathArg) -> Library:
        """A library from a skill folder: ``SKILL.md`` (front matter with ``name`` and
        ``description``) and ``code.py``. It is imported by the skill's name made an identifier
        (``steering-hook`` -> ``steering_hook``); its docs are the body of ``SKILL.md``."""
        skill = Skill.from_dir(path)
        code_file = Path(path).expanduser() / "code.py"
        lib_name = to_identifier(skill.name)
        title = f"Invalid library {lib_name!r}"
        if not code_file.is_file():
            raise ConfigError(
                [ConfigProblem("path", f"skill folder {str(Path(path))!r} has no code.py to import")],
                title=title,
            )
        source = _read_source(code_file, title)
        raise_problems(syntax_problems({"code.py": source}, where=lambda _p: str(code_file)), title)
        name_problem = identifier_problem(lib_name)
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
        write_files(root, self.files)
        return root / (f"{self.name}.py" if self.is_single_file else self.name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Library):
            return NotImplemented
        return (self.name, self.files, self.docs) == (other.name, other.files, other.docs)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Library(name={self.name!r}, files={sorted(self.files)!r})"


def _derived_name(stem: str, what: str) -> str:
    derived = to_identifier(stem)
    problem = identifier_problem(derived)
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
