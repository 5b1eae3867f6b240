"""seer-toolkit's hooks against plain transformers, on the largest tiny model the toolkit tests use
(a Llama of width 256 and 4 layers here, so the forward pass is not all Python overhead), on one
CPU thread.

What each row means:

* ``forward + steering hook``: ``with create_steering_hook(...): model(**inputs)`` against a bare
  ``model(**inputs)``; the issue's target is a ratio of at most 1.05.
* ``get_layer_activations``: one layer's last-token activation (tokenizing included) against
  tokenizing and reading ``output_hidden_states[layer + 1]`` from the same forward pass.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _harness import BenchReport, compare

GROUP = "toolkit"
ROOT = Path(__file__).resolve().parents[2]
TEXT = (
    "Interpretability research asks what a model computes and how. We read activations, steer "
    "hidden states, patch attention heads and train sparse autoencoders on the residual stream."
)
LAYER = 2


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    seer_toolkit = pytest.importorskip("seer_toolkit")
    from seer.testing.tiny_model import build_tiny_model

    # The toolkit's modules as a kernel has them, and the toolkit tests' model builder.
    sys.path[:0] = [str(seer_toolkit.MODULES_DIR), str(ROOT / "contrib" / "toolkit" / "tests")]
    from _tiny_archs import build_model

    tokenizer = transformers.AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tok")))
    # Inference, as in the kernel; one thread, so both sides are not at the mercy of how a
    # shared machine schedules torch's thread pool. Both sides alike.
    threads = torch.get_num_threads()
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    try:
        yield build_model("llama", len(tokenizer), hidden=256, layers=4), tokenizer
    finally:
        torch.set_grad_enabled(True)
        torch.set_num_threads(threads)


def test_bench_steering_hook(bench_report: BenchReport, tiny: tuple[Any, Any]) -> None:
    import torch
    from steering_hook import create_steering_hook

    model, tokenizer = tiny
    inputs = tokenizer(TEXT, return_tensors="pt")
    vector = torch.randn(model.config.hidden_size)
    plain = model(**inputs).logits

    def steered() -> Any:
        with create_steering_hook(model, LAYER, vector, strength=4.0):
            return model(**inputs).logits

    cmp = compare(
        "forward + steering hook",
        seer=steered,
        baseline=lambda: model(**inputs).logits,
        repeat=100,
        warmup=5,
        check_seer=lambda out: not torch.allclose(out, plain) or pytest.fail("steering changed nothing"),
        check_baseline=lambda out: torch.equal(out, plain) or pytest.fail("the hook was left on"),
        note=f"{inputs['input_ids'].shape[1]} tokens, Llama 256 wide, 4 layers; target ratio <= 1.05",
    )
    bench_report.add(GROUP, cmp)


def test_bench_get_layer_activations(bench_report: BenchReport, tiny: tuple[Any, Any]) -> None:
    import torch
    from extract_activations import get_layer_activations

    model, tokenizer = tiny

    def hidden_states() -> Any:
        inputs = tokenizer(TEXT, return_tensors="pt")
        return model(**inputs, output_hidden_states=True).hidden_states[LAYER + 1][0, -1]

    expected = hidden_states()
    cmp = compare(
        "get_layer_activations",
        seer=lambda: get_layer_activations(model, tokenizer, TEXT, layer=LAYER),
        baseline=hidden_states,
        repeat=100,
        warmup=5,
        check_seer=lambda out: torch.equal(out, expected) or pytest.fail("not output_hidden_states"),
        note="one layer by a hook vs output_hidden_states[layer + 1], tokenizing included",
    )
    bench_report.add(GROUP, cmp)
