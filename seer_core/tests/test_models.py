"""Model fetching and caching, handles and discovery, PEFT and hidden models.

Offline tests use the tiny models installed in an isolated hub cache (``HF_HUB_OFFLINE=1``, as
every test). The download tests serve them with ``seer.testing.hub_server.HubServer`` on
127.0.0.1 and point the sandbox at it through ``config.env`` (the fetcher is a new process, so
``HF_ENDPOINT`` and ``HF_HUB_OFFLINE=0`` there are enough).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _model_kit import (
    ADAPTER_ID,
    HIDDEN_ADAPTER_ID,
    HIDDEN_BASE_ID,
    MODEL_ID,
    TinyDirs,
    dump,
    hf_home,
    hidden_hits,
    install_all,
    three_models,
    tiny_dirs,
)
from seer import ModelConfig, Sandbox, SandboxConfig
from seer.errors import ModelFetchError, SandboxStartError
from seer.providers.local.provider import LocalProvider, hf_hub_cache
from seer.runtime.fetch import select_files
from seer.runtime.models import env_var_for
from seer.sandbox.model_cache import ModelHandle, name_hmac

pytestmark = pytest.mark.e2e

pytest.importorskip("huggingface_hub")

TOKEN = "hf_test_gated_token"
GATED_ID = "gated-org/tiny-gated"


def _running() -> set[str]:
    return {m.id for m in LocalProvider().list() if m.status.alive}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> TinyDirs:
    return tiny_dirs(tmp_path_factory, worker_id)


# --- pure parts -------------------------------------------------------------------------------
@pytest.mark.unit
def test_select_files_takes_configs_tokenizer_and_safetensors_only() -> None:
    listing = [
        ".gitattributes",
        "README.md",
        "LICENSE",
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "tokenizer.model",
        "chat_template.jinja",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "pytorch_model-00001-of-00002.bin",
        "pytorch_model-00002-of-00002.bin",
        "pytorch_model.bin.index.json",
        "consolidated.safetensors",
        "model.onnx",
        "tf_model.h5",
        "flax_model.msgpack",
        "model.gguf",
        "onnx/model.onnx",
        "onnx/config.json",
        "original/params.json",
        "original/consolidated.00.pth",
        "training_args.bin",
    ]
    assert select_files(listing) == [
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer.model",
        "tokenizer_config.json",
    ]


@pytest.mark.unit
def test_select_files_falls_back_to_bin_weights_only_without_safetensors() -> None:
    listing = [
        "config.json",
        "vocab.json",
        "merges.txt",
        "pytorch_model.bin",
        "training_args.bin",
        "adapter_config.json",
        "adapter_model.bin",
        "model.onnx",
    ]
    assert select_files(listing) == [
        "adapter_config.json",
        "adapter_model.bin",
        "config.json",
        "merges.txt",
        "pytorch_model.bin",
        "vocab.json",
    ]


def test_local_model_cache_is_where_huggingface_hub_looks(tmp_path: Path) -> None:
    cases: list[dict[str, str]] = [
        {"HOME": str(tmp_path / "home")},
        {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "xdg")},
        {"HOME": str(tmp_path / "home"), "HF_HOME": "~/hf-home"},
        {"HOME": str(tmp_path / "home"), "HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": "$HOME/hub-cache"},
    ]
    code = "from huggingface_hub import constants; print(constants.HF_HUB_CACHE)"
    for env in cases:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_"))}
        out = subprocess.run(
            [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, check=True
        )
        assert hf_hub_cache(env) == os.path.abspath(out.stdout.strip()), env


@pytest.mark.unit
def test_default_model_cache_dir_is_in_the_workdir() -> None:
    from seer.providers.base import Machine

    class Bare(Machine):
        workdir = "/work/sb"
        exec = start_process = process_running = stop_process = None  # type: ignore[assignment]
        write_bytes = read_bytes = expose_port = status = None  # type: ignore[assignment]

    Bare.__abstractmethods__ = frozenset()
    assert Bare().model_cache_dir() == "/work/sb/.cache/huggingface/hub"


@pytest.mark.unit
def test_env_var_rule_is_the_configs() -> None:
    for name in ("google/gemma-2-9b", "meta-llama/Llama-2-7b", "org/x.y_z"):
        assert env_var_for(name) == f"MODEL_{ModelConfig(name=name).env_id}_PATH"
    assert env_var_for("google/gemma-2-9b") == "MODEL_GOOGLE_GEMMA_2_9B_PATH"


@pytest.mark.unit
def test_model_handle_round_trips_and_hides_a_hidden_name() -> None:
    plain = ModelHandle(
        name="org/x",
        var_name="model",
        revision="main",
        commit="a" * 40,
        path="/c/x",
        env_var="MODEL_ORG_X_PATH",
    )
    assert ModelHandle.from_dict(plain.to_dict()) == plain
    assert "org/x" in repr(plain)
    hidden = ModelHandle(
        name="secret-org/thing",
        var_name="model",
        revision="main",
        commit="b" * 40,
        path="/c/seer-hidden/m-1",
        hidden=True,
        is_peft=True,
        base_model="secret-org/base",
        base_path="/c/seer-hidden/m-2",
    )
    assert ModelHandle.from_dict(hidden.to_dict()) == hidden
    assert "secret" not in repr(hidden) and "hidden model" in repr(hidden)
    key = "ab" * 32
    entry = hidden.manifest_entry(key)
    assert entry["name"] is None and entry["commit"] is None and entry["env_var"] is None
    assert entry["display_name"] == "hidden model"
    assert entry["name_hmac"] == name_hmac(key, "secret-org/thing")
    assert entry["name_hmac"] != name_hmac("cd" * 32, "secret-org/thing")
    assert "secret" not in dump(entry)
    with pytest.raises(ValueError, match="models key"):
        hidden.manifest_entry()


# --- a sandbox with models, offline -----------------------------------------------------------
class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def offline(dirs: TinyDirs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A sandbox with the three models, fetched from an isolated, pre-filled cache (which holds
    the hidden ones under their names too, as if fetched openly before); ``warnings`` are the
    lines the ``seer`` logger warned during its start."""
    logger = logging.getLogger("seer")
    with hf_home(tmp_path_factory.mktemp("hf-offline")) as cache:
        commits = install_all(dirs, cache)
        handler = _Lines()
        logger.addHandler(handler)
        try:
            sb = Sandbox(SandboxConfig(models=three_models(), timeout=600)).start()
        finally:
            logger.removeHandler(handler)
        try:
            yield {"sandbox": sb, "commits": commits, "cache": cache, "warnings": handler.lines}
        finally:
            sb.terminate()


