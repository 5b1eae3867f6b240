"""``debug=True`` on a host reached over SSH: code-server once per host, in ``<base>/tools``.

The tools folder sits beside the host's shared model cache and outlives every sandbox
(:meth:`seer_ssh.machine.SshMachine.tools_dir`), so code-server comes there once per host, one of
two ways:

* **installed on the host** by core's ``debug`` step (:mod:`seer.sandbox.code_server`, which runs
  :mod:`seer.providers.code_server` with the sandbox's Python): the host needs the compilers its
  native modules need and a package index and the npm registry it can reach; the config check
  asks the host (:func:`problems`) and refuses ``debug=True`` before anything is made where it
  lacks them;
* **copied from the client** (``provider_options.code_server_from``: an install prepared there,
  as ``scripts/code-server`` makes it) over the connection, by :func:`copy_prepared` at the
  start, before the sandbox is made: a gzip'd tar stream into the receiver of
  :mod:`seer.providers.code_server_upload`, under the installer's lock and marked complete last,
  so sandboxes starting side by side copy it once and none sees half of it. The config check
  refuses an install built for another architecture or a newer glibc than the host's.

A second start finds it complete and installs or copies nothing.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from collections.abc import Callable
from typing import Any

from seer.config import SandboxConfig
from seer.errors import ConfigProblem, SandboxError
from seer.providers import code_server_upload as upload

from seer_ssh.connection import Connection
from seer_ssh.options import SshOptions

__all__ = ["TOOLS", "copy_install", "copy_prepared", "problems", "tools_dir"]

#: The tools folder's name in seer's folder on the host (``<base>/tools``).
TOOLS = "tools"


def tools_dir(base: str) -> str:
    """The host's tools folder, shared by its sandboxes (``base``: seer's folder, expanded)."""
    return posixpath.join(base, TOOLS)


def problems(config: SandboxConfig, options: SshOptions, conn: Connection) -> list[ConfigProblem]:
    """Why ``debug=True`` cannot be served on the host ``conn`` reaches, asked before anything is
    made there (one command): see :func:`seer.providers.code_server_upload.machine_problem`."""
    if not config.debug:
        return []
    tools = tools_dir(conn.expand(options.base_dir))
    code, out, err = conn.run(shlex.join([options.python, *upload.probe_args(tools)]), timeout=60)
    try:
        probe: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        why = err.strip() or out.strip() or f"exit {code}"
        return [ConfigProblem("debug", f"could not ask {options.address} about code-server: {why[-800:]}")]
    found = upload.machine_problem(
        probe,
        tools_dir=tools,
        where=options.address,
        prepared=options.code_server_from,
        env={**config.env},
    )
    return [ConfigProblem(*found)] if found else []


def copy_prepared(
    conn: Connection, options: SshOptions, base: str, report: Callable[[str], None]
) -> dict[str, Any]:
    """Copy ``options.code_server_from`` (an install prepared on the client) into the host's tools
    folder where it is not complete yet: :func:`copy_install` with the host's Python."""
    assert options.code_server_from is not None
    return copy_install(
        conn,
        python=options.python,
        tools=tools_dir(base),
        prepared=options.code_server_from,
        where=options.address,
        report=report,
    )


def copy_install(
    conn: Connection, *, python: str, tools: str, prepared: str, where: str, report: Callable[[str], None]
) -> dict[str, Any]:
    """Copy the install prepared in ``prepared`` (a tools folder on the client) into ``tools`` on
    the machine ``conn`` reaches (``where`` names it in messages), over one channel of the
    connection, to the receiver run with ``python`` there; nothing is sent where the install is
    complete. What the receiver answered (``need``: whether it was copied, ``sent``: bytes).
    seer-runpod copies into a pod's shared folder with it too."""
    chan = conn.open_session()
    try:
        chan.settimeout(1800.0)
        chan.exec_command(shlex.join([python, *upload.receiver_args(tools)]))
        lines = chan.makefile("rb")
        errors = chan.makefile_stderr("rb")

        def why() -> str:
            text = errors.read().decode(errors="replace").strip()
            return text.splitlines()[-1] if text else f"the receiver exited {chan.recv_exit_status()}"

        def send(data: bytes) -> None:
            chan.sendall(data)

        copying = f"code-server: copying the install prepared in {prepared} to {where} (once)"
        answer = upload.upload(
            prepared,
            send=send,
            close=chan.shutdown_write,
            readline=lines.readline,
            where=f"{tools} on {where}",
            why=why,
            sending=lambda: report(copying),
        )
        code = chan.recv_exit_status()
        if code != 0:
            raise SandboxError(f"copying code-server to {tools} on {where} failed: {why()}")
    except (OSError, EOFError) as exc:
        raise SandboxError(
            f"copying code-server to {tools} on {where} failed: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        chan.close()
    if answer.get("need"):
        report(f"code-server: copied to {tools} ({answer['sent'] / 1e6:.0f} MB sent, {answer.get('node')})")
    else:
        report(f"code-server: {tools} on {where} has it: nothing copied")
    return answer
