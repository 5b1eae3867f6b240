"""Reading config files: :func:`load_config` (YAML or JSON), errors with file and line."""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path
from typing import Any

import yaml

from seer.config.base import ConfigSource
from seer.config.schema import ExperimentConfig, format_loc
from seer.errors import ConfigError, ConfigProblem

#: Path of a value in the parsed document (as in pydantic locations) -> its 1-based line.
_Lines = dict[tuple[Any, ...], int]

#: The most values (mappings, lists and scalars, counted with every alias expanded) a config
#: file may hold. Real configs hold hundreds; the limit refuses alias bombs before they expand.
MAX_VALUES = 100_000
#: The largest config file read, in bytes. Real configs are a few KB; the limit refuses a wrong
#: file (a dataset, a log) at once, before the YAML parser spends seconds on it.
MAX_BYTES = 1 << 20


def load_config(path: str | os.PathLike[str]) -> ExperimentConfig:
    """Read an experiment config (YAML or JSON: the ``SandboxConfig`` fields plus ``name``).

    Relative local paths in the file are taken from the file's directory: the local side of
    ``local_files`` / ``local_dirs``, and repos and models written as ``./dir`` or ``../dir``.
    Every error is a :class:`~seer.errors.ConfigError` naming the file, the line and the field.
    """
    file = Path(path)
    fname = str(file)

    def fail(message: str, line: int | None = None, field: str = "") -> ConfigError:
        return ConfigError([ConfigProblem(field, message, file=fname, line=line)], title="Invalid config")

    if file.is_dir():
        raise fail("is a directory, not a config file")
    if not file.is_file():
        raise fail("config file not found")
    try:
        size = file.stat().st_size
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror or exc}") from None
    if size > MAX_BYTES:
        raise fail(
            f"is {_human(size)}, over the {_human(MAX_BYTES)} a config file may be (configs are a "
            "few KB: is it the right file?)"
        )
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise fail(f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror or exc}") from None

    is_json = file.suffix.lower() == ".json"
    kind = "JSON" if is_json else "YAML"
    try:
        if is_json:
            data = json.loads(text) if text.strip() else None
            lines = _json_lines(text, fname)
        else:
            data, lines = _yaml_with_lines(text, fname)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else getattr(exc, "lineno", None)
        reason = getattr(exc, "problem", None) or getattr(exc, "msg", None) or str(exc)
        context = getattr(exc, "context", None)
        context_mark = getattr(exc, "context_mark", None)
        if context and context_mark is not None and context_mark.line + 1 != line:
            reason = f"{reason} ({context} that starts on line {context_mark.line + 1})"
        elif context:
            reason = f"{reason} ({context})"
        raise fail(f"not valid {kind}: {reason}", line) from None
    except RecursionError:  # the parsers recurse once per level of nesting
        raise fail(
            f"nested too deeply to be a config ({kind} lists or mappings hundreds of levels deep)"
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise fail(
            f"the top level must be a mapping of fields (gpu: ..., models: ...), not a {_kind_of(data)}",
            lines.get((), 1),
        )
    stage1 = _Stage1(data, lines, fname)
    data = _rebase_paths(stage1.data, file.parent.resolve())
    try:
        config = ExperimentConfig.model_validate(data)
    except ConfigError as exc:
        problems = [
            ConfigProblem(
                stage1.original(p.field), p.message, file=fname, line=_line_for(p.field, stage1.lines)
            )
            for p in exc.problems
        ]
        raise ConfigError(problems, title="Invalid config") from None
    stage1.notify()
    config.set_source(
        ConfigSource(fname, lambda field: (stage1.original(field), _line_for(field, stage1.lines)))
    )
    return config


#: Stage-1 field (the earlier design's experiment YAML) -> the current field, for those with one.
STAGE1_FIELDS: dict[str, str] = {
    "gpu.gpu_type": "gpu",
    "gpu.gpu_count": "gpu_count",
    "github_repos": "repos",
    "image.python_packages": "python_packages",
    "image.pip_packages": "python_packages",
    "image.system_packages": "system_packages",
    "image.apt_packages": "system_packages",
    "image.env": "env",
}
#: Stage-1 fields with no current counterpart, and why they are accepted anyway.
STAGE1_IGNORED: dict[str, str] = {
    "gpu.use_model_volumes": "seer caches models once per machine, in the provider's volume where it has one",
}


class _Stage1:
    """Reads the Stage-1 experiment YAML (a nested ``gpu`` block, ``github_repos``, an ``image``
    block of packages) as the current fields, remembering what it moved so that errors name the
    field as written (``gpu.gpu_type``, on its line) and one notice names the current fields.

    Anything in those blocks that has no counterpart is a config error naming it and its line.
    """

    def __init__(self, data: dict[str, Any], lines: _Lines, file: str):
        self.file = file
        self.lines: _Lines = dict(lines)
        self.moved: list[tuple[str, str]] = []  # (Stage-1 field, current field), in order
        self.ignored: list[str] = []
        self.renames: dict[str, str] = {}  # current top-level field -> the Stage-1 path it came from
        self.data = self._translate(dict(data))

    def _fail(self, path: tuple[Any, ...], message: str) -> ConfigError:
        problem = ConfigProblem(
            format_loc(path), message, file=self.file, line=_line_for(format_loc(path), self.lines)
        )
        return ConfigError([problem], title="Invalid config")

    def _move(self, data: dict[str, Any], source: tuple[str, ...], value: Any) -> None:
        written = ".".join(source)
        target = STAGE1_FIELDS[written]
        if target in data:
            raise self._fail(
                source,
                f"given twice: as {written} (the Stage-1 format) and as {target}; keep {target}",
            )
        data[target] = value
        self.moved.append((written, target))
        self.renames[target] = written
        for path, line in list(self.lines.items()):  # the value's lines, under its new name
            if path[: len(source)] == source:
                self.lines[(target, *path[len(source) :])] = line

    def _block(self, data: dict[str, Any], key: str, block: dict[str, Any]) -> None:
        for sub, value in block.items():
            written = f"{key}.{sub}"
            if written in STAGE1_FIELDS:
                self._move(data, (key, str(sub)), value)
            elif written in STAGE1_IGNORED:
                self.ignored.append(written)
            else:
                known = [f for f in (*STAGE1_FIELDS, *STAGE1_IGNORED) if f.startswith(key + ".")]
                raise self._fail(
                    (key, sub),
                    f"unknown field in the Stage-1 {key!r} block; it may hold {', '.join(known)}"
                    + ("" if key != "image" else " (a base image is a provider option: provider_options)"),
                )

    def _translate(self, data: dict[str, Any]) -> dict[str, Any]:
        for key in ("gpu", "image"):
            if isinstance(data.get(key), dict):
                self._block(data, key, data.pop(key))
        if "github_repos" in data:
            self._move(data, ("github_repos",), data.pop("github_repos"))
        return data

    def original(self, field: str) -> str:
        """``field`` (``repos[0]``) as the file wrote it (``github_repos[0]``)."""
        head = re.match(r"[^.\[]+", field)
        if head and head.group(0) in self.renames:
            return self.renames[head.group(0)] + field[head.end() :]
        return field

    def notify(self) -> None:
        """One warning naming the current fields, if the file used the Stage-1 format."""
        if not self.moved and not self.ignored:
            return
        parts = [f"{old} -> {new}" for old, new in self.moved]
        parts += [f"{old} (ignored: {STAGE1_IGNORED[old]})" for old in self.ignored]
        warnings.warn(
            f"{self.file}: read as the Stage-1 config format: {'; '.join(parts)}. "
            "Write the current fields (docs/config.md) to silence this.",
            FutureWarning,
            stacklevel=3,
        )


def _human(size: int) -> str:
    """``1048576`` -> ``1.0 MiB``; ``2048`` -> ``2.0 KiB``."""
    if size >= 1 << 20:
        return f"{size / (1 << 20):.1f} MiB"
    return f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} bytes"


