"""Where seer keeps what must outlive a client process: sandbox records, envs, snapshots.

The root is ``$SEER_HOME``, else ``$XDG_STATE_HOME/seer``, else ``~/.local/state/seer``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def seer_home() -> Path:
    """The state directory (created on first use)."""
    raw = os.environ.get("SEER_HOME")
    if raw:
        home = Path(raw).expanduser()
    else:
        xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        home = Path(xdg) / "seer"
    home.mkdir(parents=True, exist_ok=True)
    return home


def write_json(path: Path, data: Any, *, mode: int = 0o644) -> None:
    """Write JSON atomically (temp file + rename), so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any:
    """Read a JSON file written by :func:`write_json`."""
    with open(path) as fh:
        return json.load(fh)
