"""Starting a Jupyter server in a sandbox: :class:`ServerLaunch` writes its config and kernelspec
(the sandbox's variables, the output cap, seer-toolkit's modules, the imports models need),
starts it over the provider's exec primitives on a free port with a random token, and waits for
it; :func:`stop_kernels` stops what a dead server left behind. The ``notebook`` execution mode
(:mod:`seer.notebook.server`) drives it.
"""

from __future__ import annotations

import json
import logging
import secrets
import tempfile
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from seer.errors import NotebookError, SandboxError

if TYPE_CHECKING:
    from seer.notebook import JupyterClient
    from seer.sandbox import Sandbox

__all__ = ["SERVER_LAUNCHER", "TOOLKIT_DIR", "WS_PING_INTERVAL_MS", "ServerLaunch", "stop_kernels"]

log = logging.getLogger("seer")


#: How often the Jupyter server pings a kernel websocket (milliseconds; jupyter_server's default).
WS_PING_INTERVAL_MS = 30000

#: Runs the Jupyter server. jsonschema's optional format checkers ``rfc3987_syntax`` and
#: ``isoduration`` cost well over a second to import (a grammar compiled at import time) and
#: nothing the server does needs them; blocking them halves its start-up.
#: Kernel and live-document websockets also get TCP_NODELAY: tornado leaves Nagle on, and a cell's
#: reply (a sync answer) is several small frames in a row, each of which would wait for the
#: client's delayed ACK (40 ms).
#: tornado's warning about jupyter_server's ping settings is filtered out (see ``_server_config``).
#: Once the server has stopped (SIGTERM included), the process exits at once: see its last lines.
SERVER_LAUNCHER = """\
import logging, os, sys
os.umask(0o077)  # its runtime files (jpserver-*.json, *-open.html) hold the token: user-only
os.chmod(os.environ["JUPYTER_RUNTIME_DIR"], 0o700)
# An environment layered over others (the local provider's sandbox venv over cached package layers
# and the client's site-packages) installs JupyterLab's extensions and their enabling config under
# the prefix of each layer, not sys.prefix: put each one's share/jupyter and etc/jupyter on
# Jupyter's paths, or no extension (JupyterLab itself included) loads.
def _layers():
    seen = []
    for entry in sys.path:
        if entry.endswith("site-packages"):
            prefix = os.path.dirname(os.path.dirname(os.path.dirname(entry)))
            if prefix != sys.prefix and prefix not in seen:
                seen.append(prefix)
    return seen
for _var, _sub in (("JUPYTER_PATH", "share/jupyter"), ("JUPYTER_CONFIG_PATH", "etc/jupyter")):
    _found = [os.path.join(p, _sub) for p in _layers() if os.path.isdir(os.path.join(p, _sub))]
    _have = [p for p in os.environ.get(_var, "").split(os.pathsep) if p]
    if _found:
        os.environ[_var] = os.pathsep.join(_have + [p for p in _found if p not in _have])
# The first kernel (a sandbox with models), started before anything else: its imports (seconds)
# run while the server starts, and the server's first kernel start adopts it (seer.runtime.prestart
# and its kernel provisioner, where this seer-core declares it; otherwise it is stopped again).
_prestart = os.environ.pop("SEER_PRESTART_KERNEL", None)
if _prestart:
    try:
        from seer.runtime import prestart as _prestarted
        _prestarted.start(_prestart, cwd=os.getcwd())
        from importlib.metadata import entry_points
        _provisioner = _prestarted.PROVISIONER_NAME
        if entry_points(group="jupyter_client.kernel_provisioners", name=_provisioner):
            sys.argv.append("--KernelProvisionerFactory.default_provisioner_name=" + _provisioner)
        else:
            _prestarted.discard()
    except Exception as _exc:  # the server starts its kernels itself
        print(f"seer: no kernel started ahead of the server: {_exc!r}", file=sys.stderr)
for _name in ("rfc3987_syntax", "isoduration"):
    sys.modules.setdefault(_name, None)
# JupyterLab reads yarn's configuration (it spawns node, 0.3-0.7 s) as it is imported, for the
# registry it would install extensions from; this server never builds or installs any (its
# extension manager is read-only), so it does without.
try:
    import jupyterlab.commands as _lab_commands
except ImportError:
    pass
else:
    _lab_commands._yarn_config = lambda logger: {"yarn config": {}, "npm config": {}}
def _nodelay(module, name):
    try:
        handler = getattr(__import__(module, fromlist=[name]), name)
    except (ImportError, AttributeError):  # another layout, or not installed: run without it
        return
    opened = handler.open
    async def _open_nodelay(self, *args, **kwargs):
        self.set_nodelay(True)
        return await opened(self, *args, **kwargs)
    handler.open = _open_nodelay
_nodelay("jupyter_server.services.kernels.websocket", "KernelWebsocketHandler")
_nodelay("jupyter_server_ydoc.handlers", "YDocWebSocketHandler")  # the live documents' rooms
class _PingWarning(logging.Filter):
    # tornado reads jupyter_server's ws_ping_* (milliseconds) as its own websocket_ping_* (seconds)
    # and warns that the timeout exceeds the interval; its own pinger never runs (30000 s), so the
    # warning only misleads whoever reads this log.
    def filter(self, record):
        return not str(record.msg).startswith("The websocket_ping_timeout")
logging.getLogger("tornado.general").addFilter(_PingWarning())
# The live documents' update history in memory, without jupyter-collaboration's SQLite store (a
# query and a commit on the event loop for every update): seer.runtime.ystore, where installed.
try:
    import seer.runtime.ystore
except ImportError:
    pass
else:
    sys.argv.append("--YDocExtension.ystore_class=seer.runtime.ystore.MemoryYStore")
    seer.runtime.ystore.save_rooms_on_stop()  # SIGTERM: the live rooms are saved first
from jupyter_server.serverapp import main
_status = 1
try:
    main()
    _status = 0
except SystemExit as _exit:
    if _exit.code is None or isinstance(_exit.code, int):
        _status = _exit.code or 0
    else:
        print(_exit.code, file=sys.stderr)
except BaseException:
    import traceback
    traceback.print_exc()
finally:
    if _prestart:  # never adopted (the server failed to start): it would outlive the server
        try:
            _prestarted.discard()
        except Exception:
            pass
    # The server has stopped (kernels shut down, documents closed). anyio's worker threads, which
    # end only with a root task that tornado's loop never has, would hold the interpreter's exit
    # forever: a SIGTERMed server lived on until SIGKILL. Nothing is left for them to do.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_status)
"""

