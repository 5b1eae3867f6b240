"""The entry-point module of seer-toolkit: gives every notebook kernel the toolkit's modules
(the ``seer_kernel_libraries`` hook), so that core never imports this distribution.

Kept cheap to import: the modules are read only when a notebook sandbox starts its Jupyter server.
"""

from __future__ import annotations

from typing import Any

import seer


@seer.hookimpl
def seer_kernel_libraries(sandbox: Any) -> list[Any]:
    from seer_toolkit import libraries

    return libraries()
