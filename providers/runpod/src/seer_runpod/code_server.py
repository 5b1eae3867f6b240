"""``debug=True`` on RunPod: code-server in the pod's shared folder, installed or uploaded once.

Core's ``debug`` step (:mod:`seer.sandbox.code_server`) runs the installer in
:meth:`RunPodMachine.tools_dir <seer_runpod.provider.RunPodMachine.tools_dir>`, ``tools/`` beside
the caches the pod's sandboxes share (on the volume: a network volume's outlives the pod, so every
pod mounting it finds code-server there). Building code-server in a pod needs compilers in its
image (the installer says which are missing); with ``provider_options.code_server_from`` the
client's prepared install is uploaded there instead, by :func:`upload_prepared`, before the
installer runs (which then finds it complete and does nothing).

The upload is seer-ssh's (:func:`seer_ssh.code_server.copy_install`): one tar stream (gzip level
1: a third of the ~840 MB) over the pod's SSH connection to the receiver of
:mod:`seer.providers.code_server_upload`, which unpacks it beside the install (paths and links
checked), runs its Node once, and moves it into place and marks it complete only at the end, under
the installer's own file lock: concurrent pods on one network volume upload it once, and none ever
sees a half copy. Each upload that ran adds a line to the
install's ``installs.log`` (as each install does), so a second start is counted: it finds the
``.complete`` marker and sends nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from seer_ssh.code_server import copy_install
from seer_ssh.connection import Connection

__all__ = ["upload_prepared"]


def upload_prepared(
    conn: Connection, tools_dir: str, prepared: str, report: Callable[[str], None], *, python: str = "python3"
) -> bool:
    """Copy the complete install under ``prepared`` (a tools folder on the client) into
    ``tools_dir`` in the pod unless a complete one is there (the receiver run with the pod's
    ``python``); True if this call uploaded it."""
    answer = copy_install(
        conn, python=python, tools=tools_dir, prepared=prepared, where="the pod", report=report
    )
    return bool(answer.get("need"))
