"""seer's runtime as a wheel, for providers that install it into a machine of their own.

The sandbox runs ``seer.runtime`` from the same seer-core as the client. A provider whose machine
is not this one (a container, a remote box) installs it there from :func:`runtime_wheel`: a wheel
built from the ``seer`` package this process imported, so an editable checkout with uncommitted
changes reaches the sandbox exactly as the client sees it. No build backend is involved: the wheel
is the package's files plus the installed distribution's own metadata, zipped deterministically,
so the same source always gives the same bytes (and an image layer built from it stays cached).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import zipfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from seer.state import seer_home

__all__ = ["RUNTIME_DEPENDENCIES", "RuntimeWheel", "runtime_requirements", "runtime_wheel"]

DIST = "seer-core"
#: Every entry gets this timestamp, so the bytes depend on the contents only.
_EPOCH = (1980, 1, 1, 0, 0, 0)
_WHEEL_META = "Wheel-Version: 1.0\nGenerator: seer\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


class RuntimeWheel:
    """A built wheel: where it is, its file name and the sha256 of its bytes."""

    def __init__(self, path: Path, sha256: str):
        self.path = path
        self.sha256 = sha256

    @property
    def filename(self) -> str:
        return self.path.name

    def __repr__(self) -> str:
        return f"<RuntimeWheel {self.filename} sha256={self.sha256[:12]}>"


def _package_files(package_dir: Path) -> list[tuple[str, Path]]:
    """``(archive name, path)`` for every file of the package, compiled files left out, in the
    order of their paths."""
    return [(name, Path(path)) for name, path in _package_paths(package_dir)]


def _package_paths(package_dir: Path) -> list[tuple[str, str]]:
    """:func:`_package_files` with the paths as strings: a walk that skips ``__pycache__`` folders
    rather than listing them, and makes no ``Path`` per file (every start computes
    :func:`_fingerprint` from this: ~1 ms, where ``rglob`` took ~8 ms)."""
    found: list[tuple[tuple[str, ...], str]] = []

    def walk(folder: str, parts: tuple[str, ...]) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir():
                    if entry.name != "__pycache__":
                        walk(entry.path, (*parts, entry.name))
                elif not entry.name.endswith((".pyc", ".pyo")):
                    found.append(((*parts, entry.name), entry.path))

    walk(str(package_dir), ())
    found.sort()
    return [("seer/" + "/".join(parts), path) for parts, path in found]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _build(version: str) -> bytes:
    import seer

    dist = metadata.distribution(DIST)
    package_dir = Path(seer.__file__).resolve().parent
    info = f"seer_core-{version}.dist-info"
    entries: list[tuple[str, bytes]] = [
        (name, path.read_bytes()) for name, path in _package_files(package_dir)
    ]
    meta_text = dist.read_text("METADATA")
    if not meta_text:
        raise RuntimeError(f"the installed {DIST} distribution has no METADATA")
    entries.append((f"{info}/METADATA", meta_text.encode()))
    entries.append((f"{info}/WHEEL", _WHEEL_META.encode()))
    entry_points = dist.read_text("entry_points.txt")
    if entry_points:
        entries.append((f"{info}/entry_points.txt", entry_points.encode()))
    record = [_record_line(name, data) for name, data in entries]
    record.append(f"{info}/RECORD,,")
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            item = zipfile.ZipInfo(name, date_time=_EPOCH)
            item.external_attr = 0o644 << 16
            item.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(item, data)
    return buf.getvalue()


def _fingerprint(version: str) -> str:
    """What the wheel is made of, by name, size and modification time (a stat per file, not a
    read): the same fingerprint means the same bytes, so a start need not zip the package again."""
    import seer

    package_dir = Path(seer.__file__).resolve().parent
    parts = [version, str(package_dir)]
    for name, path in _package_paths(package_dir):
        st = os.stat(path)
        parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    dist = metadata.distribution(DIST)
    parts.append(dist.read_text("METADATA") or "")
    parts.append(dist.read_text("entry_points.txt") or "")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def runtime_wheel(cache_dir: Path | None = None) -> RuntimeWheel:
    """The wheel of the running seer-core, built once per distinct content into ``cache_dir``
    (default ``$SEER_HOME/wheels``).

    A start finds the wheel of unchanged source by its :func:`_fingerprint` (a file
    ``by-source/<fingerprint>`` names the wheel's sha256) instead of zipping the package each
    time (about 150 ms); the wheel it names is checked against that sha256 before it is used.
    """
    version = metadata.version(DIST)
    root = cache_dir or seer_home() / "wheels"
    name = f"seer_core-{version}-py3-none-any.whl"
    index = root / "by-source" / _fingerprint(version)[:32]
    try:
        sha = index.read_text().strip()
        path = root / sha[:16] / name
        if hashlib.sha256(path.read_bytes()).hexdigest() == sha:
            return RuntimeWheel(path, sha)
    except OSError:
        pass
    data = _build(version)
    sha = hashlib.sha256(data).hexdigest()
    folder = root / sha[:16]
    path = folder / name
    if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != sha:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    index.parent.mkdir(parents=True, exist_ok=True)
    tmp_index = index.with_suffix(f".{os.getpid()}.tmp")
    tmp_index.write_text(sha)
    tmp_index.replace(index)
    return RuntimeWheel(path, sha)


#: The distributions :mod:`seer.runtime` imports (the RPC server's wire format). Everything else
#: core depends on (pydantic, pluggy, typer, rich, pyyaml, filelock, packaging) is client side:
#: ``seer/__init__`` is lazy, so the runtime never loads it. What a sandbox needs beyond this comes
#: with its execution mode (``required_packages``) or its models (huggingface_hub).
RUNTIME_DEPENDENCIES = frozenset({"msgpack"})


@lru_cache(maxsize=1)
def runtime_requirements() -> tuple[str, ...]:
    """The requirements of seer-core that :mod:`seer.runtime` needs, as seer-core declares them
    (no extras): what the runtime needs installed next to the wheel. A provider installs these in
    a layer of their own, so a change to seer's source reinstalls only the wheel.
    seer_core/tests/test_lazy_import.py checks that the RPC server process loads nothing else."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    out = []
    for raw in metadata.requires(DIST) or []:
        req = Requirement(raw)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if canonicalize_name(req.name) in RUNTIME_DEPENDENCIES:
            out.append(str(req))
    return tuple(out)
