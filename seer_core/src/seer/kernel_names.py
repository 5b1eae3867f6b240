"""The names seer binds in a notebook kernel, as one rule shared by the client and the sandbox.

A leaf module (standard library only), so both the config schema (which refuses two models whose
names would clash in the kernel) and :mod:`seer.runtime` (which binds them) read the same rule.
"""

from __future__ import annotations

__all__ = ["tokenizer_var_name"]


def tokenizer_var_name(var_name: str) -> str:
    """The kernel variable a model's tokenizer is bound to: ``tokenizer`` for ``model``, else
    ``<var_name>_tokenizer``."""
    return "tokenizer" if var_name == "model" else f"{var_name}_tokenizer"
