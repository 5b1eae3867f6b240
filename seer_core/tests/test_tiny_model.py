"""seer.testing.tiny_model: the offline tiny model, its adapter, and hub-cache entries for them."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from seer.testing.hub_server import HubServer, git_blob_sha1, scan_repo
from seer.testing.tiny_model import (
    CHAT_TEMPLATE,
    build_tiny_adapter,
    build_tiny_model,
    install_in_hub_cache,
    install_tiny_models,
    main,
)

pytestmark = pytest.mark.unit

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
hf = pytest.importorskip("huggingface_hub")
constants = pytest.importorskip("huggingface_hub.constants")
AutoModelForCausalLM = transformers.AutoModelForCausalLM
AutoTokenizer = transformers.AutoTokenizer
PeftModel = peft.PeftModel
IncompleteSnapshotError = pytest.importorskip("huggingface_hub.errors").IncompleteSnapshotError

REPO_ID = "seer-testing/tiny-llama"
ADAPTER_ID = "seer-testing/tiny-llama-lora"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def adapter_dir(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_adapter(
        tmp_path_factory.mktemp("tiny") / "adapter", model_dir, base_model_name_or_path=REPO_ID
    )


@pytest.fixture(scope="module")
def model(model_dir: Path):
    return AutoModelForCausalLM.from_pretrained(model_dir).eval()


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path):
    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def cache_dir(model_dir: Path, adapter_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("hub-cache")
    install_in_hub_cache(model_dir, REPO_ID, cache_dir=cache)
    install_in_hub_cache(adapter_dir, ADAPTER_ID, cache_dir=cache)
    return cache


@pytest.fixture
def default_cache(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Make ``cache_dir`` the cache huggingface_hub and transformers use when none is passed."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache_dir))
    yield cache_dir


# -- the model ---------------------------------------------------------------------------------------


def test_files_are_small(model_dir: Path) -> None:
    names = {p.name for p in model_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    total = sum(p.stat().st_size for p in model_dir.iterdir())
    assert total < 1024 * 1024


def test_model_is_a_two_layer_llama(model) -> None:
    assert type(model).__name__ == "LlamaForCausalLM"
    assert len(model.model.layers) == 2
    assert model.config.hidden_size == 64


def test_tokenizer_round_trip_and_special_tokens(tokenizer) -> None:
    ids = tokenizer("The quick brown fox")["input_ids"]
    assert ids[0] == tokenizer.bos_token_id == 1
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id) == (0, 2)
    assert tokenizer.decode(ids, skip_special_tokens=True) == "The quick brown fox"
    # byte-level: text the tokenizer never saw still encodes and decodes
    assert tokenizer.decode(tokenizer("Größe 🙂")["input_ids"], skip_special_tokens=True) == "Größe 🙂"


def test_chat_template(tokenizer) -> None:
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hello world"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|bos|><|user|>Hello world<|eos|><|assistant|>"
    assert tokenizer.chat_template == CHAT_TEMPLATE


def test_generate_is_greedy_and_deterministic(model, tokenizer) -> None:
    inputs = tokenizer(["The quick brown fox", "Hello"], return_tensors="pt", padding=True)
    first = model.generate(**inputs, max_new_tokens=6)
    second = model.generate(**inputs, max_new_tokens=6)
    assert first.shape[0] == 2
    assert inputs["input_ids"].shape[1] < first.shape[1] <= inputs["input_ids"].shape[1] + 6
    assert torch.equal(first, second)


def test_hidden_states_shape(model, tokenizer) -> None:
    inputs = tokenizer("The quick brown fox", return_tensors="pt")
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True)
    seq = inputs["input_ids"].shape[1]
    assert len(out.hidden_states) == model.config.num_hidden_layers + 1
    assert all(h.shape == (1, seq, 64) for h in out.hidden_states)
    assert out.logits.shape == (1, seq, model.config.vocab_size)


def test_forward_hook_on_a_layer_fires_and_steers(model, tokenizer) -> None:
    """transformers 5: a decoder layer returns a tensor, so a forward hook receives and may return one."""
    inputs = tokenizer("The quick brown fox", return_tensors="pt")
    seen: list[object] = []

    def steer(module, args, output):
        seen.append(output)
        return output + 3.0

    with torch.no_grad():
        base = model(**inputs, output_hidden_states=True)
        # prepend=True: run before the hook transformers uses to record hidden states, so the
        # recorded hidden states show the steered activations too.
        handle = model.model.layers[0].register_forward_hook(steer, prepend=True)
        try:
            steered = model(**inputs, output_hidden_states=True)
        finally:
            handle.remove()
    assert len(seen) == 1 and isinstance(seen[0], torch.Tensor)
    assert torch.allclose(steered.hidden_states[1], base.hidden_states[1] + 3.0)
    assert not torch.allclose(steered.logits, base.logits)


def test_build_is_deterministic(model_dir: Path, tmp_path: Path) -> None:
    torch.rand(1)  # move the global RNG off any state an earlier build could have left
    state = torch.random.get_rng_state()
    again = build_tiny_model(tmp_path / "again")
    assert torch.equal(torch.random.get_rng_state(), state), "building must not touch the caller's RNG"
    assert scan_repo(again).commit == scan_repo(model_dir).commit
    other = build_tiny_model(tmp_path / "other", seed=1)
    assert (other / "model.safetensors").read_bytes() != (model_dir / "model.safetensors").read_bytes()
    assert (other / "tokenizer.json").read_bytes() == (model_dir / "tokenizer.json").read_bytes()


# -- the adapter -------------------------------------------------------------------------------------


def test_adapter_config_names_the_base(adapter_dir: Path) -> None:
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == REPO_ID
    assert config["peft_type"] == "LORA"
    # peft holds target_modules in a set, whose order changes between processes: it is written sorted
    assert config["target_modules"] == sorted(config["target_modules"])
    assert (adapter_dir / "adapter_model.safetensors").stat().st_size < 64 * 1024


def test_adapter_changes_logits(model_dir: Path, adapter_dir: Path, tokenizer) -> None:
    base = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    inputs = tokenizer("The quick brown fox", return_tensors="pt")
    with torch.no_grad():
        before = base(**inputs).logits
        adapted = PeftModel.from_pretrained(base, adapter_dir).eval()
        after = adapted(**inputs).logits
        with adapted.disable_adapter():
            disabled = adapted(**inputs).logits
    assert (after - before).abs().max() > 1e-2
    assert torch.allclose(disabled, before, atol=1e-6)


def test_adapter_build_is_deterministic(model_dir: Path, adapter_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_adapter(tmp_path / "again", model_dir, base_model_name_or_path=REPO_ID)
    assert scan_repo(again).commit == scan_repo(adapter_dir).commit


# -- the hub cache -----------------------------------------------------------------------------------


def test_cache_layout(cache_dir: Path, model_dir: Path) -> None:
    storage = cache_dir / "models--seer-testing--tiny-llama"
    commit = (storage / "refs" / "main").read_text()
    assert commit == scan_repo(model_dir).commit
    weights = (model_dir / "model.safetensors").read_bytes()
    pointer = storage / "snapshots" / commit / "model.safetensors"
    assert pointer.is_symlink() and not os.path.isabs(os.readlink(pointer))
    assert pointer.resolve() == (storage / "blobs" / hashlib.sha256(weights).hexdigest()).resolve()
    config_blob = storage / "blobs" / git_blob_sha1((model_dir / "config.json").read_bytes())
    assert config_blob.read_bytes() == (model_dir / "config.json").read_bytes()
    tree = json.loads((storage / "trees" / f"{commit}.json").read_text())
    assert tree["format_version"] == 1
    assert set(tree["files"]) == {p.name for p in model_dir.iterdir()}


def test_install_is_idempotent(cache_dir: Path, model_dir: Path) -> None:
    storage = cache_dir / "models--seer-testing--tiny-llama"
    before = sorted(p.relative_to(storage) for p in storage.rglob("*"))
    assert install_in_hub_cache(model_dir, REPO_ID, cache_dir=cache_dir) == scan_repo(model_dir).commit
    assert sorted(p.relative_to(storage) for p in storage.rglob("*")) == before


def test_install_rejects_bad_repo_ids(model_dir: Path, tmp_path: Path) -> None:
    for bad in ("a/b/c", "/name", "org/"):
        with pytest.raises(ValueError, match="invalid repo id"):
            install_in_hub_cache(model_dir, bad, cache_dir=tmp_path)


def test_offline_snapshot_download_resolves_the_repo_id(cache_dir: Path, model_dir: Path) -> None:
    assert constants.is_offline_mode()
    path = Path(hf.snapshot_download(REPO_ID, cache_dir=cache_dir))
    assert path.name == scan_repo(model_dir).commit
    assert (path / "model.safetensors").read_bytes() == (model_dir / "model.safetensors").read_bytes()


def test_offline_snapshot_download_notices_a_missing_file(model_dir: Path, tmp_path: Path) -> None:
    """The tree listing written with the snapshot lets huggingface_hub tell a partial snapshot."""
    commit = install_in_hub_cache(model_dir, REPO_ID, cache_dir=tmp_path)
    (tmp_path / "models--seer-testing--tiny-llama" / "snapshots" / commit / "tokenizer.json").unlink()
    with pytest.raises(IncompleteSnapshotError):
        hf.snapshot_download(REPO_ID, cache_dir=tmp_path)


def test_from_pretrained_by_repo_id_offline(default_cache: Path, model, tokenizer) -> None:
    cached = AutoModelForCausalLM.from_pretrained(REPO_ID)
    cached_tokenizer = AutoTokenizer.from_pretrained(REPO_ID)
    inputs = tokenizer("Hello world", return_tensors="pt")
    with torch.no_grad():
        assert torch.equal(cached(**inputs).logits, model(**inputs).logits)
    assert cached_tokenizer("Hello world")["input_ids"] == tokenizer("Hello world")["input_ids"]


def test_adapter_by_repo_id_offline(default_cache: Path, model, tokenizer) -> None:
    inputs = tokenizer("Hello world", return_tensors="pt")
    base = AutoModelForCausalLM.from_pretrained(REPO_ID)
    with torch.no_grad():
        peft_logits = PeftModel.from_pretrained(base, ADAPTER_ID)(**inputs).logits
        # transformers loads an adapter repo directly too, fetching the base it names by hub id
        direct_logits = AutoModelForCausalLM.from_pretrained(ADAPTER_ID)(**inputs).logits
        plain_logits = model(**inputs).logits
    assert torch.allclose(peft_logits, direct_logits)
    assert not torch.allclose(peft_logits, plain_logits)


@pytest.mark.e2e
def test_cache_entry_matches_a_real_download(model_dir: Path, tmp_path: Path) -> None:
    """install_in_hub_cache leaves what snapshot_download from a hub leaves: same commit, blobs and links."""
    installed = tmp_path / "installed"
    downloaded = tmp_path / "downloaded"
    install_in_hub_cache(model_dir, REPO_ID, cache_dir=installed)
    with HubServer({REPO_ID: model_dir}) as hub, hub.activate():
        hf.snapshot_download(REPO_ID, cache_dir=downloaded)

    def layout(root: Path) -> dict[str, str]:
        storage = root / "models--seer-testing--tiny-llama"
        return {
            p.relative_to(storage).as_posix(): os.readlink(p)
            if p.is_symlink()
            else hashlib.sha1(p.read_bytes(), usedforsecurity=False).hexdigest()
            for p in storage.rglob("*")
            if p.is_file()
        }

    assert layout(installed) == layout(downloaded)


def test_install_tiny_models_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    installed = install_tiny_models(cache_dir=tmp_path / "api")
    assert installed.snapshot_dir.is_dir()
    assert installed.adapter_snapshot_dir is not None
    adapter_config = json.loads((installed.adapter_snapshot_dir / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == REPO_ID

    assert (
        main(["--repo-id", "me/tiny", "--adapter-id", "me/tiny-lora", "--cache-dir", str(tmp_path / "cli")])
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert set(summary["models"]) == {"me/tiny", "me/tiny-lora"}
    # same seed, same files: the model's commit does not depend on where or under which id it is installed
    assert summary["models"]["me/tiny"]["commit"] == installed.commit
    assert Path(summary["models"]["me/tiny"]["path"], "model.safetensors").is_file()