def _kind_of(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(value), type(value).__name__
    )


def _rebase_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """Resolve relative local paths against the config file's directory."""

    def rebase_dotted(value: Any) -> Any:
        # Repos and models: only ./ and ../ mark a local path (``org/name`` is a hub id).
        # A NUL byte is left for validation to report: no path can hold one.
        if isinstance(value, str) and value.startswith(("./", "../")) and "\x00" not in value:
            return str((base / value).resolve())
        return value

    def rebase_local(value: Any) -> Any:
        # local_files / local_dirs: the local side is always a path.
        relative = (
            isinstance(value, str)
            and value.strip()
            and "\x00" not in value
            and not Path(value).expanduser().is_absolute()
        )
        if relative:
            return str((base / value).resolve())
        return value

    data = dict(data)
    for key in ("local_files", "local_dirs"):
        if isinstance(data.get(key), list):
            items = []
            for item in data[key]:
                if isinstance(item, list | tuple) and item:
                    item = [rebase_local(item[0]), *item[1:]]
                elif isinstance(item, dict) and "local" in item:
                    item = {**item, "local": rebase_local(item["local"])}
                items.append(item)
            data[key] = items
    for key, field in (("repos", "url"), ("models", "name")):
        if isinstance(data.get(key), list):
            data[key] = [
                {**item, field: rebase_dotted(item[field])}
                if isinstance(item, dict) and field in item
                else rebase_dotted(item)
                for item in data[key]
            ]
    return data


