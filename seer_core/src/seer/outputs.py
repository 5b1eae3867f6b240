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
and extends (a live mirror written after the sandbox last saved, or after it saved a cell while
the cell ran: the client copy holds that cell with its output so far and more); a notebook whose cells the
sandbox's copy only extends is brought up to date, and anything else is written beside it as
``<stem>.sandbox<suffix>`` (then ``.sandbox-2``, ...), and the summary says so.

Every writer of a client copy (a session's live mirror after each cell, teardown's copy) takes the
client folder's lock (``.seer-copies``, which also records the live document's state each copy was
written at): a writer whose replica of the live document is behind the copy already there never
replaces it (:func:`write_client_copy`), and teardown's check of a file and its copy are one step.

The copy is core code over two machine primitives (``exec`` to see what is there, ``get_dir`` to
fetch it), written once for every provider; the local provider also calls :func:`keep_tree` on its
own disk when a sandbox expires with no client.
"""

from __future__ import annotations

import contextlib
import enum
import filecmp
import json
import os
import posixpath
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seer.state import lock_file, read_json, records_dir, remove_lock_file, seer_home

if TYPE_CHECKING:
    from seer.providers.base import Machine

__all__ = [
    "COPIES_RECORD",
    "KEPT_DIRS",
    "CopyWrite",
    "Kept",
    "client_outputs_dir",
    "copy_out",
    "forget_copies",
    "forget_ended_copies",
    "forget_ended_copy",
    "keep_tree",
    "recorded_outputs_dir",
    "state_covers",
    "state_vector",
    "write_client_copy",
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


#: The metadata key of a cell saved while it ran (``seer.notebook``'s running mark).
_RUNNING = "seer_running"


def _output_grew(early: Any, late: Any) -> bool:
    """Whether output ``late`` is ``early`` or ``early`` grown (a stream that printed more)."""
    if early == late:
        return True
    if not (isinstance(early, dict) and isinstance(late, dict)):
        return False
    if early.get("output_type") != "stream" or late.get("output_type") != "stream":
        return False
    text_early, text_late = early.get("text"), late.get("text")
    return (
        early.get("name") == late.get("name")
        and isinstance(text_early, str)
        and isinstance(text_late, str)
        and text_late.startswith(text_early)
    )


def _cell_holds(late: Any, early: Any) -> bool:
    """Whether cell ``late`` holds all of ``early``: the same cell, or ``early`` saved while it
    ran (marked running) and ``late`` the same cell with those outputs and possibly more."""
    if late == early:
        return True
    if not (isinstance(late, dict) and isinstance(early, dict)):
        return False
    if _RUNNING not in (early.get("metadata") or {}):
        return False
    if any(late.get(k) != early.get(k) for k in ("id", "cell_type", "source")):
        return False
    outs_early, outs_late = early.get("outputs") or [], late.get("outputs") or []
    if not (isinstance(outs_early, list) and isinstance(outs_late, list)) or len(outs_late) < len(outs_early):
        return False
    return all(_output_grew(e, lt) for e, lt in zip(outs_early, outs_late, strict=False))


def _holds_every_cell(new: Path, old: Path) -> bool:
    """(Notebooks.) Whether ``new`` holds every cell of ``old``, in the same order, each as it is
    there or grown since (``old`` saved mid-cell): ``old`` adds nothing ``new`` lacks."""
    if new.suffix != ".ipynb":
        return False
    new_cells, old_cells = _notebook_cells(new), _notebook_cells(old)
    if new_cells is None or old_cells is None:
        return False
    at = 0
    for cell in old_cells:
        while at < len(new_cells) and not _cell_holds(new_cells[at], cell):
            at += 1
        if at == len(new_cells):
            return False
        at += 1
    return True


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


def _merge(src: Path, dest: Path, kept: Kept, written: dict[str, Any]) -> None:
    """Copy the regular files under ``src`` into ``dest`` by the rules above (under the client
    folder's lock: ``written`` is its record, whose entry for a notebook copied here goes)."""
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if _SKIPPED & set(rel.parts) or path.name.startswith(_TEMPORARY):
            continue
        if path.is_symlink() or not path.is_file():
            continue
        path = _whole(path)
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_file() and (
            _same(path, target) or _supersedes(target, path) or _holds_every_cell(target, path)
        ):
            # the same, or a client copy already holding every cell of the sandbox's and more (a
            # live mirror written after the sandbox's last save, or after it saved a cell still
            # running): nothing to add
            kept.unchanged.append(target)
        elif not target.exists() or (target.is_file() and _supersedes(path, target)):
            _copy(path, target)
            kept.written.append(target)
            written.pop(str(target.relative_to(kept.dest)), None)  # no live document's state now
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
    """Copy a file (times kept) through a temporary file renamed over ``target``, so a reader
    never sees half of it; a notebook is made private to the user (0600), as the live mirror and
    seer's records are, whatever its mode in the sandbox."""
    tmp = _temporary(target)
    try:
        shutil.copy2(source, tmp)
        if target.suffix == ".ipynb":
            tmp.chmod(0o600)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _temporary(target: Path) -> Path:
    """A name beside ``target`` for a file renamed over it once written: this writer's own."""
    return target.with_name(f".{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")


# --- the client folder's lock and the live document's states ----------------------------------

#: In a client folder: the lock its writers take, holding the state of the live document each
#: notebook there was last written from (``{"name.ipynb": {"<client id>": clock, ...}}``).
COPIES_RECORD = ".seer-copies"


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("a state vector cut short")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def state_vector(encoded: bytes) -> dict[str, int]:
    """A live document's state vector as its replica encodes it (``pycrdt.Doc.get_state()``,
    Yjs's encoding: a count, then each writer's client id and clock as variable-length integers)
    as ``{client id: clock}``: which updates of each writer it holds."""
    count, at = _varint(encoded, 0)
    out: dict[str, int] = {}
    for _ in range(count):
        client, at = _varint(encoded, at)
        clock, at = _varint(encoded, at)
        out[str(client)] = clock
    return out


def state_covers(state: dict[str, int], other: dict[str, int]) -> bool:
    """Whether a replica at ``state`` holds every update one at ``other`` holds."""
    return all(state.get(client, 0) >= clock for client, clock in other.items())


@contextlib.contextmanager
def _copies_lock(folder: Path) -> Iterator[dict[str, Any]]:
    """Hold ``folder``'s lock (:data:`COPIES_RECORD`, ``flock``: released if the holder dies);
    yields its record, written back if changed."""
    try:
        fd = lock_file(folder / COPIES_RECORD)
    except FileNotFoundError:  # (made here at the first write: not looked for at every one)
        folder.mkdir(parents=True, exist_ok=True)
        fd = lock_file(folder / COPIES_RECORD)
    assert fd is not None  # (it waits)
    try:
        raw = b""
        while chunk := os.read(fd, 65536):
            raw += chunk
        try:
            record = json.loads(raw) if raw else {}
        except ValueError:
            record = {}
        if not isinstance(record, dict):
            record = {}
        before = json.dumps(record, sort_keys=True)
        yield record
        after = json.dumps(record, sort_keys=True)
        if after != before:
            # Written over, then cut to its length: truncating a file to zero first costs a
            # flush of it on close on ext4 (its auto_da_alloc), 0.4-4 ms on every cell.
            data = after.encode()
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
    finally:
        os.close(fd)  # releases the lock


def forget_copies(folder: Path) -> bool:
    """Remove ``folder``'s :data:`COPIES_RECORD` once its sandbox has ended (no live document is
    left to write a copy from), unless a writer holds it now; whether it is gone."""
    return remove_lock_file(folder / COPIES_RECORD)


def forget_ended_copy(record: dict[str, Any]) -> None:
    """:func:`forget_copies` for the client folder of the sandbox whose client record this is,
    which has ended (:func:`seer.state.prune_records` calls it for each such record)."""
    if record.get("outputs_dir"):
        forget_copies(Path(record["outputs_dir"]))


def forget_ended_copies() -> None:
    """:func:`forget_copies` for the client folder of every sandbox whose client record says it
    ended (a sandbox that expired, or ended with no ``terminate`` from this machine)."""
    for path in records_dir().glob("*.json"):
        with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
            record = read_json(path)
            if record.get("ended_at") is not None:
                forget_ended_copy(record)


class CopyWrite(enum.Enum):
    """What :func:`write_client_copy` did."""

    #: the copy now holds the text
    WRITTEN = "written"
    #: the copy already holds everything the text's state does (and more): left as it is
    KEPT = "kept"
    #: the copy and the text each hold updates the other lacks: nothing written
    DIVERGED = "diverged"


def write_client_copy(
    path: Path, text: str, state: bytes | None = None, *, force: bool = False, keep_earlier: bool = True
) -> tuple[CopyWrite, dict[str, int] | None]:
    """Write ``text`` (a notebook rendered from a replica of its live document at ``state``, its
    encoded state vector; None: no live document) as the client copy ``path``, atomically and
    under the folder's lock, never replacing a copy written from a newer state of the document
    (a writer that is behind would otherwise take the newer cells out until its next write).

    Returns what it did and the state the copy was written at before. ``DIVERGED``: the copy
    holds updates ``state`` lacks and the text holds some it lacks; the caller can wait for its
    replica to catch up and render again, or pass ``force``: then the text is written, and the
    copy it replaces is kept beside it (``<name>.earlier.ipynb``, ...) unless ``keep_earlier`` is
    false (the caller found the text holds every cell of it)."""
    new = state_vector(state) if state is not None else None
    with _copies_lock(path.parent) as record:
        held = record.get(path.name)
        held = held if isinstance(held, dict) and path.is_file() else None
        if held is not None and new is not None and not state_covers(new, held):
            if state_covers(held, new):
                return CopyWrite.KEPT, held
            if not force:
                return CopyWrite.DIVERGED, held
            for n in range(1, 1000 if keep_earlier else 1):
                earlier = path.with_name(f"{path.stem}.earlier{'' if n == 1 else f'-{n}'}{path.suffix}")
                if not earlier.exists():
                    os.link(path, earlier)
                    break
        tmp = _temporary(path)
        # 0600, as seer's records: the agent's work may hold what it found or printed
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if new is None:
            record.pop(path.name, None)
        else:
            record[path.name] = new
        return CopyWrite.WRITTEN, held


def keep_tree(root: Path, dest: Path) -> Kept:
    """Copy the kept folders (:data:`KEPT_DIRS`) under ``root`` (a sandbox's working directory on
    this disk, or a fetched copy of it) into the client folder ``dest``. Raises OSError if a
    file cannot be written."""
    kept = Kept(dest)
    sources = [root / folder for folder in KEPT_DIRS if (root / folder).is_dir()]
    if not any(path.is_file() for src in sources for path in src.rglob("*")):
        return kept  # nothing to keep: no client folder made
    # Under the folder's lock: a live writer's copy cannot land between a check and its copy.
    with _copies_lock(dest) as written:
        for folder, where in KEPT_DIRS.items():
            if (root / folder).is_dir():
                _merge(root / folder, dest / where if where else dest, kept, written)
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
