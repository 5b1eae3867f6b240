"""Notebook sessions: a Jupyter kernel in the sandbox with the models loaded, and the notebook it
writes. The notebook concept, from the server to the ``.ipynb``:

* :mod:`seer.notebook.server`: the ``notebook`` execution mode, which starts the Jupyter server in
  the sandbox (its port exposed through the provider, a random token) and a warm kernel;
* :mod:`seer.notebook.client`: :class:`JupyterClient` (the server's REST API) and
  :class:`~seer.notebook.client.KernelChannels` (one kernel's websocket);
* :mod:`seer.notebook.results`: :class:`CellResult` and :class:`CellError`, built from the
  kernel's messages;
* :mod:`seer.notebook.document`: the ``.ipynb`` document, built cell by cell;
* :mod:`seer.notebook.session`: :class:`NotebookSession` (run, edit and record cells; restart,
  reopen, detach) and :func:`create_notebook_session`, with a pluggable notebook writer
  (:attr:`NotebookSession.writer`).
"""

from seer.notebook.client import JupyterClient
from seer.notebook.document import check_notebook_path, notebook_cells
from seer.notebook.results import CellError, CellResult, strip_ansi
from seer.notebook.session import (
    NO_MODELS_TEXT,
    NotebookSession,
    NotebookWriter,
    create_notebook_session,
    open_notebook_session,
    unique_notebook_path,
    write_notebook,
)
from seer.notebook.writer import rendered_state

__all__ = [
    "NO_MODELS_TEXT",
    "CellError",
    "CellResult",
    "JupyterClient",
    "NotebookSession",
    "NotebookWriter",
    "check_notebook_path",
    "create_notebook_session",
    "notebook_cells",
    "open_notebook_session",
    "rendered_state",
    "strip_ansi",
    "unique_notebook_path",
    "write_notebook",
]
