"""``import seer`` is lazy, so what runs in a sandbox loads only what it uses.

The RPC server (``python -m seer.runtime.rpc_server``) and the model fetcher import ``seer`` as
their parent package; an eager ``seer/__init__`` made them load the whole client side (pydantic,
pluggy, the config schema), which is why every sandbox had to install all of core's dependencies.
These tests measure real processes: a fresh interpreter, and the RPC server that
``ScopedSandbox.serve`` starts on the local provider.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from seer import SandboxConfig, ScopedSandbox
from seer.providers.wheel import runtime_requirements

pytestmark = pytest.mark.e2e

CLIENT_SIDE = ("pydantic", "pluggy")


def _fresh(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_import_seer_loads_no_pydantic_until_a_config_is_used() -> None:
    seen = _fresh(
        """
        import json, sys
        import seer
        before = sorted(m for m in ("pydantic", "pluggy", "seer.config") if m in sys.modules)
        names = dir(seer)
        config = seer.SandboxConfig()
        print(json.dumps({"before": before, "after": "pydantic" in sys.modules,
                          "dir": "SandboxConfig" in names and "Sandbox" in names,
                          "version": seer.__version__, "mode": str(config.execution_mode)}))
        """
    )
    assert seen["before"] == []
    assert seen["after"] is True  # using a config loads the schema, as it must
    assert seen["dir"] is True  # dir() and `from seer import *` still see every public name
    assert seen["version"] and seen["mode"] == "notebook"


@pytest.mark.unit
def test_unknown_attribute_is_an_attribute_error() -> None:
    import seer

    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        seer.NoSuchThing  # noqa: B018
    assert set(seer.__all__) <= set(dir(seer))
    assert set(seer.__all__) == {*seer._LAZY, "__version__"}  # one list of public names
    for name in seer.__all__:
        assert getattr(seer, name) is not None


#: An interface that reports the modules loaded in the process serving it.
MODULES_INTERFACE = '''\
import sys


@expose
def loaded_modules() -> dict:
    """The module this process runs (``python -m ...``) and every module it has loaded."""
    return {"main": sys.modules["__main__"].__spec__.name, "modules": sorted(sys.modules)}
'''


@pytest.mark.slow
def test_rpc_server_process_loads_neither_pydantic_nor_pluggy(tmp_path: Path) -> None:
    iface = tmp_path / "modules.py"
    iface.write_text(MODULES_INTERFACE)
    with ScopedSandbox(SandboxConfig(execution_mode="local", timeout=300)) as scoped:
        served = scoped.serve(iface, expose_as=None)
        seen = served.client().call("loaded_modules")
    assert seen["main"] == "seer.runtime.rpc_server"  # the real server process, as serve() starts it
    loaded = set(seen["modules"])
    assert not {m for m in loaded if m.split(".")[0] in CLIENT_SIDE}, sorted(loaded)
    assert not {"seer.config", "seer.plugins", "seer.sandbox"} & loaded
    # The distributions it loads besides seer-core are what providers that build their own
    # environment install for the runtime: runtime_requirements(), nothing more.
    owners = metadata.packages_distributions()
    # (top-level names with a leading underscore are site hooks .pth files load at start-up,
    # like setuptools' _distutils_hack, not imports of the server's)
    tops = {m.split(".")[0] for m in loaded} - {m for m in loaded if m.startswith("_")}
    used = {canonicalize_name(d) for m in tops for d in owners.get(m, [])}
    given = {canonicalize_name(Requirement(r).name) for r in runtime_requirements()}
    assert used - {"seer-core"} <= given, f"the RPC server loads {sorted(used - given)}, not in {given}"


def test_the_local_supervisor_loads_neither_pydantic_nor_pluggy() -> None:
    """The supervisor runs for every local sandbox: its imports are paid on every start."""
    seen = _fresh(
        """
        import json, sys
        import seer.providers.local.supervisor
        print(json.dumps(sorted(sys.modules)))
        """
    )
    heavy = {m for m in seen if m.split(".")[0] in (*CLIENT_SIDE, "filelock", "packaging")}
    assert not heavy, sorted(heavy)
    assert not {"seer.config", "seer.plugins", "seer.providers.local.provider"} & set(seen)
