"""Notebook sessions: a Jupyter kernel in the sandbox, driven over HTTP and the kernel websocket.

A :class:`NotebookSession` is one Jupyter *session* (``POST /api/sessions``) on the server the
``notebook`` execution mode started in the sandbox: a kernel plus the notebook it writes. It talks
to the server only through its REST API and the kernel channels websocket
(``/api/kernels/<id>/channels``), never ZMQ, so it works through whatever tunnel a provider uses
to expose the server's port.

Every visible cell and its outputs land in a real ``.ipynb`` (nbformat 4.5) in the sandbox,
rewritten after each cell, and in a local mirror. Hidden cells (``exec(..., hidden=True)``, the
model-loading and workspace set-up cells) run with ``store_history=False`` and are written
nowhere: they are not in ``In``, ``_ih``, the IPython history or the notebook.

The class is built up one concept a module (see :mod:`seer.notebook.handle`). Build one with
:func:`create_notebook_session` (also importable from :mod:`seer.execution`).
"""

from __future__ import annotations

import os
import posixpath
import re
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from seer.errors import (
    ConfigError,
    NotebookError,
)
from seer.notebook.client import (
    NOTEBOOK_PURPOSE,
    JupyterClient,
)
from seer.notebook.handle import NO_MODELS_TEXT
from seer.notebook.recovery import KernelRecovery
from seer.notebook.writer import NotebookWriter, write_notebook

if TYPE_CHECKING:
    from seer.sandbox import Sandbox

__all__ = [
    "NOTEBOOK_DIR",
    "NO_MODELS_TEXT",
    "NotebookSession",
    "NotebookWriter",
    "create_notebook_session",
    "open_notebook_session",
    "unique_notebook_path",
    "write_notebook",
]


class NotebookSession(KernelRecovery):
    """A Jupyter session in the sandbox: a kernel (with the models loaded) and its notebook.

    ``exec`` runs one cell at a time (a lock serialises callers); ``interrupt`` may be called from
    any thread. Use it as a context manager, or call ``shutdown()`` when done.
    """

    @property
    def mcp_config(self) -> dict[str, Any]:
        """An MCP server entry for this session, to put as it is in an agent's MCP settings
        (``mcp_servers = {"notebooks": session.mcp_config}``): seer's notebook MCP server on stdio,
        with this session as its default (``SEER_SESSION_ID``, ``SEER_JUPYTER_URL``) and the
        folder the sandboxes' research records go to (``SEER_OUTPUTS_DIR``, absolute): the server
        keeps the notebook's client-side copy in ``<that>/<sandbox_id>/<name>.ipynb``, where this
        session keeps it.

        The config holds a credential: the Jupyter URL carries the server's token. Hand it only to
        the agent that may use the session; do not log or commit it. Needs seer's MCP plugin
        (``pip install "seer[mcp]"``); raises :class:`~seer.errors.PluginError` without it.
        """
        import importlib.util
        import sys

        from seer.errors import PluginError

        if importlib.util.find_spec("seer_mcp") is None:
            raise PluginError(
                "session.mcp_config needs seer's MCP plugin (the seer-mcp package); "
                'install it with: pip install "seer[mcp]"'
            )
        from seer.state import seer_home

        env = {
            "SEER_SESSION_ID": self.session_id,
            "SEER_JUPYTER_URL": self.jupyter_url,
            # Where the sandbox's record is (an MCP client passes the server only this env): the
            # server finds the sandbox's client folder there, and the session again after the
            # sandbox's Jupyter server was started again (by the notebook's path).
            "SEER_HOME": str(seer_home()),
            "SEER_NOTEBOOK_PATH": self.notebook_path,
        }
        if self.sandbox_id:
            env["SEER_SANDBOX_ID"] = self.sandbox_id
        if self.sandbox is not None:
            env["SEER_OUTPUTS_DIR"] = str(self.sandbox.outputs_dir.parent)
        elif self.local_path is not None:
            env["SEER_OUTPUTS_DIR"] = str(self.local_path.absolute().parent.parent)
        if self.model_info_text != NO_MODELS_TEXT:  # for the server's instructions to the agent
            env["SEER_SESSION_MODELS"] = self.model_info_text[:4000]
        for name in ("SEER_LOAD_PLUGINS", "SEER_DISABLE_PLUGINS"):
            if os.environ.get(name):
                env[name] = os.environ[name]
        return {"type": "stdio", "command": sys.executable, "args": ["-m", "seer_mcp.notebook"], "env": env}

    def __enter__(self) -> NotebookSession:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    def _begin(self, workspace: Any) -> None:
        """(A new session.) Write the notebook, join its live document and the fresh kernel, and
        set the kernel up: models loaded, ``workspace`` applied."""
        self.save()
        self._connect_document(new=True)
        self._connect(fresh=True)
        self._initialise(workspace)
        self.save()


