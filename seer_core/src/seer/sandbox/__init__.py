"""A sandbox: a machine on some provider, bootstrapped from a config, and what serves from it.

* :mod:`seer.sandbox.sandbox`: :class:`Sandbox`, its lifecycle (``start``, ``attach``,
  ``terminate``), exec and files, and its public state for plugins (``env``/``add_env``,
  ``services``/``set_service``, ``started``), kept in a client record;
* :mod:`seer.sandbox.record`: :class:`SandboxRecord`, that record: ``Sandbox(record=...)`` rebuilds
  a sandbox from it (attach, snapshot restore);
* :mod:`seer.sandbox.bootstrap`: the steps ``start()`` runs in the machine (packages, files,
  repos), written once for every provider; each takes the machine and returns what it made;
* :mod:`seer.sandbox.model_cache`: the ``models`` step: fetch into the machine's model cache,
  then make the models findable by name, env var and manifest;
* :mod:`seer.sandbox.execution_mode`: the plugin ABC whose ``prepare`` is start's last step;
* :mod:`seer.sandbox.scoped`: :class:`ScopedSandbox`, which serves interface files over RPC.
"""

from seer.sandbox.bootstrap import RepoHandle
from seer.sandbox.record import SandboxRecord
from seer.sandbox.sandbox import Sandbox

__all__ = ["RepoHandle", "Sandbox", "SandboxRecord"]
