"""(In the kernel.) A cap on what one cell sends as output, installed in every kernel of a seer
Jupyter server (``IPKernelApp.exec_lines``).

A cell whose value is 200 MB (``"x" * 200_000_000``) would otherwise send it whole: through the
Jupyter server, into every client, into the notebook in the sandbox and on the client, slowing every
later cell down. Here a value's (or a display's) representation over :data:`LIMIT` characters keeps
its head and tail with a note of what was cut, in the output itself. The object itself is untouched
in the kernel. (Printed text needs no cap here: the Jupyter server's ``iopub_data_rate_limit`` drops a
flood of it, with a note.)
"""

from __future__ import annotations

from typing import Any

__all__ = ["LIMIT", "cap_data", "install"]

#: The most characters one value or display of a cell carries.
LIMIT = 1_000_000


def _cut(text: str, limit: int) -> str:
    """``text``'s head and tail, under a first line that says what was cut (the line survives any
    later cut to head and tail, as the MCP server's)."""
    half = limit // 2
    cut = len(text) - 2 * half
    return (
        f"[seer cut {cut:,} of {len(text):,} characters from the middle of this output: a cell's output "
        f"keeps at most {limit:,}; write big values to a file]\n{text[:half]}\n...\n{text[-half:]}"
    )


def cap_data(data: dict[str, Any], limit: int = LIMIT) -> dict[str, Any]:
    """A display's mimebundle with every text over ``limit`` characters cut to its head and tail;
    a non-text payload over the limit (a huge image) is replaced by a note in ``text/plain``."""
    capped: dict[str, Any] = {}
    notes = []
    for mime, value in data.items():
        if not isinstance(value, str) or len(value) <= limit:
            capped[mime] = value
        elif mime.startswith("text/"):
            capped[mime] = _cut(value, limit)
        else:
            notes.append(
                f"[seer left out a {mime} output of {len(value):,} characters: a cell's output keeps "
                f"at most {limit:,}]"
            )
    if notes:
        capped["text/plain"] = "\n".join([capped.get("text/plain", ""), *notes]).strip("\n")
    return capped


def install(shell: Any = None, limit: int = LIMIT) -> None:
    """Cap the values and displays of ``shell`` (the running IPython kernel's shell), through its
    display formatter."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None or getattr(shell, "_seer_output_cap", False):
        return
    formatter = shell.display_formatter
    original = formatter.format

    def format(obj: Any, include: Any = None, exclude: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
        data, metadata = original(obj, include=include, exclude=exclude)
        return cap_data(data, limit), metadata

    formatter.format = format
    shell._seer_output_cap = True