_FREE_PORT = """\
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
"""

#: Run (hidden, at start-up) by every kernel of a sandbox that has models: the imports loading
#: them needs, done while the client is still busy elsewhere.
_WARM_UP = """\
def __seer_warm_up(names):
    import importlib
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            pass
    try:
        import transformers
        transformers.AutoModelForCausalLM, transformers.AutoTokenizer
    except Exception:
        pass
__seer_warm_up({names!r})
del __seer_warm_up
"""


#: Where notebook sandboxes keep seer-toolkit's modules, relative to the working directory.
TOOLKIT_DIR = ".seer/toolkit"
#: Run (hidden, at start-up) by every kernel when the toolkit is on: its modules become importable
#: (``from steering_hook import create_steering_hook``), behind anything installed of that name.
#: Every kernel caps what one cell sends as output (a 200 MB value would otherwise reach every
#: client and both notebooks whole): seer.runtime.kernel_output.
_OUTPUT_CAP = """\
try:
    from seer.runtime.kernel_output import install as __seer_cap_output
    __seer_cap_output()
    del __seer_cap_output
except ImportError:
    pass
"""

_TOOLKIT_PATH = """\
import sys as __seer_sys
if {path!r} not in __seer_sys.path:
    __seer_sys.path.append({path!r})
del __seer_sys
"""


