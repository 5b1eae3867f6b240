"""seer-toolkit in notebook kernels: importable by default (seed 004 Example 1 runs in a session made
with an empty ``Workspace()``), after a kernel restart too, and gone when the config turns it off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from _model_kit import MODEL_ID, hf_home, install_all, tiny_dirs
from seer import ModelConfig, Sandbox, SandboxConfig
from seer.errors import ConfigError
from seer.execution import create_notebook_session
from seer.workspace import Workspace

pytestmark = pytest.mark.e2e

pytest.importorskip("seer_toolkit")

# Seed 004 Example 1's cell, verbatim but for the layer index (the tiny model has two layers).
SEED_EXAMPLE_1 = """
import torch
from steering_hook import create_steering_hook

# Model is already loaded
print(f"Model: {type(model).__name__} on {model.device}")

# Extract steering vector from contrast pair
from extract_activations import get_layer_activations

positive_text = "I strongly agree with your perspective."
negative_text = "I disagree with your perspective."

pos_acts = get_layer_activations(model, tokenizer, positive_text, layer=1)
neg_acts = get_layer_activations(model, tokenizer, negative_text, layer=1)

steering_vector = pos_acts - neg_acts

# Test steering
test_prompt = "What do you think about this idea?"
inputs = tokenizer(test_prompt, return_tensors="pt").to(model.device)

# Generate with steering
with create_steering_hook(model, layer_idx=1, vector=steering_vector, strength=2.0):
    outputs = model.generate(**inputs, max_new_tokens=50)

response = tokenizer.decode(outputs[0], skip_special_tokens=True)
print(f"Steered response: {response}")
"""

CHECK_STEERING = """
import json, torch
with torch.no_grad():
    plain = model(**inputs).logits
    with create_steering_hook(model, layer_idx=1, vector=steering_vector, strength=8.0):
        steered = model(**inputs).logits
    after = model(**inputs).logits
print(json.dumps({
    "changed": bool((plain - steered).abs().max() > 1e-3),
    "removed": bool(torch.equal(plain, after)),
    "shape": list(steering_vector.shape),
    "hidden": model.config.hidden_size,
}))
"""


@pytest.fixture(scope="module")
def with_model(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Sandbox]:
    home = tmp_path_factory.mktemp("toolkit-hf-home")
    install_all(tiny_dirs(tmp_path_factory, worker_id), home / "hub")
    with hf_home(home):
        sandbox = Sandbox(SandboxConfig(timeout=600, models=[ModelConfig(name=MODEL_ID)])).start()
    try:
        yield sandbox
    finally:
        sandbox.terminate()


@pytest.mark.slow
def test_seed_example_1_runs_in_a_notebook_made_with_an_empty_workspace(
    with_model: Sandbox, tmp_path: Path
) -> None:
    session = create_notebook_session(with_model, Workspace(), outputs_dir=tmp_path)
    try:
        result = session.exec(SEED_EXAMPLE_1)
        assert result.ok, result.error
        assert "Model: LlamaForCausalLM on cpu" in result.stdout
        assert "Steered response: " in result.stdout
        checks = session.exec(CHECK_STEERING)
        assert checks.ok, checks.error
        seen = json.loads(checks.stdout)
        assert seen == {"changed": True, "removed": True, "shape": [seen["hidden"]], "hidden": 64}
        # A restarted kernel has the toolkit again.
        session.restart()
        again = session.exec(
            "import steering_hook, logit_lens; print(len(logit_lens.logit_lens(model, tokenizer, 'hi')))"
        )
        assert again.ok, again.error
        assert again.stdout.strip() == "2"
    finally:
        session.shutdown()


@pytest.mark.parametrize("toolkit", [True, False])
def test_the_config_switch(toolkit: bool, tmp_path: Path) -> None:
    sandbox = Sandbox(SandboxConfig(timeout=600, toolkit=toolkit)).start()
    try:
        session = create_notebook_session(sandbox, outputs_dir=tmp_path)
        result = session.exec(
            "import importlib.util as u; print([u.find_spec(n) is not None for n in "
            "('steering_hook', 'extract_activations', 'generate_response', 'model_layers')])"
        )
        assert result.ok, result.error
        assert result.stdout.strip() == str([toolkit] * 4)
        # The set-up is hidden: nothing of it reaches the notebook.
        assert ".seer/toolkit" not in sandbox.read_file(session.notebook_path)
        session.shutdown()
    finally:
        sandbox.terminate()


@pytest.mark.unit
def test_the_switch_is_a_boolean() -> None:
    assert SandboxConfig().toolkit is True
    assert SandboxConfig.model_validate({"toolkit": False}).toolkit is False
    with pytest.raises(ConfigError, match="toolkit"):
        SandboxConfig(toolkit="sometimes")  # type: ignore[arg-type]
