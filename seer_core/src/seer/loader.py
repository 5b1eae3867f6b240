"""Reading config files: :func:`load_config` (YAML or JSON), errors with file and line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from seer.config import ExperimentConfig
from seer.errors import ConfigError, ConfigProblem


def load_config(path: str | os.PathLike[str]) -> ExperimentConfig:
    """Read an experiment config (YAML or JSON: the ``SandboxConfig`` fields plus ``name``).

    Relative local paths in the file (``local_files``, ``local_dirs``, local repos and models)
    are taken from the file's directory. Errors name the file, line and field.
    """
    file = Path(path)
    if not file.is_file():
        raise ConfigError([ConfigProblem("", "config file not found", file=str(file))])
    text = file.read_text()
    try:
        if file.suffix == ".json":
            data = json.loads(text)
            lines: dict[tuple[Any, ...], int] = {}
        else:
            data, lines = _yaml_with_lines(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        line = line + 1 if line is not None else getattr(exc, "lineno", None)
        raise ConfigError(
            [
                ConfigProblem(
                    "",
                    f"not valid {file.suffix.lstrip('.') or 'YAML'}: {getattr(exc, 'problem', None) or exc}",
                    file=str(file),
                    line=line,
                )
            ]
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            [ConfigProblem("", "the top level must be a mapping of fields", file=str(file), line=1)]
        )
    data = _rebase_paths(data, file.parent)
    try:
        return ExperimentConfig.model_validate(data)
    except ConfigError as exc:
        problems = [
            ConfigProblem(p.field, p.message, file=str(file), line=_line_for(p.field, lines))
            for p in exc.problems
        ]
        raise ConfigError(problems, title=f"Invalid config {file}") from None


def _rebase_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    def rebase(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(("./", "../")):
            return str((base / value).resolve())
        return value

    data = dict(data)
    for key in ("local_files", "local_dirs"):
        if isinstance(data.get(key), list):
            data[key] = [
                [rebase(item[0]), *item[1:]]
                if isinstance(item, list | tuple) and item
                else {**item, "local": rebase(item.get("local"))}
                if isinstance(item, dict)
                else item
                for item in data[key]
            ]
    for key, field in (("repos", "url"), ("models", "name")):
        if isinstance(data.get(key), list):
            data[key] = [
                {**item, field: rebase(item.get(field))} if isinstance(item, dict) else rebase(item)
                for item in data[key]
            ]
    return data


def _yaml_with_lines(text: str) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """Parse YAML, and map each value's path (as in pydantic locations) to its 1-based line."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    lines: dict[tuple[Any, ...], int] = {}

    def walk(n: yaml.Node, path: tuple[Any, ...]) -> None:
        lines[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                key_path = (*path, k.value)
                walk(v, key_path)
                lines[key_path] = k.start_mark.line + 1
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, (*path, i))

    if node is not None:
        walk(node, ())
    return yaml.safe_load(text), lines


def _line_for(field: str, lines: dict[tuple[Any, ...], int]) -> int | None:
    import re

    parts: list[Any] = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field):
        parts.append(int(index) if index else name)
    while parts:
        if tuple(parts) in lines:
            return lines[tuple(parts)]
        parts.pop()
    return None
