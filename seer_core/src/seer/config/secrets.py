"""Secrets are passed by name: their values come from the local environment or a ``.env`` file,
and seer never prints, logs or writes them anywhere the agent can read.

Errors about secrets name the secret and where it was looked for, never a value.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from seer.errors import ConfigProblem, MissingSecretError


def _unquote(value: str) -> str:
    """A ``.env`` value without its quotes, or (unquoted) without a trailing `` # comment``."""
    if value[:1] in ("'", '"'):
        quote = value[0]
        end = value.find(quote, 1)
        if end != -1:  # a closing quote: drop it and anything after (a comment)
            inner = value[1:end]
            if quote == '"':
                inner = inner.replace("\\n", "\n").replace('\\"', '"')
            return inner
    if " #" in value:
        value = value.split(" #", 1)[0]
    return value.rstrip()


def read_dotenv(path: str | os.PathLike[str]) -> dict[str, str]:
    """Parse a ``.env`` file: ``NAME=value`` lines, ``export`` prefix, quotes, ``#`` comments.

    A missing file reads as empty; lines that are not assignments are skipped.
    """
    values: dict[str, str] = {}
    p = Path(path)
    if not p.is_file():
        return values
    for raw in p.read_text(errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if line.startswith("export ") or line.startswith("export\t"):
            line = line[len("export") :].lstrip()
        name, _, value = line.partition("=")
        name = name.strip()
        if not name:
            continue
        values[name] = _unquote(value.strip())
    return values


def resolve_secrets(
    names: Sequence[str], *, dotenv: str | os.PathLike[str] | None = ".env"
) -> dict[str, str]:
    """The values of ``names``: the environment wins over the ``.env`` file.

    Raises :class:`MissingSecretError` naming every secret that is set nowhere (by name, with
    the field ``secrets[i]``; no value is ever part of the message).
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
        env_file = Path(dotenv).absolute() if dotenv else None
        where = f"the environment or {env_file}" if env_file else "the environment"
        raise MissingSecretError(
            [
                ConfigProblem(
                    f"secrets[{i}]",
                    f"secret {n!r} is not set in {where}; export {n}=..."
                    + (f" or add a {n}=... line to {env_file.name}" if env_file else ""),
                )
                for i, n in missing
            ],
            title="Missing secrets",
        )
    return out
