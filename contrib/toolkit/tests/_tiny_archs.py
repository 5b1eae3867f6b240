"""Tiny offline causal LMs of several architectures, built from small configs with random weights
(no hub is reached): what the toolkit's tests and benchmarks run on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import transformers

#: What the tests build: every architecture the issue names, with three decoder layers each.
ARCHITECTURES = ("llama", "gemma2", "qwen2", "gpt2", "gpt_neox", "peft-llama")
#: Architectures only the layer-resolution test builds.
MORE_ARCHITECTURES = ("mistral", "gemma", "phi")
LAYERS = 3


def tiny_config(arch: str, vocab_size: int, hidden: int = 32, layers: int = LAYERS) -> Any:
    """A small config of ``arch`` (``hidden`` wide, ``layers`` deep)."""
    t = transformers
    common = {"vocab_size": vocab_size, "num_hidden_layers": layers, "num_attention_heads": 4}
    gqa = {**common, "hidden_size": hidden, "intermediate_size": 2 * hidden, "num_key_value_heads": 2}
    builders: dict[str, Callable[[], Any]] = {
        "llama": lambda: t.LlamaConfig(**gqa),
        "mistral": lambda: t.MistralConfig(**gqa),
        "qwen2": lambda: t.Qwen2Config(**gqa),
        "gemma": lambda: t.GemmaConfig(**gqa, head_dim=hidden // 4),
        # Gemma 2's logit soft-capping is on: the logit lens must apply it too.
        "gemma2": lambda: t.Gemma2Config(**gqa, head_dim=hidden // 4, final_logit_softcapping=30.0),
        "phi": lambda: t.PhiConfig(**common, hidden_size=hidden, intermediate_size=2 * hidden),
        "gpt2": lambda: t.GPT2Config(vocab_size=vocab_size, n_embd=hidden, n_layer=layers, n_head=4),
        "gpt_neox": lambda: t.GPTNeoXConfig(**common, hidden_size=hidden, intermediate_size=2 * hidden),
    }
    return builders[arch]()


def build_model(arch: str, vocab_size: int, *, hidden: int = 32, layers: int = LAYERS, seed: int = 0) -> Any:
    """A tiny random causal LM of ``arch`` in eval mode; ``peft-<arch>`` wraps it in a LoRA
    adapter whose weights are non-zero (so it changes the outputs)."""
    wrap = arch.startswith("peft-")
    base = arch.removeprefix("peft-")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(
            tiny_config(base, vocab_size, hidden=hidden, layers=layers)
        )
        if wrap:
            import peft

            lora = peft.LoraConfig(
                r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False, task_type="CAUSAL_LM"
            )
            model = peft.get_peft_model(model, lora)
    return model.eval()
