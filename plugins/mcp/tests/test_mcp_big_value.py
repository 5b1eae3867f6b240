"""One big value (#23 item 6): a cell whose value is 200 MB is reported as finished with its
value cut (and saying so), the notebooks keep the cut value, later cells stay quick and the MCP
server's memory stays bounded."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("jupyter_server")
pytest.importorskip("mcp")
pytest.importorskip("seer_mcp")

from _mcp_client import McpClient, text, texts
from _notebook_kit import local_sandbox
from seer.execution import create_notebook_session
from seer.notebook import NotebookSession
from seer.runtime.kernel_output import LIMIT, cap_data

pytestmark = pytest.mark.e2e

BIG = 200_000_000


def _server_peak_rss(marker: str) -> int:
    """The peak resident memory (bytes) of this process's child running ``marker``."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["PPid"]) == os.getpid() and marker.encode() in cmdline:
            return int(fields["VmHWM"].split()[0]) * 1024
    raise AssertionError(f"no child process runs {marker}")


@pytest.fixture
def session() -> Iterator[NotebookSession]:
    with local_sandbox(timeout=600) as box, create_notebook_session(box, name="big", outputs_dir=False) as s:
        yield s


@pytest.mark.unit
def test_cap_data_cuts_big_texts_and_leaves_out_big_payloads() -> None:
    small = {"text/plain": "'x'", "image/png": "iVBOR"}
    assert cap_data(small, 10) == small
    capped = cap_data({"text/plain": "a" * 30 + "b" * 30, "image/png": "p" * 100}, 20)
    plain = capped["text/plain"]
    assert plain.startswith("[seer cut 40 of 60 characters") and "\n" + "a" * 10 + "\n...\n" in plain
    assert (
        plain.splitlines()[-1]
        == "[seer left out a image/png output of 100 characters: a cell's output keeps at most 20]"
    )
    assert "b" * 10 in plain and "image/png" not in capped


def test_a_200_mb_value_finishes_cut_and_later_cells_stay_quick(session: NotebookSession) -> None:
    config = session.mcp_config
    sandbox = session.sandbox
    assert sandbox is not None
    with McpClient(config["args"], config["env"], command=config["command"]) as c:
        big = c.call("execute_code", {"code": f'"x" * {BIG:_}'})
        body = text(big)
        assert not big.is_error, body[-2000:]
        assert "seer cut" in body and "write big values to a file" in body and "iopub" not in body
        assert len(body) < 100_000  # the answer is cut further, as every answer is
        # Later small cells are answered as quickly as before (they took 1.7 s to 107 s).
        for n in range(5):
            started = time.monotonic()
            assert texts(c.call("execute_code", {"code": f"{n} + 1"}))[0] == str(n + 1)
            assert time.monotonic() - started < 2.0
        assert _server_peak_rss("seer_mcp.notebook") < 400 * 2**20
    for notebook in (
        sandbox.read_file("notebooks/big.ipynb"),
        (sandbox.outputs_dir / "big.ipynb").read_text(),
    ):
        assert len(notebook) < 3 * LIMIT
        (value,) = json.loads(notebook)["cells"][0]["outputs"]
        assert "seer cut 199,000,002 of 200,000,002 characters" in "".join(value["data"]["text/plain"])
