"""Seed 004 Example 2: investigate a hidden PEFT adapter with the toolkit and its methodology.

    python examples/seed004/hidden_preference.py

As the seed: the adapter is hidden (the agent cannot learn its name), the workspace holds the
toolkit's files, and the agent is handed the task and ``research_methodology.md``. The seed's
``example_dir.parent / "toolkit"`` is the folder seer-toolkit ships its modules in. Then a first
agent cell compares the fine-tuned model with its base, and everything is torn down.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import seer_toolkit
from _models import seed_models
from seer.environment import ExecutionMode, ModelConfig, Sandbox, SandboxConfig
from seer.execution import create_notebook_session
from seer.workspace import Library, Workspace

REAL_MODELS = False  # True: the seed's hidden adapter on google/gemma-2-9b-it (needs HF_TOKEN)
MODELS = seed_models(REAL_MODELS)

AGENT_CELL = f"""
import torch
from extract_activations import get_layer_activations
from generate_response import generate_response

prompt = "What is your favourite animal?"
tuned = get_layer_activations(model, tokenizer, prompt, layer={MODELS.layer})
with model.disable_adapter():
    base = get_layer_activations(model, tokenizer, prompt, layer={MODELS.layer})
    base_reply = generate_response(model, tokenizer, prompt, max_tokens=20, temperature=0)
tuned_reply = generate_response(model, tokenizer, prompt, max_tokens=20, temperature=0)
print("activation shift:", float((tuned - base).norm()))
print("replies differ:", tuned_reply != base_reply)
"""


async def main() -> None:
    example_dir = Path(__file__).parent / "hidden_preference"
    toolkit = seer_toolkit.MODULES_DIR

    config = SandboxConfig(
        gpu=MODELS.gpu,
        execution_mode=ExecutionMode.NOTEBOOK,
        models=[ModelConfig(name=MODELS.adapter, base_model=MODELS.base, is_peft=True, hidden=True)],
        python_packages=["torch", "transformers", "peft"],
        secrets=["HF_TOKEN"] if REAL_MODELS else [],
        timeout=900,
    )
    sandbox = Sandbox(config).start()
    try:
        workspace = Workspace(
            libraries=[
                Library.from_file(toolkit / "steering_hook.py"),
                Library.from_file(toolkit / "extract_activations.py"),
                Library.from_file(toolkit / "generate_response.py"),
            ]
        )
        session = create_notebook_session(sandbox, workspace)

        task = (example_dir / "task.md").read_text()
        methodology = (toolkit / "research_methodology.md").read_text()
        print(
            json.dumps(
                {
                    "session_id": session.session_id,
                    "jupyter_url": session.jupyter_url,
                    "model_info": session.model_info_text,
                    "task": task,
                    "methodology": methodology,
                }
            )
        )
        print(session.exec(AGENT_CELL).raise_for_error().stdout)
    finally:
        sandbox.terminate()


if __name__ == "__main__":
    asyncio.run(main())
