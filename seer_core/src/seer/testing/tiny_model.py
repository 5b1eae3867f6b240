"""A tiny causal LM, tokenizer and LoRA adapter built offline, and a way to put them in the Hub cache.

Tests, examples and the README quickstart need a real model that loads with ``from_pretrained`` by repo
id, generates, exposes hidden states and takes forward hooks, but no test may reach a model hub. This
module builds one from nothing in well under a second (after imports):

* :func:`build_tiny_model`: a 2-layer Llama-style ``LlamaForCausalLM`` (hidden size 64, about 400 KB of
  float32 safetensors) and a byte-level BPE tokenizer trained on a built-in paragraph, with
  ``<|bos|>`` / ``<|eos|>`` / ``<|pad|>`` tokens and a small chat template. Its weights are random: it
  produces gibberish, deterministically (same seed, same bytes).
* :func:`build_tiny_adapter`: a LoRA adapter for it (peft) whose weights are all non-zero, so applying it
  measurably changes the logits.
* :func:`install_in_hub_cache`: place any directory in the huggingface_hub cache
  (``models--org--name/{blobs,snapshots/<commit>,refs/<revision>,trees/<commit>.json}``) exactly as
  ``snapshot_download`` would have left it, so that with ``HF_HUB_OFFLINE=1`` both
  ``snapshot_download(repo_id)`` and ``from_pretrained(repo_id)`` resolve it.
* :func:`install_tiny_models` and ``python -m seer.testing.tiny_model``: build both and install them under
  ``seer-testing/tiny-llama`` and ``seer-testing/tiny-llama-lora``.

Commit hashes and blob names are derived from file contents (see :func:`seer.testing.hub_server.scan_repo`),
so the cache entry written here and the repo :class:`~seer.testing.hub_server.HubServer` serves from the
same directory agree.

torch, transformers, tokenizers and peft (the ``models`` extra) are imported only when a model is built.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from seer.testing.hub_server import RepoSnapshot, scan_repo

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

__all__ = [
    "CHAT_TEMPLATE",
    "DEFAULT_ADAPTER_ID",
    "DEFAULT_REPO_ID",
    "SPECIAL_TOKENS",
    "TinyModels",
    "build_tiny_adapter",
    "build_tiny_model",
    "hub_cache_dir",
    "install_in_hub_cache",
    "install_tiny_models",
    "main",
]

DEFAULT_REPO_ID = "seer-testing/tiny-llama"
DEFAULT_ADAPTER_ID = "seer-testing/tiny-llama-lora"

#: Special tokens, in id order: ``<|pad|>`` is 0, ``<|bos|>`` 1, ``<|eos|>`` 2, then the chat roles.
SPECIAL_TOKENS: tuple[str, ...] = ("<|pad|>", "<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>")

#: Each message is ``<|role|>content<|eos|>``; a generation prompt opens an ``<|assistant|>`` turn.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)

# The tokenizer's training text: enough for a few hundred merges of common English.
_CORPUS = """\
The quick brown fox jumps over the lazy dog. Hello world! This is a tiny language model for tests.
Interpretability research asks what a model computes and how. We read activations, steer hidden states,
patch attention heads and train sparse autoencoders on the residual stream of a transformer.
A sandbox is a machine with packages installed, models downloaded once and cached, and a kernel ready.
The user asks a question and the assistant answers it. The system prompt sets the rules of the chat.
One, two, three, four, five, six, seven, eight, nine, ten. Red, green, blue, yellow, black and white.
Paris is the capital of France. Water boils at one hundred degrees. The cat sat on the mat in the sun.
Models are loaded from the cache; nothing is downloaded when the files are already there.
"""


def build_tiny_model(
    dest_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_hidden_layers: int = 2,
    num_attention_heads: int = 4,
    num_key_value_heads: int = 2,
    vocab_size: int = 512,
    max_position_embeddings: int = 512,
    max_shard_size: int | str | None = None,
) -> Path:
    """Build a tiny random ``LlamaForCausalLM`` and its tokenizer into ``dest_dir``; return the directory.

    The directory holds ``config.json``, ``generation_config.json``, ``model.safetensors`` (float32, tied
    embeddings), ``tokenizer.json``, ``tokenizer_config.json``, ``chat_template.jinja`` and a README, and
    loads with ``AutoModelForCausalLM`` / ``AutoTokenizer`` (the tokenizer pads on the left, ready for
    batched generation). ``vocab_size`` is an upper bound: the model's vocabulary is whatever the BPE
    trainer reaches on the built-in text. The same arguments give byte-identical files, and the caller's
    torch RNG state is left untouched.
    ``max_shard_size`` (``"128MB"``) splits the weights into shards with a
    ``model.safetensors.index.json``, as large checkpoints on the Hub are
    (see :mod:`seer.testing.scale_model`).
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    tokenizer = _build_tokenizer(vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads,
        max_position_embeddings=max_position_embeddings,
        initializer_range=0.1,  # larger than usual so that random logits are not all alike
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.do_sample = False
    with _quiet():
        if max_shard_size:
            model.save_pretrained(dest, max_shard_size=max_shard_size)
        else:
            model.save_pretrained(dest)
        tokenizer.save_pretrained(dest)
    (dest / "README.md").write_text(
        "# tiny-llama (seer testing)\n\n"
        f"A {num_hidden_layers}-layer Llama-style causal LM with random weights (seed {seed}),\n"
        "built offline by `seer.testing.tiny_model` for tests. It generates gibberish.\n"
    )
    return dest


def build_tiny_adapter(
    dest_dir: str | os.PathLike[str],
    base_model_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    base_model_name_or_path: str | None = None,
    r: int = 4,
    target_modules: Sequence[str] = ("q_proj", "v_proj"),
) -> Path:
    """Build a LoRA adapter for the model in ``base_model_dir`` into ``dest_dir``; return the directory.

    Both LoRA matrices are random (``init_lora_weights=False``), so unlike a freshly initialised adapter
    this one changes the logits. ``adapter_config.json`` names ``base_model_name_or_path`` as its base
    (default: ``base_model_dir``): pass the base's hub id when the adapter is to be installed next to it.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    with _quiet():
        base = AutoModelForCausalLM.from_pretrained(base_model_dir)
    lora = LoraConfig(
        r=r,
        lora_alpha=2 * r,
        lora_dropout=0.0,
        target_modules=list(target_modules),
        init_lora_weights=False,
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]), _quiet():
        torch.manual_seed(seed)
        peft_model = get_peft_model(base, lora)
        peft_model.save_pretrained(str(dest))
    config_path = dest / "adapter_config.json"
    adapter_config = json.loads(config_path.read_text())
    adapter_config["base_model_name_or_path"] = base_model_name_or_path or str(base_model_dir)
    # peft keeps target_modules as a set: sort it so that the file (and the commit hash) is reproducible.
    if isinstance(adapter_config.get("target_modules"), list):
        adapter_config["target_modules"] = sorted(adapter_config["target_modules"])
    config_path.write_text(json.dumps(adapter_config, indent=2, sort_keys=True) + "\n")
    # peft writes a long template model card; replace it with a short one.
    (dest / "README.md").write_text(
        "# tiny-llama-lora (seer testing)\n\n"
        f"A random rank-{r} LoRA adapter (seed {seed}) for "
        f"`{adapter_config['base_model_name_or_path']}`, built offline by `seer.testing.tiny_model`.\n"
    )
    return dest


def hub_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The huggingface_hub cache directory: ``cache_dir`` if given, else the one huggingface_hub uses.

    Without huggingface_hub installed, falls back to ``HF_HUB_CACHE``, then ``HF_HOME/hub``, then
    ``~/.cache/huggingface/hub``.
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    try:
        from huggingface_hub import constants
    except ImportError:
        if "HF_HUB_CACHE" in os.environ:
            return Path(os.environ["HF_HUB_CACHE"]).expanduser()
        home = os.environ.get("HF_HOME") or os.path.join(
            os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface"
        )
        return Path(home, "hub").expanduser()
    return Path(constants.HF_HUB_CACHE).expanduser()


def install_in_hub_cache(
    src_dir: str | os.PathLike[str],
    repo_id: str,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    revision: str = "main",
) -> str:
    """Place the files of ``src_dir`` in the Hub cache as ``repo_id`` at ``revision``; return the commit hash.

    Writes what ``snapshot_download`` leaves behind, in huggingface_hub 2.x's layout:

    * ``blobs/<etag>``: each file's content, named by its sha256 for LFS files (``*.safetensors``,
      ``*.bin``, ...) and by its git blob sha1 otherwise, as the Hub's ETag;
    * ``snapshots/<commit>/<path>``: relative symlinks to the blobs (copies where symlinks fail);
    * ``refs/<revision>``: the commit hash (unless ``revision`` is the commit hash itself);
    * ``trees/<commit>.json``: the file listing that lets offline ``snapshot_download`` check that the
      snapshot is complete.

    The commit hash is derived from file paths and contents, so installing the same files again is a
    no-op and gives the same hash. Only model repos are supported.
    """
    if repo_id.count("/") > 1 or not all(repo_id.split("/")):
        raise ValueError(f"invalid repo id {repo_id!r}: expected 'name' or 'org/name'")
    snapshot = scan_repo(src_dir)
    storage = hub_cache_dir(cache_dir) / ("models--" + repo_id.replace("/", "--"))
    blobs = storage / "blobs"
    snapshot_dir = storage / "snapshots" / snapshot.commit
    blobs.mkdir(parents=True, exist_ok=True)
    for info in snapshot.files.values():
        blob = blobs / info.etag
        if not (blob.is_file() and blob.stat().st_size == info.size):
            _atomic_copy(info.local_path, blob)
        pointer = snapshot_dir / info.path
        pointer.parent.mkdir(parents=True, exist_ok=True)
        if pointer.is_symlink() or pointer.exists():
            pointer.unlink()
        try:
            pointer.symlink_to(os.path.relpath(blob, pointer.parent))
        except OSError:
            shutil.copyfile(blob, pointer)
    if revision != snapshot.commit:
        ref = storage / "refs" / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(snapshot.commit)
    _write_tree_cache(storage, snapshot)
    return snapshot.commit


@dataclass(frozen=True)
class TinyModels:
    """What :func:`install_tiny_models` put in the cache."""

    cache_dir: Path
    repo_id: str
    commit: str
    adapter_id: str | None
    adapter_commit: str | None

    @property
    def snapshot_dir(self) -> Path:
        """The model's snapshot folder in the hub cache."""
        return self.cache_dir / ("models--" + self.repo_id.replace("/", "--")) / "snapshots" / self.commit

    @property
    def adapter_snapshot_dir(self) -> Path | None:
        """The adapter's snapshot folder in the hub cache (None without an adapter)."""
        if self.adapter_id is None or self.adapter_commit is None:
            return None
        folder = "models--" + self.adapter_id.replace("/", "--")
        return self.cache_dir / folder / "snapshots" / self.adapter_commit


