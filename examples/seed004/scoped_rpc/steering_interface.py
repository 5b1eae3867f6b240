"""GPU functions served from a scoped sandbox: steering and the logit lens, built on seer-toolkit
(its modules are uploaded beside this file). ``expose``, ``get_model_path`` and
``list_configured_models`` are injected by seer."""

import os

import torch
from extract_activations import get_layer_activations
from generate_response import generate_response
from logit_lens import logit_lens
from steering_hook import create_steering_hook
from transformers import AutoModelForCausalLM, AutoTokenizer

MODEL_NAME = os.environ["SEER_EXAMPLE_MODEL"]
model = AutoModelForCausalLM.from_pretrained(get_model_path(MODEL_NAME)).eval()  # noqa: F821
tokenizer = AutoTokenizer.from_pretrained(get_model_path(MODEL_NAME))  # noqa: F821


@expose  # noqa: F821
def steer(prompt: str, positive: str, negative: str, layer: int, strength: float = 4.0) -> dict:
    """Reply to ``prompt`` with and without the steering vector ``positive - negative`` at ``layer``,
    and how far the steered logits moved."""
    vector = get_layer_activations(model, tokenizer, positive, layer) - get_layer_activations(
        model, tokenizer, negative, layer
    )
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    with torch.no_grad():
        plain = model(**inputs).logits
        with create_steering_hook(model, layer, vector, strength):
            steered = model(**inputs).logits
            steered_reply = generate_response(model, tokenizer, prompt, max_tokens=12, temperature=0)
    return {
        "plain": generate_response(model, tokenizer, prompt, max_tokens=12, temperature=0),
        "steered": steered_reply,
        "logit_shift": float((steered - plain).abs().max()),
    }


@expose  # noqa: F821
def lens(text: str, top_k: int = 3) -> list:
    """The logit lens at the last token of ``text``: each layer's top tokens."""
    return logit_lens(model, tokenizer, text, top_k=top_k)
