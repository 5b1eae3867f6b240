"""Copy a code-server install prepared on the client into a machine's tools folder, once.

``provider_options.code_server_from`` names a tools folder on the client holding a complete
install (``scripts/code-server`` or ``python -m seer.providers.code_server <folder>`` makes one).
A provider reached over a byte stream (seer-ssh's channels, and those built on it) sends it
with :func:`upload`:

1. :data:`RECEIVER` runs on the machine, ``python -c RECEIVER TOOLS_DIR``: it takes the
   installer's own lock (:func:`seer.providers.code_server.layout`), so an upload and an install,
   or two uploads by sandboxes starting side by side, never run at once, and answers
   ``{"need": false}`` where the install is complete already (nothing is sent) or
   ``{"need": true}``;
2. the client then streams the install as a gzip'd tar (level 1: about a third of its ~840 MB,
   for little CPU), without what only its install used (the npm shim names the client's path);
3. the receiver unpacks it into ``code-server-<version>.part`` (paths and links checked to stay
   inside it), runs its Node once (``node --version``: an install built for another platform is
   refused, naming why, and removed), adds a line to ``installs.log`` (the count tests read),
   moves it into place and writes ``.complete`` last: a half-copied install is never used, and
   the next upload or install redoes it.

Only the receiver's source goes to the machine; it is standard library only (the machine's
Python may have nothing of seer's yet) and carries the installer's source, so both agree on the
layout.
"""

from __future__ import annotations

import json
import platform
import re
import tarfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from seer.errors import SandboxError
from seer.providers import code_server as installer
from seer.providers.offline import index_unreachable

__all__ = [
    "PROBE",
    "RECEIVER",
    "SKIPPED",
    "machine_problem",
    "platform_problem",
    "prepared_parts",
    "prepared_platform",
    "prepared_problem",
    "probe_args",
    "receiver_args",
    "upload",
]

#: What of a prepared install stays on the client: only its install used them (the npm shim names
#: the client's path), and the receiver writes ``.complete`` itself, last.
SKIPPED = frozenset({"shim", ".complete", ".npm-cache"})

#: The program run on the machine (``python -c RECEIVER TOOLS_DIR``); see the module's docstring.
_RECEIVE = r'''
import fcntl, json, os, posixpath, shutil, subprocess, sys, tarfile, time

tools_dir = sys.argv[1]
where = _installer.layout(tools_dir)
root = where["root"]


def say(answer):
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


def safe(member):
    """Whether a member stays inside the install (no absolute path, no '..', no device)."""
    name = posixpath.normpath(member.name)
    if name.startswith(("/", "..")) or "\\" in member.name:
        return False
    if member.issym():
        target = posixpath.normpath(posixpath.join(posixpath.dirname(name), member.linkname))
        return not member.linkname.startswith("/") and not target.startswith("..")
    if member.islnk():  # a file stored twice (npm links a few): its first copy's name
        return not posixpath.normpath(member.linkname).startswith(("/", ".."))
    return member.isfile() or member.isdir()


def receive(part):
    extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|gz") as tar:
        for member in tar:
            if not safe(member):
                raise SystemExit(f"refused {member.name!r} in the upload: it would leave the install")
            member.mode &= 0o755
            member.uid = member.gid = os.getuid()
            tar.extract(member, part, **extra)


if os.path.exists(where["complete"]):
    say({"need": False})
    raise SystemExit(0)
os.makedirs(tools_dir, exist_ok=True)
with open(where["lock"], "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if os.path.exists(where["complete"]):  # another sandbox copied (or installed) it meanwhile
        say({"need": False})
        raise SystemExit(0)
    part = root + ".part"
    shutil.rmtree(part, ignore_errors=True)
    say({"need": True})
    try:
        receive(part)
        node = os.path.join(part, os.path.relpath(where["node"], root))
        entry = os.path.join(part, os.path.relpath(where["entry"], root))
        if not (os.path.isfile(node) and os.path.isfile(entry)):
            raise SystemExit("the upload holds no code-server install (its node or entry.js is missing)")
        ran = subprocess.run([node, "--version"], capture_output=True, text=True)
        if ran.returncode != 0:
            raise SystemExit(
                "the prepared install's Node does not run on this machine (prepare it on one of the "
                "same architecture and a glibc no newer than this one's): "
                + (ran.stderr.strip() or ran.stdout.strip() or f"exit {ran.returncode}")[-800:]
            )
        with open(os.path.join(part, "installs.log"), "a") as fh:
            fh.write(f"{time.time():.0f} uploaded code-server {_installer.VERSION}\n")
        shutil.rmtree(root, ignore_errors=True)  # an install that died half-way (never a complete one)
        os.rename(part, root)
        with open(where["complete"], "w") as fh:
            fh.write(_installer.VERSION + "\n")
    except BaseException:
        shutil.rmtree(part, ignore_errors=True)
        raise
    say({"need": True, "done": True, "node": ran.stdout.strip(), "root": root})
'''

