"""Every toolkit function on tiny random models of Llama, Gemma 2, Qwen 2, GPT-2, GPT-NeoX and a
PEFT-wrapped Llama: activations match ``output_hidden_states``, steering at strength 0 is a no-op
and otherwise changes the logits, patching a prompt into itself is a no-op, the lens of the last
layer is the model's own logits, ablation does what it says, and hooks come off (on exceptions
too)."""

from __future__ import annotations

from typing import Any

import ablation
import activation_cache
import activation_patching
import extract_activations
import generate_response
import logit_lens
import model_layers
import pytest
import steering_hook
import torch
from _tiny_archs import LAYERS, MORE_ARCHITECTURES, build_model
from model_layers import UnsupportedModelError, decoder_layers

pytestmark = pytest.mark.unit

TEXT = "The quick brown fox jumps over the lazy dog"
OTHER = "Interpretability research asks what a model does"


def hidden_states(model: Any, tokenizer: Any, text: str) -> tuple[Any, torch.Tensor]:
    inputs = model_layers.encode(model, tokenizer, text)
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True)
    return out.hidden_states, out.logits


def logits(model: Any, tokenizer: Any, text: str) -> torch.Tensor:
    return hidden_states(model, tokenizer, text)[1]


def no_hooks(model: Any) -> bool:
    """No toolkit hook is left on any layer (transformers 5 keeps hooks of its own there)."""
    return not any(
        isinstance(getattr(fn, "__self__", None), model_layers.LayerHook)
        for layer in decoder_layers(model)
        for fn in layer._forward_hooks.values()
    )


# --- finding layers --------------------------------------------------------------------------
@pytest.mark.parametrize("arch", MORE_ARCHITECTURES)
def test_layers_of_more_architectures(arch: str) -> None:
    model = build_model(arch, 64)
    assert model_layers.num_layers(model) == LAYERS
    assert model_layers.final_norm(model) is not None


def test_layers_found_on_every_architecture(arch_model: tuple[str, Any]) -> None:
    arch, model = arch_model
    layers = decoder_layers(model)
    assert len(layers) == LAYERS
    assert model_layers.get_layer(model, -1) is layers[-1]
    if arch.startswith("peft-"):
        assert layers is decoder_layers(model.get_base_model())


def test_unknown_model_is_named() -> None:
    class Mystery(torch.nn.Module):
        pass

    with pytest.raises(UnsupportedModelError, match="Mystery"):
        decoder_layers(Mystery())


def test_layer_out_of_range_names_the_range(arch_model: tuple[str, Any]) -> None:
    _, model = arch_model
    with pytest.raises(IndexError, match=f"has {LAYERS} decoder layers"):
        model_layers.get_layer(model, LAYERS)
    with pytest.raises(TypeError, match="must be an int"):
        model_layers.get_layer(model, "1")  # type: ignore[arg-type]


