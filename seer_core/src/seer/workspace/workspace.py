"""A :class:`Workspace`: libraries and skills with local files, start-up code, MCP servers and the
model-loading switches of a session; installed into a sandbox or a local folder."""

from __future__ import annotations

import ast
import os
import posixpath
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from seer.errors import ConfigError, ConfigProblem
from seer.workspace.docs import demote_headings
from seer.workspace.files import DEFAULT_ROOT, PathArg, raise_problems
from seer.workspace.library import Library
from seer.workspace.skill import Skill

if TYPE_CHECKING:
    from seer.sandbox import Sandbox

__all__ = ["InstalledWorkspace", "Workspace"]


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
        raise_problems(problems, "Invalid workspace")
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
                    parts += ["", demote_headings(lib.docs.strip(), 2)]
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
        raise_problems(problems, "Invalid workspace")
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
