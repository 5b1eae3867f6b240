"""The synthetic checkpoints of the scale benchmarks (:mod:`seer.testing.scale_model`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from seer.runtime.fetch import select_files
from seer.testing.scale_model import SIZES, ScaleSize, ensure_scale_model, scale_model_key

pytestmark = pytest.mark.unit


def _weight_bytes(size: ScaleSize, vocab: int = 512) -> int:
    """float32 bytes of a Llama with tied embeddings of this shape."""
    h, i = size.hidden_size, size.intermediate_size
    kv = h // size.num_attention_heads * size.num_key_value_heads
    layer = 2 * h * h + 2 * h * kv + 3 * h * i + 2 * h
    return 4 * (size.num_hidden_layers * layer + vocab * h + h)


@pytest.mark.parametrize("name", list(SIZES))
def test_each_size_weighs_what_its_name_says(name: str) -> None:
    size = SIZES[name]
    assert size.name == name
    nominal = float(name[:-2]) * {"MB": 1e6, "GB": 1e9}[name[-2:]]
    assert abs(_weight_bytes(size) - nominal) / nominal < 0.1, _weight_bytes(size)
    assert abs(size.approx_bytes - nominal) / nominal < 0.1


def test_only_the_two_largest_are_sharded() -> None:
    assert [s.name for s in SIZES.values() if s.max_shard_size] == ["500MB", "4GB"]


def test_an_unknown_size_is_refused_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'5GB'.*0\.4MB, 50MB, 500MB"):
        ensure_scale_model(tmp_path, "5GB")
    assert not any(tmp_path.iterdir()), "nothing is made for a bad size"


def test_the_smallest_is_built_once_and_then_reused(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    first = ensure_scale_model(tmp_path, "0.4MB")
    assert first.name == f"0.4MB-{scale_model_key()}"
    weights = first / "model.safetensors"
    built_at = weights.stat().st_mtime_ns
    assert ensure_scale_model(tmp_path, "0.4MB") == first
    assert weights.stat().st_mtime_ns == built_at, "a complete build is reused, not rebuilt"
    config = json.loads((first / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"]) == (64, 2)
    assert "synthetic llama, 0.4MB" in (first / "README.md").read_text()


def test_a_sharded_build_has_an_index_that_the_fetcher_selects(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from seer.testing.tiny_model import build_tiny_model

    dest = build_tiny_model(tmp_path / "m", max_shard_size="150KB")
    shards = sorted(p.name for p in dest.glob("model-*.safetensors"))
    assert len(shards) >= 2, shards
    index = json.loads((dest / "model.safetensors.index.json").read_text())
    assert sorted(set(index["weight_map"].values())) == shards
    chosen = select_files(p.name for p in dest.iterdir())
    assert set(shards) <= set(chosen) and "model.safetensors.index.json" in chosen
