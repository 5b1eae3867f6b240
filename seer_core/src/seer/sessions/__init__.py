"""Sessions without a notebook: how an agent works with a sandbox in the ``cli`` and ``local``
execution modes (the ``notebook`` mode's sessions are :mod:`seer.notebook`'s).

* :mod:`seer.sessions.shell`: :class:`~seer.sessions.shell.CliSession`, commands run in the
  sandbox with a workspace's libraries importable (the ``cli`` mode);
* :mod:`seer.sessions.workdir`: :class:`~seer.sessions.workdir.LocalSession`, a folder on this
  machine with the workspace installed, whose libraries call into the sandbox over RPC (the
  ``local`` mode, seed Pattern 4).

Each module holds its session, its execution mode (registered by :mod:`seer.builtin`) and the
function that makes the session; :mod:`seer.execution` re-exports those functions.
"""
