"""A hidden model on Docker: what an agent in the container would try, to find its name, run there
through ``sandbox.exec``, finds nothing, even though the host's shared model cache holds the model
under its name (another sandbox fetched it openly first).

A sandbox with hidden models gets no shared model cache: nothing in the container can be listed,
hashed, linked or matched against it. Its models download into the container's own folder.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
from _docker_kit import docker_config
from _model_kit import HIDDEN_ADAPTER_ID, HIDDEN_BASE_ID, HIDDEN_NEEDLES, MODEL_ID, tiny_dirs
from seer import Sandbox
from seer.sandbox.model_cache import name_hmac
from seer.state import seer_home

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: Run by exec_python (its code comes on stdin, so its own command line names nothing): the
#: processes other than itself whose environment or command line holds a hidden id's part.
_PROCS_NAMING = f"""
import os
needles = {[n.encode() for n in HIDDEN_NEEDLES]!r}
hits = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) == os.getpid():
        continue
    for part in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{{pid}}/{{part}}", "rb").read()
        except OSError:
            continue
        hits += [(pid, part) for n in needles if n in data]
print(hits)
"""
#: Everywhere in the container but the kernel's virtual file systems.
PRUNE = r"\( -path /proc -o -path /sys -o -path /dev \) -prune -o"


@pytest.fixture(scope="module")
def secret_hub(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Any]:
    """The tiny model, the hidden adapter and its base, served on 127.0.0.1."""
    from seer.testing.hub_server import HubServer

    dirs = tiny_dirs(tmp_path_factory, worker_id)
    repos = {MODEL_ID: dirs.model, HIDDEN_ADAPTER_ID: dirs.hidden_adapter, HIDDEN_BASE_ID: dirs.model}
    with HubServer(repos) as server:
        yield server


@pytest.fixture(scope="module")
def hidden_sandbox(docker_engine: Any, secret_hub: Any, volume: str) -> Iterator[Sandbox]:
    """A docker sandbox with a visible and a hidden model, started after another sandbox put the
    hidden one in the shared cache under its name."""
    opened = docker_config(
        models=[HIDDEN_ADAPTER_ID], env=secret_hub.env(), provider_options={"model_volume": volume}
    )
    with Sandbox(opened).start(name="hidden-fetched-openly") as sb:
        cache = sb.machine.model_cache_dir()
        listing = sb.exec(["ls", cache], check=True).stdout.split()
    assert "models--secret-org--hidden-adapter" in listing, "the shared cache holds the name"
    config = docker_config(
        models=[
            MODEL_ID,
            # an adapter says so: a hidden one without is_peft is refused (its base would be unknown)
            {
                "name": HIDDEN_ADAPTER_ID,
                "hidden": True,
                "is_peft": True,
                "base_model": HIDDEN_BASE_ID,
                "var_name": "secret",
            },
        ],
        env=secret_hub.env(),
        provider_options={"model_volume": volume},
    )
    with Sandbox(config).start(name="hidden-model") as sb:
        yield sb


def _sh(sb: Sandbox, script: str) -> str:
    return sb.exec(["bash", "-c", script], check=True, timeout=300).stdout


def test_the_hidden_sandbox_sees_no_shared_model_cache(docker_engine: Any, hidden_sandbox: Sandbox) -> None:
    sb = hidden_sandbox
    container = docker_engine.containers.get(sb.sandbox_id)
    assert container.attrs["Mounts"] == [], "no model-cache volume (nor any other) is mounted"
    # The visible model came into the container's own cache, and both models are usable.
    plain, secret = sb.model_handles
    assert plain.path.startswith(sb.machine.model_cache_dir())
    find = f"from seer.runtime.models import get_model_path as g; print(g('secret')); print(g({MODEL_ID!r}))"
    out = sb.exec([sb.machine.python, "-c", find], check=True).stdout.split()
    assert out == [secret.path, plain.path]
    assert sb.exec(["test", "-f", f"{secret.path}/adapter_config.json"]).ok


def test_hidden_name_recovery_attempts_find_nothing_in_the_container(
    hidden_sandbox: Sandbox, secret_hub: Any
) -> None:
    sb = hidden_sandbox
    secret = sb.model_handles[1]
    manifest = _sh(sb, 'cat "$SEER_MODELS_MANIFEST"')
    env = _sh(sb, "env")
    # 1. Hash every repo name found anywhere (model caches) as a name hash is made, with any key.
    folders = _sh(sb, f"find / {PRUNE} -type d -name 'models--*' -print").split()
    names = [f.rsplit("/", 1)[-1].removeprefix("models--").replace("--", "/") for f in folders]
    assert MODEL_ID in names and HIDDEN_ADAPTER_ID not in names
    keys = re.findall(r"^SEER_MODELS_KEY=(.*)$", env, re.M)
    digests = {hashlib.sha256(("seer-hidden:" + n).encode()).hexdigest() for n in names}
    digests |= {name_hmac(k, n) for k in keys for n in names}
    assert not [d for d in digests if d in manifest]
    # 2. Another name of the same file (a hard link into a cache) would name the repo's folder.
    files = _sh(sb, f"find {shlex.quote(secret.path)} -type f").split()
    assert files
    for path in files:
        same = _sh(sb, f"find / {PRUNE} -samefile {shlex.quote(path)} -print").split()
        assert same == [path]
    # 3. A cache names each blob by the sha256 of its content: look the hidden files' hashes up.
    listed = _sh(sb, "sha256sum " + " ".join(map(shlex.quote, files)))
    sums = [line.split()[0] for line in listed.splitlines()]
    for digest in sums:
        assert _sh(sb, f"find / {PRUNE} -name '*{digest}*' -print") == ""
    # 4. Match the hidden model's commit against any snapshots/ folder, file or file name.
    commit = secret_hub.commit(HIDDEN_ADAPTER_ID)
    assert secret.commit == commit  # the client knows it...
    assert _sh(sb, f"find / {PRUNE} -name '*{commit}*' -print") == ""  # ...the container does not
    grep = "grep -rlF --devices=skip --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev"
    assert _sh(sb, f"{grep} -e {commit} / || true") == ""
    # 5. The name itself: in no file, no process's environment or command line.
    needles = " ".join(f"-e {shlex.quote(n)}" for n in HIDDEN_NEEDLES)
    assert _sh(sb, f"{grep} {needles} / || true") == ""
    assert sb.exec_python(_PROCS_NAMING, check=True).stdout.strip() == "[]"
    # 6. seer's home, records and configs are the client's: not in the container, not named there.
    assert "SEER_HOME=" not in env and "SEER_MODELS_KEY=" not in env
    assert not sb.exec(["test", "-e", str(seer_home())]).ok
    assert _sh(sb, f"find / {PRUNE} -name 'hidden-models.key' -print") == ""
    # The manifest entry itself names nothing.
    (entry,) = [e for e in json.loads(manifest)["models"] if e["hidden"]]
    assert entry["name"] is None and entry["commit"] is None and entry["name_hmac"]
