"""Workspaces: the libraries, skills and files an agent's session starts with.

A :class:`Library` is Python source the agent can import (one module or a package) together with
docs the agent is shown. A :class:`Skill` is an agent-skills folder: ``SKILL.md`` (YAML front
matter with ``name`` and ``description``, then instructions) plus any other files. A
:class:`Workspace` bundles libraries and skills with local files, start-up code and the
model-loading switches of a session.

``Workspace.install(sandbox)`` writes all of it into a sandbox through the public
:class:`~seer.sandbox.Sandbox` API, so it works on every provider, and returns an
:class:`InstalledWorkspace` saying where things went; ``Workspace.install_local(directory)`` does
the same on this machine. User code is never imported here: docs come from parsing the source
with :mod:`ast`, which also catches a syntax error when a library is built, naming file and line.

One module per concept: ``library`` (:class:`Library`), ``skill`` (:class:`Skill`), ``workspace``
(:class:`Workspace`, :class:`InstalledWorkspace`), and what they share: ``files`` (file maps,
import names, the error listing every problem) and ``docs`` (a library's docs from its source).
Every public name is importable from ``seer.workspace`` itself.
"""

from seer.workspace.files import DEFAULT_ROOT, FileContent, PathArg
from seer.workspace.library import Library
from seer.workspace.skill import Skill
from seer.workspace.workspace import InstalledWorkspace, Workspace

__all__ = ["DEFAULT_ROOT", "FileContent", "InstalledWorkspace", "Library", "PathArg", "Skill", "Workspace"]
