"""``debug=True`` on RunPod: code-server in the pod's shared folder, installed or uploaded once.

Core's ``debug`` step (:mod:`seer.sandbox.code_server`) runs the installer in
:meth:`RunPodMachine.tools_dir <seer_runpod.provider.RunPodMachine.tools_dir>`, ``tools/`` beside
the caches the pod's sandboxes share (on the volume: a network volume's outlives the pod, so every
pod mounting it finds code-server there). Building code-server in a pod needs compilers in its
image (the installer says which are missing); with ``provider_options.code_server_from`` the
client's prepared install is uploaded there instead, by :func:`upload_prepared`, before the
installer runs (which then finds it complete and does nothing).

The upload is one tar stream (gzip level 1: a third of the ~840 MB, cheap to make) over the pod's
SSH connection into a temporary folder beside the install, moved into place and marked complete
only at the end, under the installer's own file lock: concurrent pods on one network volume
upload it once, and none ever sees a half copy. Each upload that ran adds a line to the
install's ``installs.log`` (as each install does), so a second start is counted: it finds the
``.complete`` marker and sends nothing.
"""

from __future__ import annotations

import gzip
import shlex
import tarfile
from collections.abc import Callable
from pathlib import Path

from seer.errors import SandboxError
from seer.providers import code_server as installer
from seer_ssh.connection import Connection

__all__ = ["UPLOAD_TIMEOUT", "upload_prepared"]

#: Seconds the upload may take (840 MB over a slow link); each blocked send is bounded by it.
UPLOAD_TIMEOUT = 1800.0

#: Runs in the pod with the tar stream on stdin: under the installer's lock, unpack into a
#: temporary folder, move it into place, then log and mark it complete (an interrupted upload
#: leaves no ``.complete``: the next start uploads again, removing what it left).
_RECEIVE = r"""set -eu
tools=$1 root=$2 lock=$3 complete=$4 log=$5 version=$6
mkdir -p "$tools"
exec 9>"$lock"
flock 9
if [ -e "$complete" ]; then cat >/dev/null; echo "seer: found"; exit 0; fi
rm -rf "$root" "$tools"/.code-server-upload.*
tmp=$(mktemp -d "$tools/.code-server-upload.XXXXXX")
tar -xzf - -C "$tmp" --no-same-owner
chmod 755 "$tmp"
mv "$tmp" "$root"
echo "$(date +%s) uploaded code-server $version" >> "$log"
echo "$version" > "$complete"
echo "seer: uploaded"
"""


def _kept(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """What goes to the pod: all but the installer's own leftovers
    (:data:`~seer.providers.code_server.PREPARED_SKIP`) and the client's markers (the pod's copy
    writes its own, last)."""
    rel = info.name.removeprefix("./")
    if rel.split("/")[0] in installer.PREPARED_SKIP or rel in (".complete", "installs.log"):
        return None
    return info


def upload_prepared(conn: Connection, tools_dir: str, prepared: str, report: Callable[[str], None]) -> bool:
    """Copy the complete install under ``prepared`` (a tools folder on the client) into
    ``tools_dir`` in the pod unless a complete one is there; True if this call uploaded it."""
    where = installer.layout(tools_dir)
    code, _out, _err = conn.run(f"test -e {shlex.quote(where['complete'])}", timeout=60)
    if code == 0:
        return False
    root = Path(installer.layout(prepared)["root"])
    report(f"uploading code-server {installer.VERSION} from {root} to the pod's {tools_dir} (once)")
    args = [tools_dir, where["root"], where["lock"], where["complete"], where["installs"], installer.VERSION]
    chan = conn.open_session()
    try:
        chan.settimeout(UPLOAD_TIMEOUT)
        chan.exec_command(shlex.join(["bash", "-c", _RECEIVE, "seer-upload", *args]))
        with (
            chan.makefile("wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as gz,
            tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tar,
        ):
            tar.add(str(root), arcname=".", filter=_kept)
        chan.shutdown_write()
        status = chan.recv_exit_status()
        out = _drain(chan.recv)
        err = _drain(chan.recv_stderr)
    except (OSError, EOFError) as exc:  # the pod's side ended early: what it said, if it did
        said = chan.recv_stderr(65536).decode(errors="replace") if chan.recv_stderr_ready() else ""
        raise SandboxError(f"uploading code-server to the pod failed: {exc} {said.strip()}".strip()) from None
    finally:
        chan.close()
    if status != 0:
        raise SandboxError(f"uploading code-server to the pod failed (exit {status}): {err.strip() or out}")
    return "seer: uploaded" in out


def _drain(recv: Callable[[int], bytes]) -> str:
    """What is left of one of an ended command's streams (a few lines)."""
    data = bytearray()
    while chunk := recv(65536):
        data += chunk
    return data.decode(errors="replace")