#: What a machine says about code-server before anything is made there
#: (``python -c PROBE TOOLS_DIR``): one JSON line, read by :func:`machine_problem`.
_PROBE = r"""
import json, os, platform, sys
print(json.dumps({
    "installed": _installer.installed(sys.argv[1]),
    "machine": platform.machine(),
    "libc": list(platform.libc_ver()),
    "build_problem": _installer.build_problem(),
    "env": {k: v for k, v in os.environ.items() if k.startswith(("SEER_", "PIP_", "UV_"))},
}))
"""

#: The installer's source loaded as a module (its ``__main__`` guard does not run), so the
#: programs below share its layout.
_WITH_INSTALLER = (
    "import types as _types\n"
    "_installer = _types.ModuleType('seer_code_server')\n"
    f"exec(compile({Path(installer.__file__).read_text()!r}, 'code_server.py', 'exec'),"
    " _installer.__dict__)\n"
)
#: The receiver (see the module's docstring).
RECEIVER = _WITH_INSTALLER + _RECEIVE
#: The probe (see :func:`machine_problem`).
PROBE = _WITH_INSTALLER + _PROBE


def receiver_args(tools_dir: str) -> list[str]:
    """The arguments after ``python`` that run the receiver for ``tools_dir`` on the machine."""
    return ["-c", RECEIVER, tools_dir]


def probe_args(tools_dir: str) -> list[str]:
    """The arguments after ``python`` that run the probe for ``tools_dir`` on the machine."""
    return ["-c", PROBE, tools_dir]


def machine_problem(
    probe: dict[str, Any], *, tools_dir: str, where: str, prepared: str | None, env: Mapping[str, str]
) -> tuple[str, str] | None:
    """What keeps ``debug=True`` from working on the machine ``where`` (``(field, why)``), from
    its :data:`PROBE` answer: nothing where code-server is installed there already; else with
    ``prepared`` (``code_server_from``), an install that cannot run there; without, no install
    possible (no package index by ``env``, the machine's and the config's, or no compilers).
    None: it can be served."""
    if probe.get("installed"):  # nothing is installed or copied: whatever is there serves
        return None
    if prepared is not None:
        lib, version = (probe.get("libc") or ["", ""])[:2]
        why = platform_problem(prepared, str(probe.get("machine")), (str(lib), str(version)))
        return ("provider_options.code_server_from", f"it cannot run on {where}: {why}") if why else None
    hint = (
        "; or name an install prepared on this machine: provider_options code_server_from="
        "'~/.cache/seer/tools' (scripts/code-server makes it), copied there once"
    )
    missing = f"code-server {installer.VERSION} is not installed in {tools_dir} on {where}"
    offline = index_unreachable({**probe.get("env", {}), **env})
    if offline:
        return ("debug", f"{missing} and no package index can be reached there ({offline}){hint}")
    if probe.get("build_problem"):
        return ("debug", f"{missing}, and {probe['build_problem']} there: install them{hint}")
    return None


def prepared_problem(path: str) -> str | None:
    """Why ``path`` (a tools folder on the client, ``~`` allowed) cannot be copied, or None
    (the installer's own check, :func:`seer.providers.code_server.prepared_install`)."""
    try:
        installer.prepared_install(path)
    except ValueError as exc:
        return str(exc)
    return None


def prepared_parts(root: Path) -> Iterator[Path]:
    """The folders, files and links of a prepared install that are copied, sorted: the
    installer's :func:`~seer.providers.code_server.prepared_parts` without ``.complete``, which
    the receiver writes itself, last."""
    for path in installer.prepared_parts(root):
        if path.relative_to(root).as_posix() not in SKIPPED:
            yield path