def test_handles_carry_commits_paths_and_env_vars(offline: dict[str, Any]) -> None:
    sb, commits, cache = offline["sandbox"], offline["commits"], offline["cache"]
    plain, peft, secret = sb.model_handles
    assert all(isinstance(h, ModelHandle) for h in sb.model_handles)
    assert (plain.name, plain.commit, plain.var_name) == (MODEL_ID, commits[MODEL_ID], "model")
    assert plain.path == str(cache / "models--seer-testing--tiny-llama" / "snapshots" / commits[MODEL_ID])
    assert plain.env_var == "MODEL_SEER_TESTING_TINY_LLAMA_PATH"
    assert (peft.commit, peft.base_commit, peft.is_peft) == (commits[ADAPTER_ID], commits[MODEL_ID], True)
    assert peft.base_path == plain.path and Path(peft.path, "adapter_config.json").is_file()
    assert secret.hidden and secret.env_var is None and secret.commit == commits[HIDDEN_ADAPTER_ID]
    assert all(h.bytes_downloaded == 0 for h in (plain, peft))  # everything came from the cache
    env = sb.exec("env").stdout
    assert f"MODEL_SEER_TESTING_TINY_LLAMA_PATH={plain.path}\n" in env
    assert f"MODEL_SEER_TESTING_TINY_LLAMA_LORA_PATH={peft.path}\n" in env
    assert f"HF_HUB_CACHE={cache}\n" in env
    links = Path(sb.workdir, ".seer", "models")
    assert sorted(p.name for p in links.iterdir()) == [
        "seer-testing_tiny-llama",
        "seer-testing_tiny-llama-lora",
    ]
    assert os.path.realpath(links / "seer-testing_tiny-llama") == os.path.realpath(plain.path)
    # The handles survive attach from another client.
    assert Sandbox.attach(sb.sandbox_id).model_handles == sb.model_handles


