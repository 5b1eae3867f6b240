"""Secrets are passed by name: their values come from the local environment or a ``.env`` file,
and seer never prints, logs or writes them anywhere the agent can read."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from seer.errors import ConfigProblem, MissingSecretError


def read_dotenv(path: str | os.PathLike[str]) -> dict[str, str]:
    """Parse a ``.env`` file: ``NAME=value`` lines, ``export`` prefix, quotes, ``#`` comments."""
    values: dict[str, str] = {}
    p = Path(path)
    if not p.is_file():
        return values
    for raw in p.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[name.strip()] = value
    return values


def resolve_secrets(
    names: Sequence[str], *, dotenv: str | os.PathLike[str] | None = ".env"
) -> dict[str, str]:
    """The values of ``names``: the environment wins over the ``.env`` file.

    Raises :class:`MissingSecretError` naming every secret that is set nowhere.
    """
    if not names:
        return {}
    file_values = read_dotenv(dotenv) if dotenv else {}
    out: dict[str, str] = {}
    missing = []
    for i, name in enumerate(names):
        value = os.environ.get(name, file_values.get(name))
        if value is None:
            missing.append((i, name))
        else:
            out[name] = value
    if missing:
        where = f"the environment or {dotenv}" if dotenv else "the environment"
        raise MissingSecretError(
            [ConfigProblem(f"secrets[{i}]", f"secret {n!r} is not set in {where}") for i, n in missing],
            title="Missing secrets",
        )
    return out