class ServerLaunch:
    """One Jupyter server being started in a sandbox.

    Everything that touches the machine runs on the caller's thread (providers' machines need not
    be thread-safe); a background thread only polls the server over HTTP until it answers and
    then, for a sandbox with models, starts the first kernel.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        kernel_name: str,
        timeout: float,
        *,
        token: str | None = None,
        port: int | None = None,
    ):
        machine = sandbox.machine
        # A weak reference: this object is the value of a WeakKeyDictionary keyed by the sandbox.
        self._sandbox = weakref.ref(sandbox)
        self.kernel_name = kernel_name
        self.timeout = timeout
        self.root = machine.workdir
        jdir = machine.resolve(".seer/jupyter")
        #: where the server keeps its own state (the live documents' history, sessions)
        self.state_dir = jdir
        self.dirs = {
            "JUPYTER_CONFIG_DIR": f"{jdir}/config",
            "JUPYTER_DATA_DIR": f"{jdir}/data",
            "JUPYTER_RUNTIME_DIR": f"{jdir}/runtime",
            "IPYTHONDIR": f"{jdir}/ipython",
        }
        self.kernel_env_file = f"{jdir}/kernel-env.json"
        self.token = token or secrets.token_urlsafe(32)
        self.warm = _warm_modules(sandbox)
        self.port = 0
        #: a port to try first (a restarted server keeps its URL when it can)
        self._preferred_port = port
        self.client: JupyterClient | None = None
        self.warm_kernel: str | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._failure: str | None = None

    @property
    def sandbox(self) -> Sandbox:
        sandbox = self._sandbox()
        if sandbox is None:
            raise SandboxError("the sandbox is gone")
        return sandbox

    def write_files(self) -> None:
        # The variables core has set so far (all of them, for a server started again later).
        self._write_kernelspec(dict(self.sandbox.env))
        toolkit_dir = _install_toolkit(self.sandbox)
        exec_lines = [_OUTPUT_CAP]
        if toolkit_dir:
            exec_lines.append(_TOOLKIT_PATH.format(path=toolkit_dir))
        if self.warm:
            exec_lines.append(_WARM_UP.format(names=self.warm))
        kernel_config = {"IPKernelApp": {"exec_lines": exec_lines}}
        self.sandbox.write_file(
            f"{self.dirs['IPYTHONDIR']}/profile_default/ipython_kernel_config.json",
            json.dumps(kernel_config),
        )
        self.sandbox.ensure_dir(self.dirs["JUPYTER_RUNTIME_DIR"])

    def _write_kernelspec(self, env: dict[str, str]) -> None:
        kernelspec = {
            "argv": [self.sandbox.machine.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (seer)",
            "language": "python",
            "metadata": {"debugger": False},
            "env": env,
        }
        self.sandbox.write_file(
            f"{self.dirs['JUPYTER_DATA_DIR']}/kernels/{self.kernel_name}/kernel.json", json.dumps(kernelspec)
        )

    def spawn(self) -> None:
        """Start the server process on a free port, and the thread waiting for it."""
        from seer.notebook import JupyterClient

        machine = self.sandbox.machine
        if self._thread is not None:  # a retry
            self._stop.set()
            self._thread.join(timeout=10)
            machine.stop_process("jupyter")
        self.port = self._preferred_port or _free_port(self.sandbox)
        self._preferred_port = None  # a retry (the port was taken) takes a free one
        machine.write_bytes(
            f"{self.dirs['JUPYTER_CONFIG_DIR']}/jupyter_server_config.json",
            json.dumps(
                _server_config(root=self.root, port=self.port, token=self.token, state=self.state_dir),
                indent=1,
            ).encode(),
            mode=0o600,
        )
        # Every kernel inherits these: a kernel restarted by the server (which reuses the
        # environment it first started with) finds the sandbox's variables in SEER_KERNEL_ENV, and
        # a client that knows only the server's URL learns whose sandbox it is.
        env = {
            **self.dirs,
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            "SEER_KERNEL_ENV": self.kernel_env_file,
            "SEER_SANDBOX_ID": self.sandbox.sandbox_id,
        }
        if self.warm:  # the launcher starts the first kernel before the server (see _wait)
            env["SEER_PRESTART_KERNEL"] = self.kernel_name
        self.sandbox.start_process(
            [machine.python, "-c", SERVER_LAUNCHER], name="jupyter", env=env, cwd=self.root
        )
        self.client = JupyterClient(machine.expose_port(self.port), self.token)
        self._stop = threading.Event()
        self._failure = None
        self._thread = threading.Thread(target=self._wait, name="seer-jupyter-start", daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        """(Background thread; HTTP only.) Poll until the server answers, then start a kernel."""
        client = self.client
        assert client is not None
        deadline = time.monotonic() + self.timeout
        delay = 0.02
        last = "no answer"
        while True:
            sandbox = self._sandbox()
            if self._stop.is_set() or sandbox is None or not sandbox.started:
                self._failure = "stopped"
                return
            try:
                status, _ = client.request("GET", "/api/status", timeout=5)
                if status == 200:
                    break
                last = f"GET /api/status answered HTTP {status}"
            except OSError as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() >= deadline:
                self._failure = f"no answer within {self.timeout:g}s ({last})"
                return
            time.sleep(delay)
            delay = min(delay * 1.5, 0.1)
        # With models to load, start the first session's kernel now: its imports (seconds) run
        # while the sandbox finishes starting. The launcher started its process before the server
        # (SEER_PRESTART_KERNEL): this first start adopts it, already well into its imports.
        # Without models a kernel starts in well under a second, not worth a process nobody may use.
        if self.warm:
            try:
                self.warm_kernel = client.start_kernel(self.kernel_name)
            except (NotebookError, OSError) as exc:  # the first session starts its own
                log.warning("could not start a kernel ahead of time: %s", exc)

    def complete(self) -> None:
        """Wait for the server (starting it if need be, retrying if it lost its port)."""
        machine = self.sandbox.machine
        for _attempt in range(3):
            if self._thread is None or self._failure is not None:
                self.spawn()
            assert self._thread is not None
            while self._thread.is_alive():
                self._thread.join(timeout=1.0)
                if self._thread.is_alive() and not machine.process_running("jupyter"):
                    self._stop.set()
                    self._thread.join(timeout=10)
                    self._failure = "the server process exited"
            if self._failure is None:
                return
            tail = _log_tail(self.sandbox)
            if "already in use" in tail or "Errno 98" in tail:
                continue  # lost the race for the port: take another
            raise SandboxError(
                f"the Jupyter server did not start: {self._failure}\n--- jupyter log (tail) ---\n{tail}"
            )
        raise SandboxError(f"the Jupyter server found no free port in 3 tries\n{_log_tail(self.sandbox)}")

    def finalize(self) -> None:
        """Hand kernels the sandbox's variables and record the server."""
        sandbox = self.sandbox
        client = self.client
        assert client is not None
        # The server may have started before core set these (the models step runs after it):
        # kernels started from now on get them through the kernelspec, kernels already running
        # (the one started ahead of time) from this file, read by the session's first cell.
        overlay = dict(sandbox.env)
        sandbox.machine.write_bytes(self.kernel_env_file, json.dumps(overlay).encode(), mode=0o600)
        if overlay:
            self._write_kernelspec(overlay)
        sandbox.set_service(
            "jupyter",
            {
                "url": client.url,
                "port": self.port,
                "token": self.token,
                "root_dir": self.root,
                "runtime_dir": self.dirs["JUPYTER_RUNTIME_DIR"],
                "kernel_name": self.kernel_name,
                "kernel_env": self.kernel_env_file,
                "warm_kernel": self.warm_kernel,
            },
        )
        sandbox.set_service("jupyter_url", client.jupyter_url)


