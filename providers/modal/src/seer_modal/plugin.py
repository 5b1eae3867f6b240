"""The entry-point module of seer-modal: registers the ``modal`` provider.

Kept cheap to import: neither this nor :mod:`seer_modal.provider` imports the modal SDK at import
time; it is imported when Modal is first talked to.
"""

from __future__ import annotations

from typing import Any

import seer


@seer.hookimpl
def seer_register_providers(register: Any) -> None:
    from seer_modal.provider import ModalProvider

    register(ModalProvider)