def unique_notebook_path(client: JupyterClient, directory: str, name: str) -> tuple[str, str]:
    """``(path, name)`` of a notebook ``<directory>/<name>.ipynb`` that does not exist yet."""
    candidate = name
    for n in range(2, 1000):
        path = posixpath.join(directory, f"{candidate}.ipynb")
        if not client.path_exists(path):
            return path, candidate
        candidate = f"{name}-{n}"
    raise NotebookError(f"too many notebooks named {name!r} in {directory!r}")


#: Where notebooks go in the sandbox, relative to its working directory (the Jupyter root).
NOTEBOOK_DIR = "notebooks"


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _claim_warm_kernel(client: Any, service: dict[str, Any]) -> str | None:
    """The kernel the notebook mode started ahead of time, if no session has taken it yet."""
    warm = service.get("warm_kernel")
    if not warm:
        return None
    try:
        if any(s.get("kernel", {}).get("id") == warm for s in client.sessions()):
            return None
        model = client.kernel(warm)
    except (NotebookError, OSError):
        return None
    if model is None or model.get("execution_state") == "dead":
        return None
    return str(warm)


def create_notebook_session(
    sandbox: Sandbox,
    workspace: Any = None,
    *,
    name: str | None = None,
    outputs_dir: str | os.PathLike[str] | Literal[False] | None = None,
) -> NotebookSession:
    """A new Jupyter session in ``sandbox``: a kernel with the sandbox's models loaded (unless
    ``workspace.preload_models`` is off) and ``workspace`` set up, writing
    ``notebooks/<name>.ipynb`` in the sandbox.

    The notebook is mirrored to ``<outputs_dir>/<name>.ipynb`` on this machine (default
    ``sandbox.outputs_dir``: ``$SEER_OUTPUTS_DIR/<sandbox_id>/`` or ``./seer-outputs/<sandbox_id>/``
    as resolved when the sandbox started; ``outputs_dir=False`` turns the mirror off). ``name``
    defaults to ``session-<date>-<time>``; a name already taken gets a ``-2``, ``-3``, ... suffix.
    If anything fails, the kernel is shut down and the error raised.
    """
    from seer.extras import require

    require("websocket", NOTEBOOK_PURPOSE)  # before a kernel is started that could not be reached
    if name is not None and not _NAME.match(name):
        raise ConfigError(
            f"name: {name!r} is not a usable notebook name (letters, digits, '.', '_', '-'; at most 100)"
        )
    service = sandbox.services.get("jupyter")
    if not service:
        raise NotebookError(
            f"sandbox {sandbox.sandbox_id} runs no Jupyter server (execution_mode is "
            f"{str(sandbox.config.execution_mode)!r}); start it with execution_mode='notebook'"
        )
    client = JupyterClient(service["url"], service["token"])
    path, name = unique_notebook_path(client, NOTEBOOK_DIR, name or time.strftime("session-%Y%m%d-%H%M%S"))
    if outputs_dir is False:
        mirror = None
    else:
        base = Path(outputs_dir) if outputs_dir else sandbox.outputs_dir
        mirror = base.absolute() / f"{name}.ipynb"

    kernel_id = _claim_warm_kernel(client, service) or client.start_kernel(
        service.get("kernel_name", "python3")
    )
    return open_notebook_session(
        client,
        kernel_id,
        path,
        name,
        workspace=workspace,
        sandbox=sandbox,
        mirror_path=mirror,
        kernel_env_file=service.get("kernel_env"),
    )


def open_notebook_session(
    client: JupyterClient,
    kernel_id: str,
    path: str,
    name: str,
    *,
    workspace: Any = None,
    sandbox: Sandbox | None = None,
    mirror_path: Path | None = None,
    kernel_env_file: str | None = None,
    cells: list[dict[str, Any]] | None = None,
    metadata: dict[str, Any] | None = None,
) -> NotebookSession:
    """A Jupyter session for notebook ``path`` on a started kernel, set up (models, ``workspace``).

    What :func:`create_notebook_session` does once it has a kernel; also used where only the
    Jupyter server's URL is known (the notebook MCP server). ``cells`` and ``metadata`` (from
    :func:`seer.notebook.document.notebook_cells`) start the notebook with those cells, to continue an
    existing one. On failure the kernel is shut down.
    """
    session: NotebookSession | None = None
    try:
        model = client.call(
            "POST",
            "/api/sessions",
            {"path": path, "type": "notebook", "name": name, "kernel": {"id": kernel_id}},
        )
        session = NotebookSession(
            client,
            session_id=model["id"],
            kernel_id=kernel_id,
            notebook_path=path,
            name=name,
            sandbox=sandbox,
            mirror_path=mirror_path,
            kernel_env_file=kernel_env_file,
            cells=cells,
            metadata=metadata,
        )
        session._begin(workspace)
    except BaseException:
        if session is not None:
            session.shutdown()
        else:
            client.request("DELETE", f"/api/kernels/{kernel_id}")
        raise
    return session