def test_manifest_follows_the_contract(offline: dict[str, Any]) -> None:
    sb = offline["sandbox"]
    path = Path(sb.workdir, ".seer", "models.json")
    assert f"SEER_MODELS_MANIFEST={path}\n" in sb.exec("env").stdout
    entries = json.loads(path.read_text())["models"]
    keys = {
        "var_name", "name", "display_name", "path", "revision", "commit", "hidden", "is_peft",
        "base_path", "env_var", "name_hmac", "dtype", "device",
    }  # fmt: skip
    assert all(set(e) == keys for e in entries)
    plain, peft, secret = entries
    assert plain == {
        "var_name": "model",
        "name": MODEL_ID,
        "display_name": MODEL_ID,
        "path": sb.model_handles[0].path,
        "revision": "main",
        "commit": offline["commits"][MODEL_ID],
        "hidden": False,
        "is_peft": False,
        "base_path": None,
        "env_var": "MODEL_SEER_TESTING_TINY_LLAMA_PATH",
        "name_hmac": None,
        "dtype": None,
        "device": None,
    }
    assert peft["is_peft"] and peft["base_path"] == plain["path"]
    assert secret["name"] is None and secret["display_name"] == "hidden model" and secret["commit"] is None
    # Keyed with the sandbox's models key, which the client keeps (in the sandbox's record).
    assert secret["name_hmac"] == name_hmac(sb._services["models_key"], HIDDEN_ADAPTER_ID)
    for p in (secret["path"], secret["base_path"]):
        assert Path(p).is_dir() and not hidden_hits(p)


def test_discovery_helpers_in_the_sandbox(offline: dict[str, Any]) -> None:
    sb = offline["sandbox"]
    code = f"""
import json
from seer.runtime.models import get_model_path, list_configured_models
names = ({MODEL_ID!r}, {ADAPTER_ID!r}, "peft", "secret")
out = {{"paths": {{n: get_model_path(n) for n in names}}}}
out["listing"] = list_configured_models()
try:
    get_model_path("org/not-configured")
except KeyError as exc:
    out["error"] = str(exc)
try:  # without the models key (only served interfaces get it), a hidden id is not a name here
    out["hidden"] = get_model_path({HIDDEN_ADAPTER_ID!r})
except KeyError as exc:
    out["hidden"] = "KeyError"
print(json.dumps(out))
"""
    out = json.loads(sb.exec_python(code, check=True).stdout)
    plain, peft, secret = sb.model_handles
    assert out["paths"] == {
        MODEL_ID: plain.path,
        ADAPTER_ID: peft.path,
        "peft": peft.path,
        "secret": secret.path,
    }
    assert out["hidden"] == "KeyError"
    # With the key, as a served interface has it, the hidden id finds the model.
    key_env = {"SEER_MODELS_KEY": sb._services["models_key"]}
    lookup = f"from seer.runtime.models import get_model_path; print(get_model_path({HIDDEN_ADAPTER_ID!r}))"
    found = sb.exec([sb.machine.python, "-c", lookup], env=key_env, check=True).stdout.strip()
    assert found == secret.path
    listing = out["listing"]
    assert [m["var_name"] for m in listing] == ["model", "peft", "secret"]
    assert listing[0]["name"] == MODEL_ID and listing[0]["commit"] == plain.commit
    assert (
        listing[2]["display_name"] == "hidden model"
        and "name" not in listing[2]
        and "commit" not in listing[2]
    )
    assert (
        "org/not-configured" in out["error"] and MODEL_ID in out["error"] and "1 hidden model" in out["error"]
    )
    assert not hidden_hits(dump(listing) + out["error"])


def test_hidden_model_leaves_no_trace_in_the_sandbox(offline: dict[str, Any]) -> None:
    sb = offline["sandbox"]
    secret = sb.model_handles[2]
    assert not hidden_hits(repr(secret))
    visible = "\n".join(
        [
            Path(sb.workdir, ".seer", "models.json").read_text(),
            sb.exec("env").stdout,
            sb.exec(["ls", "-laR", str(Path(sb.workdir, ".seer"))]).stdout,
        ]
    )
    assert not hidden_hits(visible)
    # The anonymised directories: neither their paths nor their files name the model or its base.
    for root in (secret.path, secret.base_path):
        assert root is not None
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                path = Path(dirpath, name)
                assert not hidden_hits(str(path))
                if path.suffix != ".safetensors":
                    assert not hidden_hits(path.read_text(errors="replace")), path
    assert json.loads(Path(secret.path, "adapter_config.json").read_text())["base_model_name_or_path"] == (
        "hidden-model"
    )


