"""A session's kernel from start to end: the models loaded and workspaces set up in it (hidden
cells), a restart, a new server session after the Jupyter server was started again, detach and
shutdown."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from seer.errors import (
    CellExecutionError,
    JupyterServerDiedError,
    NotebookError,
)
from seer.notebook.client import (
    JupyterClient,
    KernelRestarted,
)
from seer.notebook.editing import NotebookEditing
from seer.notebook.handle import NO_MODELS_TEXT
from seer.notebook.results import MODEL_INFO_MIME, CellResult

if TYPE_CHECKING:
    from seer.sandbox import Sandbox


#: How often ``restart()`` sets a fresh kernel up again when the connection drops during setup.
RESTART_SETUP_ATTEMPTS = 3


_LOAD_MODELS = '''\
def __seer_load_models():
    """Load the models configured for this sandbox into the kernel (seer)."""
    import json, os
    from IPython.display import display
    path = os.environ.get("SEER_MODELS_MANIFEST")
    info = None
    if path and os.path.isfile(path):
        with open(path) as fh:
            entries = json.load(fh).get("models", [])
        if entries:
            from seer.runtime.loading import describe, load_model, warn_on_reload
            namespace = globals()
            loaded = {}
            for entry in entries:
                model, tokenizer = load_model(entry)
                name = entry["var_name"]
                namespace[name] = model
                namespace["tokenizer" if name == "model" else name + "_tokenizer"] = tokenizer
                loaded[name] = (model, tokenizer, entry)
            info = describe(loaded)
            warn_on_reload(loaded)
    globals()["__seer_model_info__"] = info
    display({"MODEL_INFO_MIME": {"text": info}}, raw=True)
try:
    __seer_load_models()
finally:
    del __seer_load_models
'''.replace("MODEL_INFO_MIME", MODEL_INFO_MIME)


#: Gives the kernel the sandbox's variables set after the Jupyter server started. The file is the
#: session's, else the one the server names in ``SEER_KERNEL_ENV`` (a session attached by URL, or
#: a kernel the server restarted with the environment it first had).
_APPLY_ENV = """\
def __seer_apply_env(path):
    import json, os
    path = path or os.environ.get("SEER_KERNEL_ENV")
    if not path:
        return
    try:
        with open(path) as fh:
            os.environ.update(json.load(fh))
    except (OSError, ValueError):
        pass
try:
    __seer_apply_env(ENV_FILE)
finally:
    del __seer_apply_env
