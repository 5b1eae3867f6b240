"""A :class:`Skill`: an agent-skills folder, ``SKILL.md`` (YAML front matter with ``name`` and
``description``, then instructions) plus any other files."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from seer.errors import ConfigError, ConfigProblem
from seer.workspace.files import FileContent, PathArg, normalise_files, raise_problems, read_tree, write_files

if TYPE_CHECKING:
    pass

__all__ = ["Skill"]

_SKILL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_MAX_DESCRIPTION = 1024


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
        resources = normalise_files(files or {}, "files", problems)
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
        raise_problems(problems, f"Invalid skill {name!r}" if isinstance(name, str) else "Invalid skill")
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
        files = read_tree(root)
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
        write_files(dest, self.files)
        return dest

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Skill):
            return NotImplemented
        return self.files == other.files

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Skill(name={self.name!r}, description={self.description!r}, files={sorted(self.files)!r})"
