"""The embedded ``local`` provider: a sandbox is a working directory plus processes on this machine.

* :mod:`seer.providers.local.provider`: :class:`~seer.providers.local.provider.LocalProvider`
  and its machine, the sandbox folders under ``$SEER_HOME/local/<id>/``;
* :mod:`seer.providers.local.env`: each sandbox's thin venv over cached package layers (the local
  analogue of an image);
* :mod:`seer.providers.local.supervisor`: the detached process that owns a sandbox's lifetime.

Registered by :mod:`seer.builtin` exactly like a third-party provider. "local" here is the
provider; the ``local`` *execution mode* (the agent working in a folder on this machine) is
:mod:`seer.sessions.workdir`.
"""

from seer.providers.local.provider import LocalProvider

__all__ = ["LocalProvider"]