"""


class SessionLifecycle(NotebookEditing):
    """Setting a kernel up, and restarting, reopening, detaching and shutting a session down."""

    def _setup_cell(self, code: str, what: str, *, hidden: bool = True) -> CellResult:
        result = self._run(code, hidden=hidden, timeout=None, record=not hidden)
        if result.error is not None:
            raise CellExecutionError(f"{what} failed in the kernel:\n{result.error}", result=result)
        return result

    def _apply_env(self) -> None:
        """Give the kernel the variables core set for the sandbox after the server started."""
        self._setup_cell(
            _APPLY_ENV.replace("ENV_FILE", repr(self._kernel_env_file)), "setting the environment"
        )

    def _load_models(self) -> None:
        self._last_model_info = None
        if not self._preload_models:
            self.model_info_text = NO_MODELS_TEXT
            return
        self._setup_cell(_LOAD_MODELS, "loading the models", hidden=self._hidden_model_loading)
        info: dict[str, Any] = self._last_model_info or {}
        self.model_info_text = info.get("text") or NO_MODELS_TEXT

    def setup(self, workspace: Any) -> None:
        """Install ``workspace`` in the sandbox and make it live in the kernel: its libraries
        importable, its ``custom_init_code`` run (hidden). ``restart()`` does it again."""
        with self._lock:
            self._check_usable()
            self._apply(workspace)
            self.workspaces.append(workspace)

    def _apply(self, workspace: Any) -> None:
        if self.sandbox is None:
            raise NotebookError("setting up a workspace needs the session's sandbox")
        installed = workspace.install(self.sandbox)
        libs_dir = getattr(installed, "libs_dir", None)
        if libs_dir:
            self._setup_cell(
                "import importlib as __seer_il, sys as __seer_sys\n"
                f"if {str(libs_dir)!r} not in __seer_sys.path:\n"
                f"    __seer_sys.path.insert(0, {str(libs_dir)!r})\n"
                "__seer_il.invalidate_caches()\n"
                "del __seer_il, __seer_sys\n",
                "making the workspace libraries importable",
            )
        init_code = getattr(installed, "init_code", "") or ""
        if init_code.strip():
            self._setup_cell(init_code, "the workspace's init code")
        self.installed.append(installed)

    def _initialise(self, workspace: Any | None) -> None:
        """Load the models and set up ``workspace`` (at creation)."""
        with self._lock:
            if workspace is not None:
                self._preload_models = bool(getattr(workspace, "preload_models", True))
                self._hidden_model_loading = bool(getattr(workspace, "hidden_model_loading", True))
            self._apply_env()
            self._load_models()
            if workspace is not None:
                self._apply(workspace)
                self.workspaces.append(workspace)

    def restart(self) -> None:
        """Restart the kernel (after it died, or to reset it) and set it up again: models
        loaded, workspaces applied. The notebook so far is kept."""
        if self._closed:
            raise NotebookError(f"notebook session {self.session_id} is shut down")
        try:
            self._client.request("GET", "/api/status", timeout=10)
        except OSError as exc:
            self._server_gone = True
            self._dead = self._dead or "the kernel died with its Jupyter server"
            raise JupyterServerDiedError(
                f"the Jupyter server at {self._client.url} does not answer "
                f"({exc.strerror or type(exc).__name__}): it stopped, and its kernels with it. Start it "
                "again (seer.execution.restart_jupyter(sandbox)), then session.reopen(sandbox)"
            ) from exc
        channels = self._channels
        if channels is not None and self._busy:
            channels.inbox.put(KernelRestarted())
        with self._lock:
            if not self._auto_restarted:
                self._restart_kernel()
            self._auto_restarted = False
            self._setup_again()

    def reopen(self, sandbox: Sandbox | str) -> None:
        """Carry on after the sandbox's Jupyter server was started again
        (:func:`seer.execution.restart_jupyter`): a new Jupyter session and kernel on it for the
        same notebook, set up as at creation (models loaded, workspaces applied). The notebook so
        far is kept; ``session_id``, ``kernel_id`` and ``jupyter_url`` change. ``sandbox`` is the
        sandbox (its recorded server is used) or the new server's ``jupyter_url``."""
        url = sandbox if isinstance(sandbox, str) else sandbox.jupyter_url
        if not url:
            raise NotebookError("the sandbox runs no Jupyter server")
        client = JupyterClient.from_url(url)
        with self._lock:
            if self._channels is not None:
                self._channels.close()
                self._channels = None
            self._close_document()
            self._client = client
            self._new_server_session()
            # The old server may not have saved its document: the notebook as held here is it.
            self._write_file()
            self._connect_document(new=True)
            self._setup_again()
            self.save()

    def _new_server_session(self) -> None:
        """A new Jupyter session (and kernel) for this notebook on the server, which no longer
        knows the old one (it was started again)."""
        model = self._client.call(
            "POST",
            "/api/sessions",
            {
                "path": self.notebook_path,
                "type": "notebook",
                "name": self.name,
                "kernel": {"name": "python3"},
            },
        )
        self.session_id = str(model["id"])
        self.kernel_id = str(model["kernel"]["id"])
        self._server_gone = False
        self._auto_restarted = False
        self._orphans.clear()

    def _setup_again(self) -> None:
        """(Under the lock.) Connect to a fresh kernel and set it up as at creation."""
        # After a crash the server may still be restarting the kernel on its own, racing the
        # restart above; a connection made meanwhile can drop mid-setup and lose a setup cell.
        # Setting up a fresh kernel again is harmless, so retry (bounded) when that happens.
        for attempt in range(RESTART_SETUP_ATTEMPTS):
            self._displays.clear()
            self._dead = None
            self._counts_seen.clear()  # a fresh kernel counts from 1 again
            self._kernel_run = None  # named again by its first message
            try:
                self._connect(fresh=True)
                self._apply_env()
                self._load_models()
                self.installed = []
                for workspace in self.workspaces:
                    self._apply(workspace)
                return
            except NotebookError:
                if attempt == RESTART_SETUP_ATTEMPTS - 1:
                    raise
                time.sleep(1.0)  # let the server's own restart finish
                if self._kernel_model() is None:
                    self._restart_kernel()  # the kernel is gone altogether: get a new one

    def _restart_kernel(self) -> None:
        """Restart the kernel through the server, or give the session a new one if it is gone."""
        status = 0
        for attempt in range(5):
            status, data = self._client.request("POST", f"/api/kernels/{self.kernel_id}/restart", timeout=180)
            if status in (200, 404):
                break
            # 500: typically a restart already under way (the server's own, after a crash).
            time.sleep(0.5 * (attempt + 1))
        if status == 404:
            known, _ = self._client.request("GET", f"/api/sessions/{self.session_id}")
            if known == 404:  # a server started again since: it knows neither
                self._new_server_session()
                return
            self.kernel_id = self._client.start_kernel()
            self._client.call("PATCH", f"/api/sessions/{self.session_id}", {"kernel": {"id": self.kernel_id}})
        elif status != 200:
            raise NotebookError(f"restarting kernel {self.kernel_id}: HTTP {status}: {data}")

    def detach(self) -> None:
        """Let go of the session without ending it: the kernel runs on (a cell too), and the
        Jupyter server keeps what the kernel sends for the next handle attaching with the same
        ``channel`` key (see :meth:`attach`). This handle is unusable afterwards."""
        self._closed = True
        channels, self._channels = self._channels, None
        if channels is not None:
            channels.close()
        self._leave_document()

    def shutdown(self) -> None:
        """End the session: its kernel is shut down; the notebook stays. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._channels is not None:
            self._channels.close()
            self._channels = None
        self._leave_document()
        with contextlib.suppress(NotebookError, OSError):
            self._client.request("DELETE", f"/api/sessions/{self.session_id}", timeout=30)
