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

if TYPE_CHECKING:
    from seer.notebook import NotebookSession
    from seer.sandbox import Sandbox

__all__ = ["NOTEBOOK_DIR", "create_notebook_session"]

#: Where notebooks go in the sandbox, relative to its working directory (the Jupyter root).
NOTEBOOK_DIR = "notebooks"
#: The local folder notebooks are mirrored to, per sandbox: ``./seer-outputs/<sandbox_id>/``.
DEFAULT_OUTPUTS_DIR = "seer-outputs"

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
    ``./seer-outputs/<sandbox_id>/``; ``outputs_dir=False`` turns the mirror off). ``name``
    defaults to ``session-<date>-<time>``; a name already taken gets a ``-2``, ``-3``, ... suffix.
    If anything fails, the kernel is shut down and the error raised.
    """
    from seer.notebook import JupyterClient, NotebookSession, unique_notebook_path

    if name is not None and not _NAME.match(name):
        raise ConfigError(
            f"name: {name!r} is not a usable notebook name (letters, digits, '.', '_', '-'; at most 100)"
        )
    service = sandbox._services.get("jupyter")
    if not service:
        raise NotebookError(
            f"sandbox {sandbox.sandbox_id} runs no Jupyter server (execution_mode is "
            f"{sandbox.config.execution_mode.value!r}); start it with execution_mode='notebook'"
        )
    client = JupyterClient(service["url"], service["token"])
    path, name = unique_notebook_path(client, NOTEBOOK_DIR, name or time.strftime("session-%Y%m%d-%H%M%S"))
    if outputs_dir is False:
        mirror = None
    else:
        base = Path(outputs_dir) if outputs_dir else Path(DEFAULT_OUTPUTS_DIR) / sandbox.sandbox_id
        mirror = base.absolute() / f"{name}.ipynb"

    kernel_id = _claim_warm_kernel(client, service) or client.start_kernel(
        service.get("kernel_name", "python3")
    )
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
            mirror_path=mirror,
            kernel_env_file=service.get("kernel_env"),
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
