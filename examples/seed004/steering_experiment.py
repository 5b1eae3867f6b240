"""Seed 004 Example 1: a basic steering-vector experiment in a notebook made with ``Workspace()``.

    python examples/seed004/steering_experiment.py

The setup is the seed's: a notebook sandbox with the model loaded and a session on an empty
workspace; seer's toolkit is importable in the kernel all the same. The seed then prints the
session's details for an agent to attach to; here the agent's cell (the seed's, verbatim but for
the layer) is run through the session, and everything is torn down at the end.
"""

from __future__ import annotations

import json

from _models import seed_models
from seer.environment import ExecutionMode, ModelConfig, Sandbox, SandboxConfig
from seer.execution import create_notebook_session
from seer.workspace import Workspace

REAL_MODELS = False  # True: the seed's google/gemma-2-9b-it on an A100
MODELS = seed_models(REAL_MODELS)

AGENT_CELL = f"""
import torch
from steering_hook import create_steering_hook

# Model is already loaded
print(f"Model: {{type(model).__name__}} on {{model.device}}")

# Extract steering vector from contrast pair
from extract_activations import get_layer_activations

positive_text = "I strongly agree with your perspective."
negative_text = "I disagree with your perspective."

pos_acts = get_layer_activations(model, tokenizer, positive_text, layer={MODELS.layer})
neg_acts = get_layer_activations(model, tokenizer, negative_text, layer={MODELS.layer})

steering_vector = pos_acts - neg_acts

# Test steering
test_prompt = "What do you think about this idea?"
inputs = tokenizer(test_prompt, return_tensors="pt").to(model.device)

# Generate with steering
with create_steering_hook(model, layer_idx={MODELS.layer}, vector=steering_vector, strength=2.0):
    outputs = model.generate(**inputs, max_new_tokens=50)

response = tokenizer.decode(outputs[0], skip_special_tokens=True)
print(f"Steered response: {{response}}")
"""


def main() -> None:
    config = SandboxConfig(
        execution_mode=ExecutionMode.NOTEBOOK,
        gpu=MODELS.gpu,
        models=[ModelConfig(name=MODELS.model)],
        python_packages=["torch", "transformers"],
        timeout=900,
    )
    sandbox = Sandbox(config).start()
    try:
        session = create_notebook_session(sandbox, Workspace())
        print(json.dumps({"session_id": session.session_id, "jupyter_url": session.jupyter_url}))
        print(session.model_info_text)
        result = session.exec(AGENT_CELL).raise_for_error()
        print(result.stdout)
    finally:
        sandbox.terminate()


if __name__ == "__main__":
    main()