def install_tiny_models(
    *,
    repo_id: str = DEFAULT_REPO_ID,
    adapter_id: str | None = DEFAULT_ADAPTER_ID,
    cache_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
) -> TinyModels:
    """Build the tiny model (and, unless ``adapter_id`` is None, its adapter) and install them in the cache.

    The adapter's ``base_model_name_or_path`` is ``repo_id``, so ``PeftModel.from_pretrained`` and
    ``AutoModelForCausalLM.from_pretrained(adapter_id)`` find the base by hub id, offline.
    """
    cache = hub_cache_dir(cache_dir)
    with tempfile.TemporaryDirectory(prefix="seer-tiny-model-") as work:
        model_dir = build_tiny_model(Path(work, "model"), seed=seed)
        commit = install_in_hub_cache(model_dir, repo_id, cache_dir=cache)
        adapter_commit = None
        if adapter_id is not None:
            adapter_dir = build_tiny_adapter(
                Path(work, "adapter"), model_dir, seed=seed, base_model_name_or_path=repo_id
            )
            adapter_commit = install_in_hub_cache(adapter_dir, adapter_id, cache_dir=cache)
    return TinyModels(
        cache_dir=cache, repo_id=repo_id, commit=commit, adapter_id=adapter_id, adapter_commit=adapter_commit
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m seer.testing.tiny_model``: build the tiny model and adapter, install them in the cache."""
    parser = argparse.ArgumentParser(
        prog="python -m seer.testing.tiny_model",
        description="Build a tiny random Llama-style model and a LoRA adapter for it, offline, and install "
        "them in the Hugging Face Hub cache so that from_pretrained(<repo id>) works with HF_HUB_OFFLINE=1.",
    )
    parser.add_argument(
        "--repo-id", default=DEFAULT_REPO_ID, help="hub id of the model (default: %(default)s)"
    )
    parser.add_argument(
        "--adapter-id", default=DEFAULT_ADAPTER_ID, help="hub id of the LoRA adapter (default: %(default)s)"
    )
    parser.add_argument("--no-adapter", action="store_true", help="do not build the adapter")
    parser.add_argument("--cache-dir", default=None, help="hub cache directory (default: huggingface_hub's)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    args = parser.parse_args(argv)
    installed = install_tiny_models(
        repo_id=args.repo_id,
        adapter_id=None if args.no_adapter else args.adapter_id,
        cache_dir=args.cache_dir,
        seed=args.seed,
    )
    models: dict[str, dict[str, str | None]] = {
        installed.repo_id: {"commit": installed.commit, "path": str(installed.snapshot_dir)}
    }
    if installed.adapter_id is not None:
        models[installed.adapter_id] = {
            "commit": installed.adapter_commit,
            "path": str(installed.adapter_snapshot_dir),
        }
    print(json.dumps({"cache_dir": str(installed.cache_dir), "models": models}, indent=2))
    return 0


# -- helpers -----------------------------------------------------------------------------------------


def _build_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (any text encodes; no unknown token) trained on :data:`_CORPUS`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_CORPUS.splitlines(), trainer)
    bos = SPECIAL_TOKENS[1]
    # Prepend <|bos|> when encoding with add_special_tokens=True, as Llama tokenizers do.
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, backend.token_to_id(bos))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=SPECIAL_TOKENS[0],
        bos_token=SPECIAL_TOKENS[1],
        eos_token=SPECIAL_TOKENS[2],
        chat_template=CHAT_TEMPLATE,
        model_max_length=512,
        padding_side="left",  # batched generation with a decoder-only model wants left padding
        clean_up_tokenization_spaces=False,
    )


def _atomic_copy(src: Path, dst: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=dst.name + ".", suffix=".incomplete")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dst)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _write_tree_cache(storage: Path, snapshot: RepoSnapshot) -> None:
    """Write ``trees/<commit>.json`` in huggingface_hub's tree-cache format (``format_version`` 1)."""
    files: dict[str, dict[str, object]] = {}
    for path, info in sorted(snapshot.files.items()):
        entry: dict[str, object] = {"size": info.size, "blob_id": info.blob_id}
        if info.lfs:
            entry.update(lfs_sha256=info.sha256, lfs_size=info.size)
        files[path] = entry
    trees = storage / "trees"
    trees.mkdir(parents=True, exist_ok=True)
    target = trees / f"{snapshot.commit}.json"
    fd, tmp = tempfile.mkstemp(dir=trees, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"format_version": 1, "files": files}, fh, indent=1)
    os.replace(tmp, target)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the warnings and progress bars that building a throwaway model prints."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from transformers.utils import logging as hf_logging
        except ImportError:  # pragma: no cover - transformers is imported before this is used
            yield
            return
        bars_were_enabled = hf_logging.is_progress_bar_enabled()
        verbosity = hf_logging.get_verbosity()
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
        try:
            yield
        finally:
            hf_logging.set_verbosity(verbosity)
            if bars_were_enabled:
                hf_logging.enable_progress_bar()


if __name__ == "__main__":
    sys.exit(main())
