"""``debug=True``: VS Code in the browser (code-server) in the sandbox, written once for every provider.

The ``debug`` step of :meth:`seer.sandbox.Sandbox.start`:

1. makes sure code-server is in the machine's :meth:`~seer.providers.base.Machine.tools_dir`
   (:mod:`seer.providers.code_server` installs it there once; a provider whose image already holds
   it, or whose cache outlives the machine, installs nothing on a second start);
2. starts it as the background process ``code-server``, bound to the sandbox's 127.0.0.1 on a
   port the kernel picks (``--bind-addr 127.0.0.1:0``; the port is read from its log), with
   password authentication and a random password in a 0600 config file, its state under
   ``.seer/code-server`` (nothing from the user's own VS Code), and the sandbox's Python as the
   interpreter (``python.defaultInterpreterPath`` in the server's user settings, so no file in
   the working directory is written);
3. reaches it through the provider's port exposure (:meth:`~seer.providers.base.Machine.expose_port`,
   as Jupyter is) and returns ``services["code_server"]`` (url, port, password, folder) and
   ``code_server_url`` (the URL that opens the working directory in VS Code) for the sandbox to
   record.

code-server 4.x takes its secret only as a password POSTed to its login page (it has no token a
URL can carry), so a person opening ``code_server_url`` is asked for
``sandbox.code_server_password`` once; the session cookie it sets keeps the browser logged in.
Every request without it is sent to the login page.
"""

from __future__ import annotations

import json
import re
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seer.errors import SandboxError
from seer.providers import code_server as installer

if TYPE_CHECKING:
    from collections.abc import Mapping

    from seer.progress import Progress
    from seer.providers.base import Machine

__all__ = ["PROCESS", "start_code_server"]

#: the background process's name in the sandbox
PROCESS = "code-server"
#: seconds an install may take (it builds native modules: minutes on a small machine)
INSTALL_TIMEOUT = 1800.0
#: seconds code-server may take to listen and answer
START_TIMEOUT = 120.0

_LISTENING = re.compile(r"HTTP server listening on http://127\.0\.0\.1:(\d+)/")


def start_code_server(machine: Machine, env: Mapping[str, str], progress: Progress) -> dict[str, Any]:
    """Install code-server where it is missing and start it (the ``debug`` step of
    ``Sandbox.start()``, with the variables core set for the sandbox). Returns the services it
    made, for the sandbox to record: ``code_server`` (url, port, password, folder, root) and
    ``code_server_url``."""
    where = ensure_installed(machine, env, progress)
    state = machine.resolve(".seer/code-server")
    password = secrets.token_urlsafe(24)
    config = f"{state}/config.yaml"
    machine.write_bytes(
        config,
        f"bind-addr: 127.0.0.1:0\nauth: password\npassword: {password}\ncert: false\n".encode(),
        mode=0o600,
    )
    settings = {
        "python.defaultInterpreterPath": machine.python,
        "security.workspace.trust.enabled": False,
        "telemetry.telemetryLevel": "off",
        "workbench.startupEditor": "none",
        "extensions.autoCheckUpdates": False,
        "update.mode": "none",
        # the AI chat panel, open by default, needs an account and the internet
        "workbench.secondarySideBar.defaultVisibility": "hidden",
    }
    machine.write_bytes(f"{state}/data/User/settings.json", json.dumps(settings, indent=1).encode())
    machine.start_process(
        [
            where["node"],
            where["entry"],
            "--config",
            config,
            "--user-data-dir",
            f"{state}/data",
            "--extensions-dir",
            f"{state}/extensions",
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
            "--ignore-last-opened",
            machine.workdir,
        ],
        name=PROCESS,
        env=env,
        cwd=machine.workdir,
    )
    port = _wait_listening(machine)
    base = machine.expose_port(port).rstrip("/")
    _wait_healthy(base)
    url = f"{base}/?{urllib.parse.urlencode({'folder': machine.workdir})}"
    return {
        "code_server": {
            "url": base,
            "port": port,
            "password": password,
            "folder": machine.workdir,
            "root": where["root"],
        },
        "code_server_url": url,
    }


def ensure_installed(machine: Machine, env: Mapping[str, str], progress: Progress) -> dict[str, Any]:
    """Run the installer in the machine (it does nothing where code-server is already there);
    what it reports: ``installed`` (whether this call installed it), ``root``, ``node``, ``entry``."""
    source = Path(installer.__file__).read_bytes()
    result = machine.exec(
        [machine.python, "-", machine.tools_dir()],
        stdin=source,
        env=dict(env),
        timeout=INSTALL_TIMEOUT,
        on_output=lambda _stream, text: progress.update(text.strip()),
    )
    if result.exit_code != 0:
        raise SandboxError(f"could not install code-server in the sandbox:\n{result.output.strip()[-4000:]}")
    try:
        report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SandboxError(
            f"the code-server installer said nothing usable: {result.output.strip()}"
        ) from None
    if report["installed"]:
        progress.update(f"installed code-server {installer.VERSION} in {report['root']}")
    return report


def _wait_listening(machine: Machine) -> int:
    """The port code-server listens on, from its log; raises with the log if it dies or stays quiet."""
    deadline = time.monotonic() + START_TIMEOUT
    delay = 0.05
    while True:
        log = machine.process_log(PROCESS, lines=200)
        found = _LISTENING.search(log)
        if found:
            return int(found.group(1))
        if not machine.process_running(PROCESS):
            raise SandboxError(f"code-server exited before listening:\n{log[-4000:]}")
        if time.monotonic() >= deadline:
            raise SandboxError(f"code-server did not listen within {START_TIMEOUT:g}s:\n{log[-4000:]}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


def _wait_healthy(base: str) -> None:
    """Wait until code-server answers through the exposed URL (a tunnel may need a moment)."""
    deadline = time.monotonic() + START_TIMEOUT
    last = "no answer"
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=10) as resp:
                if resp.status == 200:
                    return
                last = f"HTTP {resp.status}"
        except (OSError, urllib.error.URLError) as exc:
            last = str(exc)
        if time.monotonic() >= deadline:
            raise SandboxError(f"code-server did not answer at {base} within {START_TIMEOUT:g}s ({last})")
        time.sleep(0.2)
