"""Text generation for one prompt or a batch, through the chat template where the tokenizer has one.

::

    from generate_response import generate_response

    generate_response(model, tokenizer, "What is the capital of France?")        # -> str
    generate_response(model, tokenizer, ["Hi!", "Tell me a joke."], temperature=0)  # -> [str, str]
    generate_response(model, tokenizer, [{"role": "user", "content": "Hi!"}])     # a conversation
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from model_layers import input_device, padding

__all__ = ["format_prompt", "generate_response"]

Prompt = str | Sequence[Mapping[str, str]]


def _is_conversation(prompt: Any) -> bool:
    return (
        isinstance(prompt, Sequence)
        and not isinstance(prompt, str)
        and all(isinstance(m, Mapping) for m in prompt)
        and len(prompt) > 0
    )


def format_prompt(
    tokenizer: Any, prompt: Prompt, *, chat: bool | None = None, system: str | None = None
) -> str:
    """The text the model sees for ``prompt``: a string, or a conversation (a list of
    ``{"role", "content"}`` messages). With a chat template (``chat=None`` uses it when the
    tokenizer has one; ``True`` requires it) the prompt becomes a user turn (after ``system``, if
    given) followed by the assistant's opening; without, a string is used as it is."""
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if chat is True and not has_template:
        raise ValueError(f"chat=True, but {type(tokenizer).__name__} has no chat template")
    conversation = _is_conversation(prompt)
    if not (has_template and chat is not False):
        if conversation:
            raise ValueError("a conversation (list of messages) needs a tokenizer with a chat template")
        return str(prompt)
    messages = list(prompt) if conversation else [{"role": "user", "content": str(prompt)}]
    if system is not None:
        messages = [{"role": "system", "content": system}, *messages]
    return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


def generate_response(
    model: Any,
    tokenizer: Any,
    prompt: Prompt | Sequence[Prompt],
    max_tokens: int = 256,
    temperature: float = 0.7,
    *,
    chat: bool | None = None,
    system: str | None = None,
    include_prompt: bool = False,
    **generate_kwargs: Any,
) -> str | list[str]:
    """Generate a reply to ``prompt``: one string or conversation gives a string; a list of them
    gives a list, generated as one left-padded batch.

    ``temperature=0`` decodes greedily; otherwise tokens are sampled at that temperature.
    The reply is the new text only (``include_prompt=True`` puts the prompt's text in front, as
    the seed's helper returned). ``chat``/``system``: see :func:`format_prompt`. Other keyword
    arguments go to ``model.generate``.
    """
    single = isinstance(prompt, str) or _is_conversation(prompt)
    prompts = [prompt] if single else list(prompt)  # type: ignore[list-item]
    if not prompts:
        raise ValueError("prompt is an empty list: pass a prompt or at least one")
    texts = [format_prompt(tokenizer, p, chat=chat, system=system) for p in prompts]
    templated = bool(getattr(tokenizer, "chat_template", None)) and chat is not False
    with padding(tokenizer, "left"):
        # A chat template writes the special tokens itself; adding them again would double the BOS.
        inputs = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=not templated)
        pad_id = tokenizer.pad_token_id
    inputs = inputs.to(input_device(model))
    options: dict[str, Any] = {"max_new_tokens": max_tokens, "pad_token_id": pad_id}
    if temperature > 0:
        options.update(do_sample=True, temperature=temperature)
    else:
        options.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    options.update(generate_kwargs)
    with torch.no_grad():
        out = model.generate(**inputs, **options)
    start = 0 if include_prompt else inputs["input_ids"].shape[1]
    replies = tokenizer.batch_decode(out[:, start:], skip_special_tokens=True)
    return replies[0] if single else replies