#: Stops the kernels a dead Jupyter server left behind: processes whose command line names a
#: connection file in its runtime directory.
_STOP_KERNELS = """\
import os, signal, sys, time
runtime = sys.argv[1].rstrip("/") + "/"
def kernels():
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\\0")
        except OSError:
            continue
        if any(a.startswith(runtime.encode()) and b"kernel-" in a for a in argv):
            found.append(int(pid))
    return found
for sig in (signal.SIGTERM, signal.SIGKILL):
    pids = kernels()
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    deadline = time.monotonic() + 5
    while pids and kernels() and time.monotonic() < deadline:
        time.sleep(0.1)
"""


def stop_kernels(sandbox: Sandbox, runtime_dir: str) -> None:
    """Stop kernels of a Jupyter server that is gone (best effort: a machine without ``/proc``
    keeps them)."""
    try:
        sandbox.exec([sandbox.machine.python, "-c", _STOP_KERNELS, runtime_dir], timeout=60)
    except (OSError, SandboxError) as exc:
        log.debug("could not stop the old server's kernels: %s", exc)


def _install_toolkit(sandbox: Sandbox) -> str | None:
    """Upload the libraries plugins give kernels (the ``seer_kernel_libraries`` hook: seer-toolkit's
    modules) into the sandbox; the folder they are in, or None when the config turns the toolkit
    off or no plugin gives any."""
    if not sandbox.config.toolkit:
        return None
    from seer import plugins

    given = plugins.hook().seer_kernel_libraries(sandbox=sandbox)
    libraries = [lib for found in given for lib in found or ()]
    if not libraries:
        log.info("no plugin gives kernels libraries: kernels get no toolkit (pip install 'seer[toolkit]')")
        return None
    target = sandbox.machine.resolve(TOOLKIT_DIR)
    with tempfile.TemporaryDirectory(prefix="seer-toolkit-") as tmp:
        for library in libraries:
            library.install_into(tmp)
        sandbox.upload_dir(tmp, target)
    return target


