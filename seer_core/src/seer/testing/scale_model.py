"""Synthetic Llama-style checkpoints at real sizes, built offline, for the scale benchmarks.

Every other figure seer reports uses the ~0.4 MB model of :mod:`seer.testing.tiny_model`. What
matters to users loading 2-9 B parameter models is whether seer's cost stays constant as the model
grows, so the benchmarks (``tests/bench/test_bench_scale.py``) also need checkpoints large enough
for download, disk and load time to dominate. This module makes them, with no network:

* :data:`SIZES`: ``0.4MB`` (the tiny model itself), ``50MB``, ``500MB`` and ``4GB`` (about 1 B
  parameters, for ``scripts/gpu-check``) of float32 weights, each a
  ``LlamaForCausalLM`` with random weights built by :func:`~seer.testing.tiny_model.build_tiny_model`
  (same config, tokenizer and chat template as the tiny model, only wider and deeper); the
  ``500MB`` and ``4GB`` ones are sharded into four safetensors files each, with a
  ``model.safetensors.index.json``, as large checkpoints on the Hub are, so a download fetches
  several files in parallel.
* :func:`ensure_scale_model`: build one into ``<root>/<size>-<key>/`` once; a later call (any
  process: a file lock guards the build) finds it complete and returns at once. ``key`` changes
  with this module and the tiny model's builder, so an old build is never reused by mistake.
* ``python -m seer.testing.scale_model --size 50MB ROOT``: the same from a shell (prints the
  directory), which is how the benchmarks call it, keeping torch out of the pytest process.

Serve the directory with :class:`seer.testing.hub_server.HubServer` on 127.0.0.1 and point
``HF_ENDPOINT`` at it to download it through huggingface_hub as from the Hub.

torch and transformers (the ``models`` extra) are imported only when a model is built.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["SIZES", "ScaleSize", "build_scale_model", "ensure_scale_model", "main", "scale_model_key"]

_COMPLETE = ".complete"


@dataclass(frozen=True)
class ScaleSize:
    """The shape of one synthetic checkpoint; ``approx_bytes`` is what its weights weigh."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    approx_bytes: int
    max_shard_size: str | None = None

    def shape(self) -> dict[str, int]:
        """The keyword arguments :func:`~seer.testing.tiny_model.build_tiny_model` takes."""
        fields = asdict(self)
        for name in ("name", "approx_bytes", "max_shard_size"):
            fields.pop(name)
        return fields


#: The sizes the scale benchmarks run, smallest first (float32 weights; the vocabulary is ~500).
SIZES: dict[str, ScaleSize] = {
    size.name: size
    for size in (
        ScaleSize("0.4MB", 64, 128, 2, 4, 2, approx_bytes=400_000),
        ScaleSize("50MB", 512, 1024, 5, 8, 4, approx_bytes=48_000_000),
        ScaleSize("500MB", 1024, 3072, 10, 16, 8, approx_bytes=505_000_000, max_shard_size="128MB"),
        # About 1 B parameters (TinyLlama's shape): what scripts/gpu-check loads onto a real GPU.
        # Not among the benchmarks' sizes: building it takes a machine with ~10 GB of memory free.
        ScaleSize("4GB", 2048, 5632, 22, 32, 4, approx_bytes=3_880_000_000, max_shard_size="1GB"),
    )
}


def _size(name: str) -> ScaleSize:
    try:
        return SIZES[name]
    except KeyError:
        raise ValueError(f"unknown checkpoint size {name!r}; expected one of {', '.join(SIZES)}") from None


def scale_model_key() -> str:
    """What a build depends on: this module's source and the tiny model's builder."""
    from seer.testing import tiny_model

    digest = hashlib.sha256()
    for module_file in (__file__, tiny_model.__file__):
        digest.update(Path(module_file).read_bytes())
    return digest.hexdigest()[:12]


def build_scale_model(dest_dir: str | os.PathLike[str], size: str) -> Path:
    """Build the checkpoint ``size`` (a key of :data:`SIZES`) into ``dest_dir``; return the directory."""
    from seer.testing.tiny_model import build_tiny_model

    spec = _size(size)
    dest = build_tiny_model(dest_dir, max_shard_size=spec.max_shard_size, **spec.shape())
    (dest / "README.md").write_text(
        f"# synthetic llama, {spec.name} (seer testing)\n\n"
        f"A {spec.num_hidden_layers}-layer Llama-style causal LM (hidden size {spec.hidden_size}) with\n"
        "random weights, built offline by `seer.testing.scale_model` for seer's scale benchmarks.\n"
    )
    return dest


def ensure_scale_model(root: str | os.PathLike[str], size: str) -> Path:
    """The checkpoint ``size`` under ``root``, built there first if no complete build is there.

    Safe to call from several processes at once: one builds (into a temporary folder, renamed
    when complete), the others wait for it and reuse its result."""
    from filelock import FileLock

    spec = _size(size)
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    dest = base / f"{spec.name}-{scale_model_key()}"
    with FileLock(str(dest) + ".lock"):
        if (dest / _COMPLETE).is_file():
            return dest
        partial = dest.with_name(dest.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(dest, ignore_errors=True)
        build_scale_model(partial, size)
        # The marker is hidden, so HubServer (which skips hidden entries) never serves it.
        (partial / _COMPLETE).write_text("ok\n")
        partial.rename(dest)
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m seer.testing.scale_model --size SIZE ROOT``: build (once) and print the folder."""
    parser = argparse.ArgumentParser(
        prog="python -m seer.testing.scale_model",
        description="Build a synthetic Llama-style checkpoint of a given size offline (once per ROOT) "
        "and print its folder.",
    )
    parser.add_argument("root", help="folder holding the builds (reused across calls)")
    parser.add_argument("--size", required=True, choices=list(SIZES), help="which checkpoint")
    args = parser.parse_args(argv)
    print(ensure_scale_model(args.root, args.size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