def test_a_served_interface_finds_a_hidden_model_by_its_name(offline: dict[str, Any], tmp_path: Path) -> None:
    """The user's interface names the hidden model itself; served over RPC, it is given the models
    key, so ``get_model_path(name)`` finds the model there (and by var_name, as everywhere)."""
    from seer import ScopedSandbox

    interface = tmp_path / "finder.py"
    interface.write_text(
        "import os\n"
        "@expose\n"
        "def paths() -> dict:\n"
        f"    return {{'name': get_model_path({HIDDEN_ADAPTER_ID!r}),\n"
        "            'var_name': get_model_path('secret'), 'pid': os.getpid()}\n"
    )
    with ScopedSandbox(SandboxConfig(models=three_models(), timeout=300)).start() as scoped:
        out = scoped.serve(interface, expose_as=None).client().call("paths")
        secret = scoped.model_handles[2]
        key = scoped._services["models_key"]
        # The key reached the server in a file it deleted once read, not in its environment,
        # which /proc/<pid>/environ shows to every process of the user (another sandbox's agent).
        environ = Path(f"/proc/{out.pop('pid')}/environ").read_bytes()
        assert key.encode() not in environ and b"SEER_MODELS_KEY" not in environ
        assert not list(Path(scoped.machine.resolve(".seer/rpc")).glob("*.models-key"))
    assert out == {"name": secret.path, "var_name": secret.path}


def test_hidden_name_cannot_be_derived_in_a_local_sandbox(offline: dict[str, Any]) -> None:
    """What an agent in a local sandbox would try, run there: seer leaves it nothing to derive the
    hidden model's name from (hashing the cache's names, hard links, commit ids, seer's home). The
    cache here holds the hidden repos under their names, as if fetched openly before. What local
    cannot hide (the user's own files) is said in a warning at start."""
    sb, commits = offline["sandbox"], offline["commits"]
    secret = sb.model_handles[2]
    dirs = f"{shlex.quote(secret.path)} {shlex.quote(str(secret.base_path))}"
    manifest = sb.exec('cat "$SEER_MODELS_MANIFEST"', check=True).stdout
    env = sb.exec("env", check=True).stdout
    # 1. Hash every repo name in the model cache the way a name hash is made, with any key in reach.
    names = [
        d.removeprefix("models--").replace("--", "/")
        for d in sb.exec('ls "$HF_HUB_CACHE"', check=True).stdout.split()
        if d.startswith("models--")
    ]
    assert HIDDEN_ADAPTER_ID in names  # the name is there to be found...
    keys = re.findall(r"^SEER_MODELS_KEY=(.*)$", env, re.M)
    digests = {hashlib.sha256(("seer-hidden:" + n).encode()).hexdigest() for n in names}
    digests |= {name_hmac(k, n) for k in keys for n in names}
    assert not [d for d in digests if d in manifest]  # ...but no hash of it matches
    # 2. Files that are the cache's own (hard links) name the repo folder they sit in.
    same = f'for f in $(find {dirs} -type f); do find "$HF_HUB_CACHE" -samefile "$f"; done'
    assert sb.exec(same, check=True).stdout.strip() == ""
    # 3. A commit id found in (or naming) the hidden files matched against the cache's snapshots/.
    found = sb.exec(f"grep -rhoE '[0-9a-f]{{40}}' {dirs}; find {dirs}", check=True).stdout
    snapshots = set(sb.exec('ls "$HF_HUB_CACHE"/*/snapshots', check=True).stdout.split())
    assert {commits[HIDDEN_ADAPTER_ID], commits[HIDDEN_BASE_ID]} <= snapshots
    assert not set(re.findall(r"[0-9a-f]{40}", found)) & snapshots
    # The directories' names come from a key the client keeps: no salt for them on the machine.
    hidden_root = shlex.quote(str(Path(secret.path).parent))
    assert ".salt" not in sb.exec(f"ls -a {hidden_root}", check=True).stdout.split()
    # 4. seer's home (records with full configs) is not handed to the sandbox, nor the models key.
    assert "SEER_HOME=" not in env and "SEER_MODELS_KEY=" not in env
    # What local cannot hide is said in one line at start.
    assert [line for line in offline["warnings"] if "cannot hide" in line and "'local'" in line]


def test_offline_model_not_in_the_cache_fails_and_names_it(offline: dict[str, Any]) -> None:
    before = _running()
    with pytest.raises(SandboxStartError) as err:
        Sandbox(
            SandboxConfig(models=[MODEL_ID, {"name": "org/not-cached", "var_name": "other"}], timeout=300)
        ).start()
    assert err.value.step == "models"
    assert isinstance(err.value.__cause__, ModelFetchError)
    assert err.value.__cause__.fields == ["models[1].name"]
    assert "'org/not-cached'" in str(err.value) and "HF_HUB_OFFLINE" in str(err.value)
    assert _running() == before


