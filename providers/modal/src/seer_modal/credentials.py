"""Whether this client has Modal credentials, found the way the modal SDK finds them, without
importing it (``Provider.availability`` runs for every ``seer`` command that checks a config).

The SDK takes ``MODAL_TOKEN_ID`` / ``MODAL_TOKEN_SECRET`` from the environment, else the active
profile of ``~/.modal.toml`` (``MODAL_CONFIG_PATH`` moves the file, ``MODAL_PROFILE`` picks a
profile), which ``modal token new`` writes.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["HOW_TO_SET", "credentials_problem"]

HOW_TO_SET = "run `modal token new` (it writes ~/.modal.toml), or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"


def _profile() -> dict[str, Any]:
    path = Path(os.environ.get("MODAL_CONFIG_PATH") or Path.home() / ".modal.toml")
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}
    profiles = {name: p for name, p in data.items() if isinstance(p, dict)}
    name = os.environ.get("MODAL_PROFILE") or next((n for n, p in profiles.items() if p.get("active")), None)
    if name is None and len(profiles) == 1:
        name = next(iter(profiles))
    return profiles.get(name or "default", {})


def credentials_problem() -> str | None:
    """Why the modal SDK would find no credentials here (one sentence saying how to set them),
    or None."""
    env_id, env_secret = os.environ.get("MODAL_TOKEN_ID"), os.environ.get("MODAL_TOKEN_SECRET")
    profile = _profile()
    token_id = env_id or profile.get("token_id")
    token_secret = env_secret or profile.get("token_secret")
    if token_id and token_secret:
        return None
    if env_id and not token_secret:
        return f"MODAL_TOKEN_ID is set but MODAL_TOKEN_SECRET is not: {HOW_TO_SET}"
    if env_secret and not token_id:
        return f"MODAL_TOKEN_SECRET is set but MODAL_TOKEN_ID is not: {HOW_TO_SET}"
    return f"no Modal credentials found: {HOW_TO_SET}"
