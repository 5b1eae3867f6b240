"""What the providers' seed-example tests (``providers/*/tests/test_*_examples.py``) share.

Seed 004's minimal setup script (``tests/test_seed_examples.py``), moved to a provider: the seed's
``gpu=None`` line gains the provider, its options and the environment the tiny model's server on
127.0.0.1 needs, and the packages are :data:`PACKAGES` (torch: the local CPU wheel). The script is
run as the agent's setup step runs it, and the session it prints is attached to and checked the
same way on every provider. Seed 002's interface is served from a scoped sandbox by
:func:`served_seed`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _model_kit import MODEL_ID
from test_scoped import SEED_INTERFACE
from test_seed_examples import MINIMAL_SETUP, MODEL_CHECKS

#: What a model-loading sandbox installs on this machine (torch: the local CPU wheel).
PACKAGES = ["torch==2.13.0", "transformers", "accelerate"]


def setup_script(provider: str, options: dict[str, Any], env: dict[str, str], gpu: str | None = None) -> str:
    """Seed 004's minimal setup script, moved to ``provider`` (``provider_options=options``,
    ``env=env``, ``gpu=gpu``), installing :data:`PACKAGES`."""
    script = MINIMAL_SETUP.replace(
        "    gpu=None,\n",
        f'    gpu={gpu!r},\n    provider="{provider}",\n    provider_options={options!r},\n'
        f"    env={env!r},\n",
    ).replace('python_packages=["torch", "transformers", "accelerate"]', f"python_packages={PACKAGES!r}")
    assert f'provider="{provider}"' in script and "torch==2.13.0" in script
    return script


def run_setup(script: str, folder: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """``script`` written to ``folder``/setup.py and run there as the agent's setup step runs it,
    in a process of its own (with a token set, as a user's environment has one)."""
    path = folder / "setup.py"
    path.write_text(script)
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=folder,
        env={**os.environ, "HF_TOKEN": "hf_not_a_real_token"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def printed_by(out: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """What the setup script printed last: the session's ``session_id`` and ``jupyter_url``."""
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def attach_and_check_model(printed: dict[str, str]) -> Any:
    """The session the setup script printed, attached to as the agent does (the script has
    exited): its model is named in the model info, and the seed's model checks pass in it."""
    from seer.notebook import NotebookSession

    session = NotebookSession.attach(printed["jupyter_url"], printed["session_id"])
    assert f"**model** ({MODEL_ID})" in session.model_info_text
    result = session.exec(MODEL_CHECKS)
    assert result.ok, result.error
    seen = json.loads(result.stdout)
    assert seen["states"] == 3 and seen["fired"] == [seen["last"]]
    return session


@contextmanager
def served_seed(config: Any, name: str, folder: Path) -> Iterator[Any]:
    """Seed 002's interface (``folder``/interface.py), served as a plain RPC server from a scoped
    sandbox of ``config`` started as ``name``; the sandbox is terminated afterwards."""
    from seer import ScopedSandbox
    from seer.rpc import ServedInterface

    sandbox = ScopedSandbox(config)
    try:
        sandbox.start(name=name)
        path = folder / "interface.py"
        path.write_text(SEED_INTERFACE)
        served = sandbox.serve(path, expose_as=None)
        assert isinstance(served, ServedInterface)
        yield served
    finally:
        sandbox.terminate()