def test_local_directories_are_used_as_they_are_unless_hidden(
    dirs: TinyDirs, tmp_path_factory: pytest.TempPathFactory
) -> None:
    models = [
        {"name": str(dirs.model)},
        {
            "name": str(dirs.hidden_adapter),
            "is_peft": True,
            "base_model": str(dirs.model),
            "hidden": True,
            "var_name": "secret",
        },
    ]
    with hf_home(tmp_path_factory.mktemp("hf-local")), Sandbox(SandboxConfig(models=models)).start() as sb:
        plain, secret = sb.model_handles
        entries = json.loads(Path(sb.workdir, ".seer", "models.json").read_text())["models"]
        env = sb.exec("env").stdout
    assert (plain.path, plain.commit, plain.bytes_downloaded) == (str(dirs.model), None, 0)
    assert f"{plain.env_var}={dirs.model}\n" in env
    # A hidden local model gets an anonymised copy (hard links), its files scrubbed.
    assert secret.path != str(dirs.hidden_adapter) and secret.base_path != str(dirs.model)
    for text in (secret.path, secret.base_path, dump(entries[1]), env):
        assert str(dirs.hidden_adapter) not in text and not hidden_hits(text)
    config = json.loads(Path(secret.path, "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "hidden-model"
    # The user's own files are untouched.
    original = json.loads((dirs.hidden_adapter / "adapter_config.json").read_text())
    assert original["base_model_name_or_path"] == HIDDEN_BASE_ID


# --- the real download path -------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(dirs: TinyDirs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model as a Hub repo also holding what a load must not fetch."""
    repo = tmp_path_factory.mktemp("served") / "tiny"
    shutil.copytree(dirs.model, repo)
    shutil.copyfile(repo / "model.safetensors", repo / "pytorch_model.bin")
    (repo / "model.onnx").write_bytes(b"onnx" * 1000)
    (repo / "onnx").mkdir()
    (repo / "onnx" / "model.onnx").write_bytes(b"onnx" * 1000)
    return repo


@pytest.fixture
def hub(dirs: TinyDirs, served: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A HubServer with the test repos, and an empty HF cache for this test."""
    from seer.testing.hub_server import HubServer

    monkeypatch.delenv("HF_TOKEN", raising=False)
    repos = {
        MODEL_ID: served,
        ADAPTER_ID: dirs.adapter,
        HIDDEN_BASE_ID: dirs.model,
        HIDDEN_ADAPTER_ID: dirs.hidden_adapter,
        GATED_ID: dirs.model,
    }
    with hf_home(tmp_path / "hf") as cache, HubServer(repos, gated={GATED_ID: TOKEN}) as server:
        server.cache = cache
        yield server


def _online(hub: Any, models: list[Any], **extra: Any) -> SandboxConfig:
    return SandboxConfig(models=models, env=hub.env(), timeout=300, **extra)


def test_first_start_downloads_and_the_second_downloads_nothing(hub: Any) -> None:
    config = _online(hub, three_models())
    with Sandbox(config).start() as sb:
        first = sb.model_handles
    served = hub.bytes_served
    assert served > 0
    assert all(h.bytes_downloaded > 0 for h in first), first
    # Measured on disk, so it adds up to what the server sent (the shared base is counted once).
    assert sum(h.bytes_downloaded for h in first) == served
    assert first[0].commit == hub.commit(MODEL_ID) and first[2].commit == hub.commit(HIDDEN_ADAPTER_ID)
    # Only what a load needs: no duplicate .bin weights, no ONNX, no README.
    fetched = {r.path.rsplit("/", 1)[-1] for r in hub.requests if "/resolve/" in r.path}
    assert fetched and not fetched & {"pytorch_model.bin", "model.onnx", "README.md"}, fetched
    snapshot = Path(first[0].path)
    assert not (snapshot / "pytorch_model.bin").exists() and not (snapshot / "model.onnx").exists()
    # A hidden model is not in the shared cache under its name (not even a refs/ entry).
    names = [str(p) for p in hub.cache.parent.rglob("*")]
    assert not [n for n in names if hidden_hits(n)]

    with Sandbox(config).start() as sb:
        second = sb.model_handles
    assert hub.bytes_served == served
    assert [h.bytes_downloaded for h in second] == [0, 0, 0]
    assert [(h.commit, h.path) for h in second] == [(h.commit, h.path) for h in first]


@pytest.mark.parametrize(
    ("model", "field", "words"),
    [
        ({"name": "seer-testing/tiny-lama"}, "models[0].name", ["'seer-testing/tiny-lama'", "not found"]),
        ({"name": MODEL_ID, "revision": "v9"}, "models[0].revision", [f"'{MODEL_ID}'", "'v9'", "not found"]),
        ({"name": GATED_ID}, "models[0].name", [f"'{GATED_ID}'", "gated", "secrets=['HF_TOKEN']"]),
    ],
    ids=["misspelled", "unknown-revision", "gated-without-token"],
)
def test_fetch_errors_fail_start_naming_the_model(
    hub: Any, model: dict[str, Any], field: str, words: list[str]
) -> None:
    before = _running()
    with pytest.raises(SandboxStartError) as err:
        Sandbox(_online(hub, [model])).start()
    assert err.value.step == "models"
    cause = err.value.__cause__
    assert isinstance(cause, ModelFetchError) and cause.fields == [field]
    for word in words:
        assert word in str(err.value)
    assert _running() == before


def test_gated_model_with_a_token_from_secrets(hub: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with Sandbox(_online(hub, [GATED_ID], secrets=["HF_TOKEN"])).start() as sb:
        (handle,) = sb.model_handles
    assert handle.commit == hub.commit(GATED_ID) and handle.bytes_downloaded > 0
    assert any(r.authorization for r in hub.requests if "/resolve/" in r.path)


def test_hidden_fetch_error_does_not_name_the_model(hub: Any) -> None:
    with pytest.raises(SandboxStartError) as err:
        Sandbox(_online(hub, [{"name": "secret-org/hidden-adaptr", "hidden": True}])).start()
    assert "models[0]" in str(err.value) and "not found" in str(err.value)
    assert not hidden_hits(str(err.value).replace("hidden model", ""))


def test_hidden_adapter_without_is_peft_is_refused_before_any_kernel(hub: Any) -> None:
    """Without ``is_peft`` a hidden adapter would reach the kernel with its base model's id
    scrubbed ("hidden-model is not a valid model identifier"): the fetch refuses it, naming the
    field and the fix, without naming the model."""
    with pytest.raises(SandboxStartError) as err:
        Sandbox(_online(hub, [{"name": HIDDEN_ADAPTER_ID, "hidden": True}])).start()
    assert err.value.step == "models"
    text = str(err.value)
    assert "models[0]" in text and "is_peft=True" in text and "base_model" in text, text
    assert not hidden_hits(text.replace("hidden model", ""))


def test_hidden_local_adapter_without_is_peft_is_a_config_error(dirs: TinyDirs) -> None:
    from seer.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        SandboxConfig(models=[{"name": str(dirs.hidden_adapter), "hidden": True}])
    assert [p.field for p in err.value.problems] == ["models[0].is_peft"]
    assert "is_peft=True and base_model" in str(err.value)
    # as a whole model, or declared as the adapter it is, it is accepted
    SandboxConfig(models=[{"name": str(dirs.model), "hidden": True}])
    adapter = {"name": str(dirs.hidden_adapter), "hidden": True, "is_peft": True}
    SandboxConfig(models=[{**adapter, "base_model": str(dirs.model)}])


# --- a fetcher that leaves no result says how it ended ---------------------------------------
class _KilledFetchMachine:
    """A machine whose fetcher is SIGKILLed (exit 137, no output) and that is ``status`` after."""

    python = "python3"

    def __init__(self, status: Any):
        self._status = status

    def exec(self, command: Any, **kwargs: Any) -> Any:
        from seer.providers.base import ExecResult

        return ExecResult(" ".join(command), 137, "", "")

    def status(self) -> Any:
        return self._status


@pytest.mark.parametrize("status", ["lost", "running"])
def test_a_killed_fetcher_names_the_signal_and_the_sandboxs_state(status: str) -> None:
    # A fetcher killed along with its container (removed meanwhile) must read differently from one
    # killed in a sandbox that still runs: the error said only "exited 137".
    from seer.errors import SandboxError
    from seer.progress import Progress
    from seer.providers.base import MachineStatus
    from seer.sandbox.model_cache import _run_fetcher

    machine = _KilledFetchMachine(MachineStatus(status))
    models = [ModelConfig(name=MODEL_ID)]
    with pytest.raises(SandboxError) as info:
        _run_fetcher(machine, models, {"models": []}, "/cache", Progress(enabled=False))  # type: ignore[arg-type]
    assert str(info.value).startswith(
        f"the model fetcher left no result: it exited 137 (SIGKILL); the sandbox is {status}"
    )