def _warm_modules(sandbox: Sandbox) -> list[str]:
    """What a kernel should import at start-up: what loading the sandbox's models needs."""
    config = sandbox.config
    env = {**config.env, **sandbox.env}
    if not config.models and "SEER_MODELS_MANIFEST" not in env:
        return []
    names = ["torch", "transformers", "transformers.modeling_utils", "seer.runtime.loading"]
    if any(getattr(m, "is_peft", False) for m in config.models):
        names.append("peft")
    return names


def _server_config(*, root: str, port: int, token: str, state: str) -> dict[str, Any]:
    return {
        "ServerApp": {
            "ip": "127.0.0.1",
            "port": port,
            "port_retries": 0,
            "open_browser": False,
            "root_dir": root,
            # Sandboxes often run as root; the token, not the uid, guards the server.
            "allow_root": True,
            # A provider's tunnel presents its own Host header; every request still needs the token.
            "allow_remote_access": True,
            "allow_origin": "",
            "terminals_enabled": False,
            # JupyterLab and its collaboration server (the notebook's live document) load from
            # their own enabling config; the language server proxy is not wanted (slow to start).
            "jpserver_extensions": {"jupyter_server_terminals": False, "jupyter_lsp": False},
            # Kernel websockets: jupyter_server pings every ws_ping_interval ms and closes a socket
            # whose last pong is older than ws_ping_timeout, checked at each ping, the first check
            # before any ping was sent. The timeout must span a round trip past one interval, or
            # every websocket is closed one interval after it opens (a session connecting to a
            # kernel still starting, or running a long cell, lost it). Its default, 3 intervals.
            "tornado_settings": {
                "ws_ping_interval": WS_PING_INTERVAL_MS,
                "ws_ping_timeout": 3 * WS_PING_INTERVAL_MS,
            },
        },
        "IdentityProvider": {"token": token},
        # The live document (jupyter-collaboration): saved to the .ipynb when a writer asks (a
        # session after each cell, JupyterLab on Ctrl+S and its autosave, teardown), not on every
        # change: each change cancels a save under way, so a busy notebook was never saved. A
        # room with no client is kept a while (a session reconnecting finds it as it was). Its
        # state goes under .seer/jupyter, not into the working directory the agent sees.
        "YDocExtension": {
            "document_save_delay": None,
            "document_cleanup_delay": 60,
            "session_store_path": f"{state}/collaboration_sessions.json",
        },
        # The documents' update history (JupyterLab's timeline) is kept in memory: written to a
        # database on disk, every update of every cell cost a commit on the server's event loop,
        # which also carries the kernels' messages. (Where seer's runtime is installed beside the
        # server, the launcher swaps SQLite for seer.runtime.ystore's plain list.)
        "SQLiteYStore": {"db_path": ":memory:"},
        # JupyterLab asks no index or feed anything (a sandbox may have no network).
        "LabApp": {
            "news_url": None,
            "check_for_updates_class": "jupyterlab.handlers.announcements.NeverCheckForUpdate",
            "extension_manager": "readonly",
        },
        # Notice a dead kernel within a second (the default polls every 3 s).
        "KernelRestarter": {"time_to_dead": 1.0},
        "KernelSpecManager": {"ensure_native_kernel": False},
    }


def _free_port(sandbox: Sandbox) -> int:
    result = sandbox.exec_python(_FREE_PORT, timeout=60)
    try:
        return int(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SandboxError(f"could not find a free port in the sandbox: {result.output.strip()}") from None


def _log_tail(sandbox: Sandbox, lines: int = 40) -> str:
    try:
        return sandbox.process_log("jupyter", lines=lines)
    except (OSError, SandboxError):
        return "(no log)"