class _Alias(yaml.Node):
    """Where an alias (``*name``) is written, and the anchored node it stands for.

    PyYAML's composer hands back the anchored node itself for an alias, losing the alias's
    place in the file; :class:`_LineLoader` puts one of these in its stead, for the line walk only.
    """

    def __init__(self, target: yaml.Node, mark: Any) -> None:
        super().__init__(target.tag, target, mark, mark)


class _LineLoader(yaml.SafeLoader):
    """A safe loader whose composed tree keeps each alias as an :class:`_Alias`."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            return _Alias(super().compose_node(parent, index), mark)
        return super().compose_node(parent, index)


def _walk_lines(node: yaml.Node | None, file: str) -> _Lines:
    """Map each value's path to its line; a key given twice is an error (in ``file``).

    Aliases (``*name``) are not expanded: each node is walked once, and a path reached through an
    alias takes the alias's line. The walk also refuses, as a config error naming ``file``, what
    would make the parsed document unusable: an anchor that contains its own alias (a cycle), and
    one that expands past :data:`MAX_VALUES` values (a "billion laughs": 1 KB that expands to
    gigabytes, which everything after the parser would expand).
    """
    lines: _Lines = {}
    sizes: dict[int, int] = {}  # id(node) -> how many values it expands to, once walked
    aliases = 0  # how many aliases the walk met: a document without any is just large
    open_nodes: set[int] = set()  # the nodes being walked: meeting one again is a cycle

    def refuse(path: tuple[Any, ...], message: str, line: int) -> ConfigError:
        problem = ConfigProblem(format_loc(path), message, file=file, line=line)
        return ConfigError([problem], title="Invalid config")

    def walk(n: yaml.Node, path: tuple[Any, ...]) -> int:
        nonlocal aliases
        lines.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, _Alias):
            aliases += 1
            alias_line, n = n.start_mark.line + 1, n.value
            if id(n) in open_nodes:
                raise refuse(
                    path,
                    f"refers to itself: the alias on line {alias_line} is inside its own anchor "
                    f"(line {n.start_mark.line + 1}); a config cannot contain itself",
                    alias_line,
                )
        if id(n) in sizes:
            return sizes[id(n)]
        open_nodes.add(id(n))
        size = 1
        if isinstance(n, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for k, v in n.value:
                if not isinstance(k, yaml.ScalarNode):
                    continue  # a complex key: pydantic will reject it anyway
                key_line = k.start_mark.line + 1
                if k.value in seen:
                    raise refuse(
                        (*path, k.value), f"given twice (also on line {seen[k.value]}); keep one", key_line
                    )
                seen[k.value] = key_line
                key_path = (*path, k.value)
                lines[key_path] = key_line
                size += walk(v, key_path)  # keeps the key's line for key_path, not the value's
                if size > MAX_VALUES:
                    break
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                size += walk(item, (*path, i))
                if size > MAX_VALUES:
                    break
        if size > MAX_VALUES:
            raise refuse(
                path,
                (
                    f"expands to more than {MAX_VALUES:,} values once its aliases (*name) are "
                    "expanded; a config is far smaller (is it a 'billion laughs' document?)"
                )
                if aliases
                else f"holds more than {MAX_VALUES:,} values; a config holds hundreds (the right file?)",
                lines[path],
            )
        open_nodes.discard(id(n))
        sizes[id(n)] = size
        return size

    if node is not None:
        walk(node, ())
    return lines


def _yaml_with_lines(text: str, file: str) -> tuple[Any, _Lines]:
    """Parse YAML, and map each value's path (as in pydantic locations) to its 1-based line.

    The walk comes first: it refuses what must not be built (see :func:`_walk_lines`)."""
    lines = _walk_lines(yaml.compose(text, Loader=_LineLoader), file)
    # libyaml's loader where PyYAML has it: the same document, built several times faster
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)), lines


def _json_lines(text: str, file: str) -> _Lines:
    """Lines of a JSON document's values (JSON is YAML, near enough); empty if that fails."""
    try:
        return _walk_lines(yaml.compose(text, Loader=_LineLoader), file)
    except yaml.YAMLError:
        return {}


def _line_for(field: str, lines: _Lines) -> int | None:
    """The line of ``field`` (``models[1].base_model``), or of its nearest enclosing value."""
    parts: list[Any] = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field):
        parts.append(int(index) if index else name)
    while parts:
        if tuple(parts) in lines:
            return lines[tuple(parts)]
        parts.pop()
    return None
