"""The hand-written baseline the notebook benchmarks compare against: jupyter_client talking to
the session's own kernel directly (ZMQ, through its connection file), nothing of seer in between."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def raw_kernel_client(session: Any) -> Iterator[Any]:
    """A ready ``BlockingKernelClient`` on ``session``'s kernel (a local sandbox's runtime dir)."""
    from jupyter_client import BlockingKernelClient

    service = session.sandbox._services["jupyter"]
    kc = BlockingKernelClient(
        connection_file=os.path.join(service["runtime_dir"], f"kernel-{session.kernel_id}.json")
    )
    kc.load_connection_file()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        yield kc
    finally:
        kc.stop_channels()


def raw_execute(kc: Any, code: str) -> str | None:
    """Run ``code`` and wait for its reply and the idle status; its ``text/plain`` result."""
    msg_id = kc.execute(code)
    value = None
    while True:
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "execute_result":
            value = msg["content"]["data"]["text/plain"]
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id
    return value
