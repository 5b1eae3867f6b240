"""What a sandbox should hold, as the user writes it, and how it is checked.

* :mod:`seer.config.schema`: ``SandboxConfig``, ``ModelConfig``, ``RepoConfig`` and
  ``ExperimentConfig``, validated when built, every problem a :class:`~seer.errors.ConfigProblem`
  naming its field by full path; the GPU catalogue.
* :mod:`seer.config.files`: :func:`~seer.config.files.load_config`, a YAML or JSON config file
  read into an ``ExperimentConfig``, errors naming file and line.
* :mod:`seer.config.secrets`: secrets passed by name, resolved from the environment or ``.env``
  at start time.
* :mod:`seer.config.fieldtext`: a config field's type and default as text, one reading shared by
  the documents generated from the schema (docs/config.md, seer's guide for agents).

Nothing here knows about providers or sandboxes beyond their names: the schema is the first
stage of config -> provider primitives -> bootstrap steps -> sessions. ``from seer.config import
SandboxConfig`` names the schema's public names, as before the package was split.
"""

from seer.config.schema import *  # noqa: F403
from seer.config.schema import __all__ as __all__
