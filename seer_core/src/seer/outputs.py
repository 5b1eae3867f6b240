"""The agent's research record on the client: where a sandbox's notebooks and outputs are kept,
and copying them there before the sandbox's files are deleted.

In the sandbox, notebooks live in ``notebooks/`` and anything else worth keeping (plots, tables,
saved activations) in ``outputs/``, both under its working directory. On the client they go to
one folder per sandbox, fixed when the sandbox starts and stored in its client record, so
``seer down`` from any directory finds the same folder:

* ``$SEER_OUTPUTS_DIR/<sandbox_id>/`` when that is set, else ``./seer-outputs/<sandbox_id>/``
  (absolute, from the directory the sandbox was started in);
* notebooks at ``<folder>/<name>.ipynb``, outputs under ``<folder>/outputs/``.

A copy never silently replaces a different file already there (a live mirror, or one you edited):
an identical file is left alone, and so is a notebook whose cells the client copy already holds
and extends (a live mirror written after the sandbox last saved); a notebook whose cells the
sandbox's copy only extends is brought up to date, and anything else is written beside it as
``<stem>.sandbox<suffix>`` (then ``.sandbox-2``, ...), and the summary says so.

The copy is core code over two machine primitives (``exec`` to see what is there, ``get_dir`` to
fetch it), written once for every provider; the local provider also calls :func:`keep_tree` on its
own disk when a sandbox expires with no client.
"""

from __future__ import annotations

import filecmp
import json
import os
import posixpath
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seer.state import read_json, seer_home

if TYPE_CHECKING:
    from seer.providers.base import Machine

__all__ = [
    "KEPT_DIRS",
    "Kept",
    "client_outputs_dir",
    "copy_out",
    "keep_tree",
    "recorded_outputs_dir",
]

#: The local folder notebooks and outputs are copied to, per sandbox: ``./seer-outputs/<sandbox_id>/``
#: (``$SEER_OUTPUTS_DIR/<sandbox_id>/`` when that is set). Defined here, not in
#: :mod:`seer.execution` (which re-exports it), so that keeping outputs needs no session code.
DEFAULT_OUTPUTS_DIR = "seer-outputs"
#: The sandbox folders (relative to its working directory) kept on the client, and where each
#: goes in the client folder: notebooks at its top, outputs under ``outputs/``.
KEPT_DIRS = {"notebooks": "", "outputs": "outputs"}
#: Folders inside those that are never copied (Jupyter's autosave checkpoints).
_SKIPPED = {".ipynb_checkpoints"}
#: Names of files never copied: Jupyter's (and editors') temporary files of a save, which may
#: vanish at any moment. (Jupyter's server saves a notebook by copying it to ``.~<name>``, writing
#: ``<name>`` in place, then deleting the copy: a notebook caught mid-save is taken from that
#: copy, see :func:`_whole`.)
_TEMPORARY = (".~",)
#: How many times a fetch of a live sandbox's folders is tried before the copy fails: a file
#: renamed or removed while a provider archives the folder can fail one try, not the next.
_FETCH_TRIES = 4


def client_outputs_dir(sandbox_id: str) -> Path:
    """The default client folder of ``sandbox_id``'s record, absolute, resolved now:
    ``$SEER_OUTPUTS_DIR/<id>`` when set, else ``./seer-outputs/<id>``."""
    base = Path(os.environ.get("SEER_OUTPUTS_DIR") or DEFAULT_OUTPUTS_DIR).expanduser()
    return base.absolute() / sandbox_id


def recorded_outputs_dir(sandbox_id: str) -> Path | None:
    """The client folder stored in ``sandbox_id``'s client record when it started (None: no
    record, or one from before the folder was stored)."""
    try:
        raw = read_json(seer_home() / "sandboxes" / f"{sandbox_id}.json").get("outputs_dir")
    except (OSError, ValueError, AttributeError):
        return None
    return Path(raw) if raw else None


@dataclass
class Kept:
    """What a copy did: where to, which files it wrote, and which it wrote beside a different file
    already there (the originals untouched)."""

    dest: Path
    written: list[Path] = field(default_factory=list)
    beside: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)

    @property
    def files(self) -> int:
        """How many files the client folder now holds from the sandbox."""
        return len(self.written) + len(self.beside) + len(self.unchanged)

    def summary(self, sandbox_id: str) -> str:
        """One line saying where the sandbox's notebooks and outputs are."""
        line = f"{sandbox_id}: notebooks and outputs ({self.files} files) kept in {self.dest}"
        if self.beside:
            names = ", ".join(p.name for p in self.beside[:3]) + (", ..." if len(self.beside) > 3 else "")
            line += (
                f"; {len(self.beside)} differed from the copy already there and were written beside "
                f"it ({names})"
            )
        return line


def _joined(value: Any) -> Any:
    """nbformat's multiline string: a list of lines and the joined string are the same text."""
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "".join(value)
    return value


def _normal_cell(cell: Any) -> Any:
    """A cell with its multiline strings joined: the Jupyter server saves text as lists of lines,
    seer's client copy as strings, and both are the same notebook."""
    if not isinstance(cell, dict):
        return cell
    out = {**cell, "source": _joined(cell.get("source"))}
    outputs = cell.get("outputs")
    if isinstance(outputs, list):
        out["outputs"] = [
            {
                **o,
                **({"text": _joined(o["text"])} if "text" in o else {}),
                **(
                    {"data": {k: v if k.endswith("json") else _joined(v) for k, v in o["data"].items()}}
                    if isinstance(o.get("data"), dict)
                    else {}
                ),
            }
            if isinstance(o, dict)
            else o
            for o in outputs
        ]
    return out


