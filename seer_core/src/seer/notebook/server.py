"""The ``notebook`` execution mode: a Jupyter server in the sandbox, started by core over the
provider's exec primitives, its port exposed through the provider with a random token.

:class:`NotebookMode` is registered by :mod:`seer.builtin` like any plugin's mode; where the
machine comes with its packages installed, :func:`start_early` (called from the
``seer_sandbox_provisioned`` hook) starts the server while the models are fetched.
:func:`restart_jupyter` starts a dead server again. Starting the server itself is
:mod:`seer.notebook.launch`'s; sessions on the server are :mod:`seer.notebook.session`'s.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import TYPE_CHECKING, ClassVar

from seer.errors import NotebookError
from seer.notebook.launch import ServerLaunch, stop_kernels
from seer.sandbox.execution_mode import ExecutionModePlugin

if TYPE_CHECKING:
    from seer.sandbox import Sandbox

__all__ = ["NotebookMode", "restart_jupyter", "start_early"]

log = logging.getLogger("seer")

#: Longest time teardown spends having the server save the notebooks' live documents.
FLUSH_TIMEOUT = 30.0


class NotebookMode(ExecutionModePlugin):
    """A Jupyter server in the sandbox; sessions get kernels with the configured models loaded.

    The server (``jupyter_server``) listens on 127.0.0.1, on a free port found inside the
    sandbox, with a random token; it has its own config, data and runtime directories under
    ``.seer/jupyter`` (nothing from the user's ``~/.jupyter`` or ``~/.ipython`` leaks in) and the
    working directory as its root. When the sandbox has models, every kernel imports what loading
    them needs as it starts, and one kernel is started ahead of time for the first session.
    With seer-toolkit installed here (it gives its modules through the ``seer_kernel_libraries``
    hook) and the config's ``toolkit`` on, its modules are uploaded to
    ``.seer/toolkit`` and every kernel finds them on ``sys.path``.

    Where the machine comes with its packages installed, the server is started as soon as the
    machine is provisioned (the ``seer_sandbox_provisioned`` hook), so it and that first kernel's
    imports run while the models are fetched; ``prepare`` then waits for it. ``prepare`` records
    ``services["jupyter"]`` (url, port, token, directories, the kernel) and ``sandbox.jupyter_url``
    (``<url>/?token=<token>``, for a browser), and hands kernels the variables core set for the
    sandbox after the server started (model paths and the manifest).
    """

    name = "notebook"
    description = "Jupyter kernel in the sandbox, models pre-loaded"
    required_packages: ClassVar[list[str]] = [
        "jupyter_server>=2",
        "ipykernel>=6",
        # JupyterLab at jupyter_url, and the notebook as one live document every writer edits
        "jupyterlab>=4",
        "jupyter-collaboration>=4",
    ]
    #: seconds to wait for the server to answer before giving up
    start_timeout: ClassVar[float] = 120.0
    #: the kernel sessions use
    kernel_name: ClassVar[str] = "python3"

    def prepare(self, sandbox: Sandbox) -> None:
        launch = _EARLY.pop(sandbox, None)
        if launch is None:
            launch = ServerLaunch(sandbox, self.kernel_name, self.start_timeout)
            launch.write_files()
        launch.complete()
        launch.finalize()

    def flush(self, sandbox: Sandbox) -> None:
        """Have the Jupyter server save every notebook's live document under ``notebooks/`` (what
        any writer, a person in JupyterLab included, put there since the last save), so the copy
        teardown makes holds it. Bounded: :data:`FLUSH_TIMEOUT` seconds in all."""
        from seer.notebook.client import JupyterClient
        from seer.notebook.live import LiveNotebook, live_supported
        from seer.notebook.session import NOTEBOOK_DIR

        service = sandbox.services.get("jupyter")
        if not service or not live_supported():
            return
        client = JupyterClient(service["url"], service["token"], timeout=10)
        deadline = time.monotonic() + FLUSH_TIMEOUT
        try:
            notebooks = client.list_notebooks(NOTEBOOK_DIR, limit=100)
        except (NotebookError, OSError) as exc:
            log.info("not saving the live notebooks before teardown: %s", exc)
            return
        for item in notebooks:
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning("saving the live notebooks before teardown took over %gs", FLUSH_TIMEOUT)
                return
            try:
                doc = LiveNotebook(client, str(item["path"]), timeout=left)
                try:
                    doc.save(timeout=left)
                finally:
                    doc.close()
            except (NotebookError, OSError) as exc:
                log.warning("could not save %s before teardown: %s", item["path"], exc)

    def restart_server(self, sandbox: Sandbox) -> str:
        """Start the sandbox's Jupyter server again (after it died, or to reset it); return its
        new ``jupyter_url``.

        What is left of the old server is stopped first, its kernels included (a kernel orphaned
        by a crashed server would keep its models in GPU memory). The new server keeps the old
        token and, when it is free, the old port, so a ``jupyter_url`` printed earlier still
        reaches it; its kernels get the sandbox's variables (model paths, the manifest) as at
        start-up, so a new session loads the models again. Jupyter sessions and kernels do not
        survive: open a new session (:meth:`seer.notebook.NotebookSession.reopen` keeps a
        session's notebook going on the new server).
        """
        old = sandbox.services.get("jupyter") or {}
        sandbox.machine.stop_process("jupyter")
        if old.get("runtime_dir"):
            stop_kernels(sandbox, str(old["runtime_dir"]))
        launch = ServerLaunch(
            sandbox, self.kernel_name, self.start_timeout, token=old.get("token"), port=old.get("port")
        )
        launch.write_files()
        launch.complete()
        launch.finalize()
        return str(sandbox.jupyter_url)


#: Servers started when their sandbox was provisioned, waiting for ``prepare``.
_EARLY: weakref.WeakKeyDictionary[Sandbox, ServerLaunch] = weakref.WeakKeyDictionary()


def start_early(sandbox: Sandbox) -> None:
    """Start a notebook sandbox's Jupyter server now, if its packages are already there (right
    after provisioning; ``prepare`` then waits for it). Does nothing otherwise, and never raises:
    ``prepare`` starts the server the ordinary way and reports what is wrong."""
    from seer import plugins

    try:
        if sandbox.config.execution_mode != "notebook" or not sandbox.machine.packages_installed:
            return
        mode = plugins.get_execution_mode("notebook")
        if not (isinstance(mode, type) and issubclass(mode, NotebookMode)):
            return
        launch = ServerLaunch(sandbox, mode.kernel_name, mode.start_timeout)
        launch.write_files()
        launch.spawn()
    except Exception as exc:  # prepare() starts it the ordinary way and reports what is wrong
        log.debug("not starting Jupyter early: %s", exc)
        return
    _EARLY[sandbox] = launch


def restart_jupyter(sandbox: Sandbox) -> str:
    """Start ``sandbox``'s Jupyter server again, after it died (its kernels died with it); return
    its ``jupyter_url`` (the old token, and the old port when it is free).

    Sessions on the old server are gone: ``session.reopen(sandbox)`` carries one on (same
    notebook, a new kernel with the models loaded). Raises :class:`~seer.errors.NotebookError`
    for a sandbox whose execution mode runs no Jupyter server.
    """
    from seer import plugins

    mode = plugins.get_execution_mode(str(sandbox.config.execution_mode))()
    if not hasattr(mode, "restart_server") or "jupyter" not in sandbox.services:
        raise NotebookError(
            f"sandbox {sandbox.sandbox_id} runs no Jupyter server (execution_mode is "
            f"{str(sandbox.config.execution_mode)!r})"
        )
    return str(mode.restart_server(sandbox))
