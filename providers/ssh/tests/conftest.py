"""The seer-ssh tests run real paramiko against real OpenSSH in a container (``SshHost``).

One ``ssh_host`` serves the whole session (it skips, saying why, without a Docker engine).
Without paramiko or seer-ssh installed, nothing here is collected.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("paramiko") is None or importlib.util.find_spec("seer_ssh") is None:
    collect_ignore_glob = ["test_*.py"]
else:
    from seer_ssh.testing.pytest_plugin import ssh_host  # noqa: F401  (the fixture)
