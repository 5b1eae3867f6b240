"""Ways for an agent to work with a started sandbox: ``create_notebook_session`` and friends.

::

    from seer import Sandbox, SandboxConfig, ModelConfig
    from seer.execution import create_notebook_session

    sandbox = Sandbox(SandboxConfig(models=[ModelConfig(name="google/gemma-2-9b-it")])).start()
    session = create_notebook_session(sandbox)
    print(session.model_info_text)
    print(session.exec("model.config.num_hidden_layers").result)
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from seer.errors import ConfigError, NotebookError
from seer.outputs import DEFAULT_OUTPUTS_DIR  # re-exported: where notebooks go on the client

if TYPE_CHECKING:
    from seer.cli_session import CliSession
    from seer.local_session import LocalSession
    from seer.notebook import JupyterClient, NotebookSession
    from seer.sandbox import Sandbox

__all__ = [
    "DEFAULT_OUTPUTS_DIR",
    "NOTEBOOK_DIR",
    "create_cli_session",
    "create_local_session",
    "create_notebook_session",
    "open_notebook_session",
    "restart_jupyter",
]

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
    from seer.notebook import NOTEBOOK_PURPOSE, JupyterClient, unique_notebook_path

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
    :func:`seer.notebook.notebook_cells`) start the notebook with those cells, to continue an
    existing one. On failure the kernel is shut down.
    """
    from seer.notebook import NotebookSession

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
        session._save()
        session._connect()
        session._initialise(workspace)
        session._save()
    except BaseException:
        if session is not None:
            session.shutdown()
        else:
            client.request("DELETE", f"/api/kernels/{kernel_id}")
        raise
    return session


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


def create_cli_session(sandbox: Sandbox, workspace: Any = None, *, name: str | None = None) -> CliSession:
    """A new shell session in ``sandbox`` (any execution mode; ``cli`` is the one made for it),
    with ``workspace`` installed: its libraries importable by the sandbox's ``python`` through
    ``PYTHONPATH``, its ``custom_init_code`` run once now.

    Each ``session.run(command)`` is a fresh ``bash -c`` in the sandbox's working directory with the
    session's environment (``cd`` and ``export`` do not carry over). ``session.mcp_config`` starts the
    shell MCP server on it; ``session.prompt`` tells the agent what it has. ``name`` (a label)
    defaults to ``shell-<date>-<time>``.
    """
    from seer.cli_session import new_session

    return new_session(sandbox, workspace, name=name)


def create_local_session(
    workspace: Any = None, workspace_dir: str | os.PathLike[str] = ".", name: str | None = None
) -> LocalSession:
    """A session for an agent working on this machine, in ``workspace_dir`` (created if need be),
    with ``workspace`` installed there: its libraries written at the top of the directory (a script
    there, or ``python -c`` run from there, imports them; ``session.env`` puts them on
    ``PYTHONPATH`` for code elsewhere), its skills and files installed, its ``custom_init_code``
    run once now.

    With a library from ``ScopedSandbox.serve(..., expose_as="library")`` in the workspace, the
    agent's local code imports it and calls functions that run in the sandbox (seed Pattern 4).
    ``session.mcp_config`` holds the MCP servers the workspace carries, for the agent's harness to
    load; ``session.prompt`` tells the agent what it has. ``name`` defaults to
    ``local-<date>-<time>``. A library file would replace a file of the user's: refused, with
    :class:`~seer.errors.ConfigError`.
    """
    from seer.local_session import new_local_session

    return new_local_session(workspace, workspace_dir, name)
