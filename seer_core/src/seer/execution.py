"""Ways for an agent to work with a started sandbox: ``create_notebook_session`` and friends.

::

    from seer import Sandbox, SandboxConfig, ModelConfig
    from seer.execution import create_notebook_session

    sandbox = Sandbox(SandboxConfig(models=[ModelConfig(name="google/gemma-2-9b-it")])).start()
    session = create_notebook_session(sandbox)
    print(session.model_info_text)
    print(session.exec("model.config.num_hidden_layers").result)

The seed-compatible import path (like :mod:`seer.environment`): each function lives with its
session, in :mod:`seer.notebook.session`, :mod:`seer.notebook.server`, :mod:`seer.sessions.shell`
and :mod:`seer.sessions.workdir`.
"""

from seer.notebook.server import restart_jupyter
from seer.notebook.session import NOTEBOOK_DIR, create_notebook_session, open_notebook_session
from seer.outputs import DEFAULT_OUTPUTS_DIR  # where notebooks go on the client
from seer.sessions.shell import create_cli_session
from seer.sessions.workdir import create_local_session

__all__ = [
    "DEFAULT_OUTPUTS_DIR",
    "NOTEBOOK_DIR",
    "create_cli_session",
    "create_local_session",
    "create_notebook_session",
    "open_notebook_session",
    "restart_jupyter",
]
