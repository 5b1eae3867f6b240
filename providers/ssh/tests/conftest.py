"""The seer-ssh tests run real paramiko against real OpenSSH in a container (``SshHost``).

One ``ssh_host`` serves the whole session (it skips, saying why, without a Docker engine); the
provider's tests share one more, ``box``, whose sessions get the client's pip settings (the local
wheel folder), so sandboxes there install packages as the client would, and whose system Python
has the client's ML packages (``seer_ssh.testing.ML_STACK``). Without paramiko or
seer-ssh installed, nothing here is collected.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("paramiko") is None or importlib.util.find_spec("seer_ssh") is None:
    collect_ignore_glob = ["test_*.py"]
else:
    from seer_ssh.testing.pytest_plugin import ssh_host  # noqa: F401  (the fixture)

    sys.path.insert(0, str(Path(__file__).resolve().parent))

    from _ssh_kit import Box

    @pytest.fixture(scope="session")
    def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
        """The remote host the provider's tests share, and how to make configs for it. Its system
        Python has this client's torch, transformers, accelerate and Jupyter, as a GPU box has
        torch: sandboxes there still make (and reuse) an environment per package set, but
        install nothing heavy in it."""
        from seer_ssh.testing.host import SshHost, client_pins, engine_problem

        problem = engine_problem()
        if problem:
            pytest.skip(f"no SSH test host here: {problem}")
        with SshHost(env=Box.host_env(), python_packages=client_pins()) as host:
            yield Box(host, tmp_path_factory.mktemp("ssh-box"))

    @pytest.fixture(scope="module")
    def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
        """The tiny model served on 127.0.0.1 (host networking lets the host reach it)."""
        from _model_kit import MODEL_ID, tiny_dirs
        from seer.testing.hub_server import HubServer

        dirs = tiny_dirs(tmp_path_factory, "master")
        with HubServer({MODEL_ID: dirs.model}) as server:
            yield server
