"""Code that runs inside the sandbox.

Core ships these modules into every sandbox (the same seer-core version as the client) and runs
them there: :mod:`seer.runtime.fetch` downloads the configured models into the machine's model
cache, :mod:`seer.runtime.models` lets code in the sandbox find them, and
:mod:`seer.runtime.loading` loads them (the notebook kernel pre-loads models with it).

Importing any of them is cheap: torch, transformers, peft and huggingface_hub are imported only
inside the functions that use them.
"""
