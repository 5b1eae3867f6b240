"""Expose modes: what an agent is handed for an interface served from a ``ScopedSandbox``.

* :mod:`seer.expose.base`: :class:`ExposeMode`, the plugin ABC;
* :mod:`seer.expose.modes`: the built-in ``library``, ``prompt`` and ``skill`` modes (registered
  by :mod:`seer.builtin`) and the public helpers they are made of, for plugins to reuse:
  :func:`client_module_source`, :func:`interface_docs`, :func:`prompt_text`.

"skill" here is the expose mode that hands the agent a skill folder; the folder itself is
:class:`seer.workspace.Skill`, and seer's own guide for agents is :mod:`seer.guide`.
"""

from seer.expose.base import ExposeMode
from seer.expose.modes import client_module_source, interface_docs, prompt_text

__all__ = ["ExposeMode", "client_module_source", "interface_docs", "prompt_text"]