# --- activations -----------------------------------------------------------------------------
def test_activations_equal_hidden_states(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    states, _ = hidden_states(model, tokenizer, TEXT)
    for layer in range(LAYERS - 1):  # the last entry of hidden_states has the final norm applied
        every = extract_activations.get_layer_activations(model, tokenizer, TEXT, layer=layer, position="all")
        assert torch.equal(every, states[layer + 1][0])
        last = extract_activations.get_layer_activations(model, tokenizer, TEXT, layer=layer)
        assert torch.equal(last, states[layer + 1][0, -1])
    final = extract_activations.get_layer_activations(model, tokenizer, TEXT, layer=-1, position="all")
    with torch.no_grad():
        normed = model_layers.final_norm(model)(final)
    torch.testing.assert_close(normed, states[-1][0])
    assert no_hooks(model)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("position", ["last", "mean", 1, -2])
def test_batched_activations_match_one_at_a_time(
    arch_model: tuple[str, Any], tokenizer: Any, side: str, position: Any
) -> None:
    """Whichever side the tokenizer pads on (GPT-2's absolute positions included)."""
    _, model = arch_model
    texts = [TEXT, "Hello world", OTHER]
    tokenizer.padding_side, before = side, tokenizer.padding_side
    try:
        batched = extract_activations.get_layer_activations(
            model, tokenizer, texts, layer=1, position=position, batch_size=2
        )
    finally:
        tokenizer.padding_side = before
    singles = [extract_activations.get_layer_activations(model, tokenizer, t, 1, position) for t in texts]
    assert batched.shape == (3, model_layers.hidden_size(model))
    torch.testing.assert_close(batched, torch.stack(singles), atol=1e-4, rtol=1e-4)


def test_position_outside_a_text_is_named(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    with pytest.raises(IndexError, match="outside text 1"):
        extract_activations.get_layer_activations(model, tokenizer, [TEXT, "Hi"], 0, position=5)
    with pytest.raises(ValueError, match="position must be"):
        extract_activations.get_layer_activations(model, tokenizer, TEXT, 0, position="first")


def test_a_tokenizer_without_pad_token_batches_and_is_left_as_it_was(
    arch_model: tuple[str, Any], plain_tokenizer: Any
) -> None:
    _, model = arch_model
    acts = extract_activations.get_layer_activations(model, plain_tokenizer, [TEXT, "Hi"], layer=0)
    assert acts.shape[0] == 2
    assert plain_tokenizer.pad_token is None and plain_tokenizer.padding_side == "right"


def test_cache_is_one_forward_pass_over_several_layers(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    calls = []
    handle = model.register_forward_hook(lambda *args: calls.append(1))
    try:
        cache = activation_cache.cache_activations(model, tokenizer, TEXT, layers=[0, 1, -1])
    finally:
        handle.remove()
    assert len(calls) == 1 and sorted(cache) == [0, 1, LAYERS - 1]
    states, _ = hidden_states(model, tokenizer, TEXT)
    assert torch.equal(cache[0], states[1]) and torch.equal(cache[1], states[2])
    assert cache.attention_mask is not None and no_hooks(model)


def test_record_activations_during_generate(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    inputs = model_layers.encode(model, tokenizer, TEXT)
    with activation_cache.record_activations(model, layers=0) as cache, torch.no_grad():
        model.generate(**inputs, max_new_tokens=3, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert len(cache.history[0]) == 3  # the prompt, then one pass per token after the first
    assert cache.history[0][0].shape[1] == inputs["input_ids"].shape[1]
    assert no_hooks(model)


# --- steering --------------------------------------------------------------------------------
def test_steering(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    # The seed's recipe: a contrast pair's difference at one layer.
    vector = extract_activations.get_layer_activations(
        model, tokenizer, "I strongly agree", 1
    ) - extract_activations.get_layer_activations(model, tokenizer, "I disagree", 1)
    plain = logits(model, tokenizer, TEXT)
    with steering_hook.create_steering_hook(model, layer_idx=1, vector=vector, strength=0.0):
        assert torch.equal(logits(model, tokenizer, TEXT), plain)
    with steering_hook.create_steering_hook(model, layer_idx=1, vector=vector, strength=4.0):
        steered = logits(model, tokenizer, TEXT)
    assert not torch.allclose(steered, plain, atol=1e-4)
    assert no_hooks(model)
    assert torch.equal(logits(model, tokenizer, TEXT), plain)


def test_steering_hook_as_a_handle_and_on_exceptions(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    vector = torch.ones(model_layers.hidden_size(model))
    handle = steering_hook.create_steering_hook(model, 0, vector, strength=2.0)
    assert not no_hooks(model)
    handle.remove()
    handle.remove()  # idempotent
    assert no_hooks(model)
    with pytest.raises(RuntimeError, match="boom"), steering_hook.create_steering_hook(model, 0, vector):
        raise RuntimeError("boom")
    assert no_hooks(model)


def test_steering_vector_of_the_wrong_size_is_named(arch_model: tuple[str, Any]) -> None:
    _, model = arch_model
    with pytest.raises(ValueError, match=r"steering vector has shape \(7,\).*hidden size is 32"):
        steering_hook.create_steering_hook(model, 0, torch.ones(7))
    assert no_hooks(model)


# --- patching --------------------------------------------------------------------------------
def test_patching_a_prompt_into_itself_changes_nothing(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    clean = logits(model, tokenizer, TEXT)
    for layer in range(LAYERS):
        patched = activation_patching.patch_activations(model, tokenizer, TEXT, TEXT, layer=layer)
        assert torch.equal(patched, clean)
    assert no_hooks(model)


def test_patching_another_prompt(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    target = logits(model, tokenizer, OTHER)
    # Different lengths: only some positions can be patched, and the error says so.
    with pytest.raises(ValueError, match="positions="):
        activation_patching.patch_activations(model, tokenizer, TEXT, OTHER + " again", layer=0)
    patched = activation_patching.patch_activations(model, tokenizer, TEXT, OTHER, layer=1, positions=[-1])
    assert torch.equal(patched[:, :-1], target[:, :-1])  # causal: earlier tokens untouched
    assert not torch.allclose(patched[:, -1], target[:, -1], atol=1e-4)
    assert no_hooks(model)


# --- logit lens ------------------------------------------------------------------------------
def test_logit_lens_of_the_last_layer_is_the_models_logits(
    arch_model: tuple[str, Any], tokenizer: Any
) -> None:
    _, model = arch_model
    final = logits(model, tokenizer, TEXT)[0, -1]
    lens = logit_lens.lens_logits(model, tokenizer, TEXT)
    assert sorted(lens) == list(range(LAYERS))
    torch.testing.assert_close(lens[LAYERS - 1], final)
    rows = logit_lens.logit_lens(model, tokenizer, TEXT, top_k=3)
    assert [r["layer"] for r in rows] == list(range(LAYERS))
    assert rows[-1]["token_ids"][0] == int(final.argmax())
    assert all(len(r["tokens"]) == 3 and r["probs"] == sorted(r["probs"], reverse=True) for r in rows)


# --- ablation --------------------------------------------------------------------------------
def test_ablate_layer_hands_on_its_input(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    plain = logits(model, tokenizer, TEXT)
    with ablation.ablate_layer(model, 1):
        ablated = logits(model, tokenizer, TEXT)
        # Recorded by hooks added after the ablation's (transformers 5 records hidden_states with
        # a hook of its own, added at the first forward pass, so it sees the layer's output before
        # a toolkit hook changes it).
        cache = activation_cache.cache_activations(model, tokenizer, TEXT, layers=[0, 1])
    assert torch.equal(cache[1], cache[0])
    assert not torch.allclose(ablated, plain, atol=1e-4)
    assert no_hooks(model)


def test_ablate_direction_leaves_nothing_along_it(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    direction = torch.randn(model_layers.hidden_size(model), generator=torch.Generator().manual_seed(0))
    unit = direction / direction.norm()
    with ablation.ablate_direction(model, direction):
        cache = activation_cache.cache_activations(model, tokenizer, TEXT)
    for acts in cache.values():
        assert float((acts @ unit).abs().max()) < 1e-4
    assert no_hooks(model)
    with pytest.raises(ValueError, match="zero"):
        ablation.ablate_direction(model, torch.zeros_like(direction))
    assert no_hooks(model)


def test_mean_ablation_replaces_the_contribution(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    mean = torch.full((model_layers.hidden_size(model),), 0.5)
    with ablation.mean_ablate_layer(model, 1, mean):
        cache = activation_cache.cache_activations(model, tokenizer, TEXT, layers=[0, 1])
    torch.testing.assert_close(cache[1], cache[0] + 0.5)
    assert no_hooks(model)


# --- generation ------------------------------------------------------------------------------
def test_generate_response(arch_model: tuple[str, Any], tokenizer: Any) -> None:
    _, model = arch_model
    one = generate_response.generate_response(model, tokenizer, "Hello world", max_tokens=5, temperature=0)
    again = generate_response.generate_response(model, tokenizer, "Hello world", max_tokens=5, temperature=0)
    assert isinstance(one, str) and one == again
    full = generate_response.generate_response(
        model, tokenizer, "Hello world", max_tokens=5, temperature=0, include_prompt=True
    )
    assert full.endswith(one) and "Hello world" in full
    many = generate_response.generate_response(model, tokenizer, ["Hi", TEXT], max_tokens=4, temperature=0.7)
    assert isinstance(many, list) and len(many) == 2
    talk = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    assert isinstance(generate_response.generate_response(model, tokenizer, talk, max_tokens=3), str)


def test_prompts_go_through_the_chat_template_when_there_is_one(tokenizer: Any, plain_tokenizer: Any) -> None:
    templated = generate_response.format_prompt(tokenizer, "Hi", system="Be brief")
    assert templated == "<|bos|><|system|>Be brief<|eos|><|user|>Hi<|eos|><|assistant|>"
    assert generate_response.format_prompt(tokenizer, "Hi", chat=False) == "Hi"
    assert generate_response.format_prompt(plain_tokenizer, "Hi") == "Hi"
    with pytest.raises(ValueError, match="no chat template"):
        generate_response.format_prompt(plain_tokenizer, "Hi", chat=True)
    with pytest.raises(ValueError, match="needs a tokenizer with a chat template"):
        generate_response.format_prompt(plain_tokenizer, [{"role": "user", "content": "Hi"}])


def test_generation_without_pad_token_or_template(plain_tokenizer: Any) -> None:
    model = build_model("gpt2", len(plain_tokenizer))
    replies = generate_response.generate_response(model, plain_tokenizer, ["Hi", TEXT], 3, temperature=0)
    assert len(replies) == 2
    assert plain_tokenizer.pad_token is None and plain_tokenizer.padding_side == "right"


# --- older transformers: tuple outputs ---------------------------------------------------------
class _TupleLayer(torch.nn.Module):
    """A decoder layer as transformers 4 wrote them: it returns ``(hidden, extra)``."""

    def __init__(self, width: int):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, None]:
        return hidden + self.linear(hidden), None


class _TupleModel(torch.nn.Module):
    def __init__(self, width: int = 8, depth: int = 2):
        super().__init__()
        self.embed = torch.nn.Embedding(16, width)
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList(_TupleLayer(width) for _ in range(depth))

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.embed

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(input_ids)
        for layer in self.model.layers:
            hidden = layer(hidden)[0]
        return hidden


def test_tuple_layer_outputs_are_read_and_rebuilt() -> None:
    model = _TupleModel()
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        plain = model(ids)
        cache = activation_cache.capture(model, {"input_ids": ids}, layers=[1])
        assert torch.equal(cache[1], plain)
        with steering_hook.create_steering_hook(model, 1, torch.ones(8), strength=3.0):
            assert torch.equal(model(ids), plain + 3.0)
        with activation_patching.patching_hook(model, 1, cache[1]):
            assert torch.equal(model(ids), plain)
    assert no_hooks(model)


def test_what_hooks_add_follows_each_layers_device_and_dtype() -> None:
    """Under a multi-device ``device_map`` each layer's hook sees its own device's tensors: what a
    hook adds is copied to that device and dtype once, then reused. ("meta" stands in for a
    second device on a machine without GPUs.)"""
    per = model_layers.PerDevice(torch.ones(4))
    on_meta = per.like(torch.empty(2, 4, device="meta", dtype=torch.bfloat16))
    assert on_meta.device.type == "meta" and on_meta.dtype == torch.bfloat16
    assert per.like(torch.empty(1, device="meta", dtype=torch.bfloat16)) is on_meta
    assert per.like(torch.zeros(3, dtype=torch.float64)).dtype == torch.float64