def _notebook_cells(path: Path) -> list[Any] | None:
    try:
        cells = json.loads(path.read_text()).get("cells")
    except (OSError, ValueError, AttributeError):
        return None
    return [_normal_cell(c) for c in cells] if isinstance(cells, list) else None


def _supersedes(new: Path, old: Path) -> bool:
    """Whether ``new`` holds everything ``old`` does: the same bytes, or (notebooks) the same
    cells and possibly more after them, however the JSON is laid out (multiline strings as one
    string or as a list of lines)."""
    if filecmp.cmp(new, old, shallow=False):
        return True
    if new.suffix != ".ipynb":
        return False
    new_cells, old_cells = _notebook_cells(new), _notebook_cells(old)
    return new_cells is not None and old_cells is not None and new_cells[: len(old_cells)] == old_cells


def _same(new: Path, old: Path) -> bool:
    """Whether ``new`` and ``old`` hold the same: the same bytes, or (notebooks) the same cells
    laid out differently (the copy already there is then left as it is)."""
    if filecmp.cmp(new, old, shallow=False):
        return True
    if new.suffix != ".ipynb":
        return False
    new_cells = _notebook_cells(new)
    return new_cells is not None and new_cells == _notebook_cells(old)


def _beside(target: Path, source: Path) -> Path:
    """A free name next to ``target`` for ``source`` (or the one already holding it)."""
    for n in range(1, 1000):
        tag = ".sandbox" if n == 1 else f".sandbox-{n}"
        candidate = target.with_name(f"{target.stem}{tag}{target.suffix}")
        if not candidate.exists() or filecmp.cmp(source, candidate, shallow=False):
            return candidate
    raise OSError(f"too many copies beside {target}")


def _merge(src: Path, dest: Path, kept: Kept) -> None:
    """Copy the regular files under ``src`` into ``dest`` by the rules above."""
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if _SKIPPED & set(rel.parts) or path.name.startswith(_TEMPORARY):
            continue
        if path.is_symlink() or not path.is_file():
            continue
        path = _whole(path)
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_file() and (_same(path, target) or _supersedes(target, path)):
            # the same, or a client copy already holding every cell of the sandbox's and more (a
            # live mirror written after the sandbox's last save): nothing to add
            kept.unchanged.append(target)
        elif not target.exists() or (target.is_file() and _supersedes(path, target)):
            _copy(path, target)
            kept.written.append(target)
        else:
            other = _beside(target, path)
            if not other.exists():
                _copy(path, other)
            kept.beside.append(other)


def _parses(path: Path) -> bool:
    try:
        json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return True


def _half_written(root: Path) -> bool:
    """Whether a notebook under ``root`` does not parse (caught while Jupyter wrote it)."""
    return any(
        not _parses(p)
        for p in root.rglob("*.ipynb")
        if p.is_file() and not p.name.startswith(_TEMPORARY) and not _SKIPPED & set(p.parts)
    )


def _whole(path: Path) -> Path:
    """``path``, or for a notebook caught half-written by a save, the whole one Jupyter kept
    beside it for that save (``.~<name>``, the notebook as last saved)."""
    if path.suffix != ".ipynb" or _parses(path):
        return path
    backup = path.with_name(f".~{path.name}")
    return backup if backup.is_file() and _parses(backup) else path


def _copy(source: Path, target: Path) -> None:
    """Copy a file (times kept); a notebook is made private to the user (0600), as the live
    mirror and seer's records are, whatever its mode in the sandbox."""
    shutil.copy2(source, target)
    if target.suffix == ".ipynb":
        target.chmod(0o600)


def keep_tree(root: Path, dest: Path) -> Kept:
    """Copy the kept folders (:data:`KEPT_DIRS`) under ``root`` (a sandbox's working directory on
    this disk, or a fetched copy of it) into the client folder ``dest``. Raises OSError if a
    file cannot be written."""
    kept = Kept(dest)
    for folder, where in KEPT_DIRS.items():
        if (root / folder).is_dir():
            _merge(root / folder, dest / where if where else dest, kept)
    return kept


def copy_out(machine: Machine, dest: Path) -> Kept:
    """Fetch the sandbox's notebooks and outputs into ``dest`` on this machine, before the sandbox
    is torn down. The sandbox may still be writing (a notebook being saved): a fetch that fails is
    tried again, up to :data:`_FETCH_TRIES` times, and so is one that caught a notebook
    half-written (the last try takes such a notebook as Jupyter kept it for the save). Raises what
    the machine's primitives raise when it cannot (the caller then keeps the sandbox's files)."""
    remote = {folder: machine.resolve(folder) for folder in KEPT_DIRS}
    present = machine.existing_dirs(list(remote.values()))
    attempt = 0
    while True:
        attempt += 1
        with tempfile.TemporaryDirectory(prefix="seer-keep-") as tmp:
            try:
                for folder, path in remote.items():
                    if path in present:
                        machine.get_dir(path, Path(tmp) / posixpath.basename(folder))
            except Exception:
                if attempt >= _FETCH_TRIES or not machine.status().alive:
                    raise
                time.sleep(0.05 * attempt)
                continue
            if _half_written(Path(tmp)) and attempt < _FETCH_TRIES:
                time.sleep(0.05 * attempt)  # a notebook was being saved: fetch it again
                continue
            return keep_tree(Path(tmp), dest)