def prepared_platform(tools_dir: str) -> dict[str, str]:
    """What a machine needs to run the install in ``tools_dir``: its ``machine`` (the
    architecture, from the Node wheel's tag) and ``glibc``, the client's (the native modules
    were built against it, as the install is made on the client)."""
    root = Path(installer.layout(tools_dir)["root"])
    arch = platform.machine()
    for wheel in (root / "node").glob("*.dist-info/WHEEL"):
        tags = re.findall(
            r"^Tag: \S+?-\S+?-\S*?_(x86_64|aarch64|armv7l|ppc64le|s390x)$", wheel.read_text(), re.M
        )
        if tags:
            arch = tags[0]
    lib, version = platform.libc_ver()
    return {"machine": arch, "glibc": version if lib == "glibc" else ""}


def platform_problem(tools_dir: str, machine: str, libc: tuple[str, str]) -> str | None:
    """Why the install in ``tools_dir`` cannot run on a machine of architecture ``machine`` with
    C library ``libc`` (``platform.libc_ver()`` there), or None."""
    need = prepared_platform(tools_dir)
    if machine != need["machine"]:
        return f"the install in {tools_dir} is built for {need['machine']}, the machine is {machine}"
    if need["glibc"]:
        if libc[0] != "glibc":
            return f"the install in {tools_dir} needs glibc, the machine has {libc[0] or 'another C library'}"
        if _version(libc[1]) < _version(need["glibc"]):
            return (
                f"the install in {tools_dir} was built against glibc {need['glibc']}, the machine "
                f"has {libc[1]}: prepare it on a machine with a glibc no newer than that"
            )
    return None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


class _GzipWriter:
    """A file-like ``write`` that gzips (level 1) into ``send``."""

    def __init__(self, send: Callable[[bytes], Any]):
        self.send = send
        self.compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
        self.sent = 0

    def write(self, data: bytes) -> int:
        out = self.compressor.compress(data)
        if out:
            self.send(out)
            self.sent += len(out)
        return len(data)

    def finish(self) -> None:
        out = self.compressor.flush()
        self.send(out)
        self.sent += len(out)


def write_install(tools_dir: str, send: Callable[[bytes], Any]) -> int:
    """Stream the install in ``tools_dir`` to ``send`` as a gzip'd tar, links kept as links;
    the bytes sent."""
    root = Path(installer.layout(tools_dir)["root"])
    out = _GzipWriter(send)
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT, bufsize=1 << 20) as tar:  # type: ignore[call-overload]
        for path in prepared_parts(root):
            tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
    out.finish()
    return out.sent


def upload(
    tools_dir: str,
    *,
    send: Callable[[bytes], Any],
    close: Callable[[], Any],
    readline: Callable[[], bytes],
    where: str,
    why: Callable[[], str] = lambda: "",
    sending: Callable[[], Any] = lambda: None,
) -> dict[str, Any]:
    """Copy the install in ``tools_dir`` (on the client) to the :data:`RECEIVER` at the other end
    of ``send`` (its stdin; ``close`` ends it) and ``readline`` (its stdout), where it is missing.
    Returns the receiver's last answer (``need``: whether anything was sent; ``sent``: bytes).
    ``where`` names the machine in errors, ``why()`` says what the receiver printed on its error
    stream (once it ended); ``sending()`` is called once the receiver asked for the install,
    before it is sent (a progress line)."""
    first = _answer(readline, where, why)
    if not first.get("need"):
        close()
        return {"need": False, "sent": 0}
    sending()
    try:
        sent = write_install(tools_dir, send)
    except OSError as exc:  # the receiver stopped reading: it refused, saying why
        raise SandboxError(f"copying code-server to {where} failed ({exc}): {why()}") from None
    finally:
        close()
    last = _answer(readline, where, why)
    return {**last, "sent": sent}


def _answer(readline: Callable[[], bytes], where: str, why: Callable[[], str]) -> dict[str, Any]:
    line = readline()
    try:
        answer: dict[str, Any] = json.loads(line)
    except ValueError:
        said = line.decode(errors="replace").strip()
        raise SandboxError(
            f"copying code-server to {where} failed: {why() or said or 'the receiver ended'}"
        ) from None
    return answer
