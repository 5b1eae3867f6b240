"""The ``mcp`` expose mode and the interface MCP server (``python -m seer_mcp.interface``).

End to end: an interface file served from a real ScopedSandbox on the local provider with
``expose_as="mcp"``; the config it returns starts the server, and the mcp SDK's own client lists
and calls the tools over stdio. The result rendering (tensors and arrays as summaries plus data)
is also checked in-process.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

pytest.importorskip("mcp")
pytest.importorskip("seer_mcp")
np = pytest.importorskip("numpy")

from _mcp_client import McpClient, Progress, server_env, text, texts  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from seer import SandboxConfig, plugins  # noqa: E402
from seer.errors import ConfigError  # noqa: E402
from seer_mcp.expose import McpMode, mcp_config  # noqa: E402
from seer_mcp.interface import MAX_DATA_ELEMENTS, MAX_TEXT, render, summarize_array  # noqa: E402

INTERFACE = '''
"""Tools for the MCP tests."""
import time

import numpy as np


@expose
def add(a: int, b: int = 2) -> int:
    """Add two integers."""
    return a + b


@expose
def describe(name: str, tags: list[str] | None = None) -> dict:
    """A dict about ``name``."""
    return {"name": name, "tags": tags or [], "length": len(name)}


@expose
def small_array(rows: int = 2, cols: int = 3) -> object:
    """A small float32 array."""
    return np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / 2


@expose
def big_array(n: int = 100) -> object:
    """An n x n array (too big to return whole)."""
    return np.ones((n, n), dtype=np.float64)


@expose
def activations(text: str) -> dict:
    """A tensor inside a dict, as interpretability functions return them."""
    import torch

    return {"tokens": text.split(), "acts": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3), "layer": 3}


@expose
def fail(message: str) -> None:
    """Always raises."""
    raise ValueError(message)


@expose
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return f"slept {seconds}"


@expose
def long_text(n: int) -> str:
    """A string of n characters."""
    return "ab" * (n // 2)


@expose
def norms(n: int = 13) -> list[float]:
    """A list of floats, as per-layer statistics come back."""
    return [i / 7 for i in range(n)]
'''

FUNCTIONS = {
    "add",
    "describe",
    "small_array",
    "big_array",
    "activations",
    "fail",
    "slow",
    "long_text",
    "norms",
}


# --- the expose mode ------------------------------------------------------------------------


@pytest.mark.unit
def test_mcp_expose_mode_is_registered() -> None:
    assert plugins.get_expose_mode("mcp") is McpMode
    assert McpMode.description


@pytest.mark.unit
def test_mcp_config_needs_a_served_interface() -> None:
    with pytest.raises(ConfigError, match="url, token"):
        mcp_config(object())


# --- rendering, in-process ------------------------------------------------------------------


@pytest.mark.unit
def test_array_summary_and_data() -> None:
    arr = np.array([[1.0, 2.0], [np.nan, 4.0]], dtype=np.float32)
    summary = summarize_array(arr)
    assert summary["type"] == "array" and summary["dtype"] == "float32" and summary["shape"] == [2, 2]
    assert (summary["min"], summary["max"], summary["nan_count"]) == (1.0, 4.0, 1)
    assert summary["data"] == [[1.0, 2.0], ["nan", 4.0]]
    big = summarize_array(np.zeros(MAX_DATA_ELEMENTS + 1, dtype=np.int64))
    assert "data" not in big and "data_omitted" in big and "..." in big["preview"]


@pytest.mark.unit
def test_render_scalars_strings_and_nested_values() -> None:
    assert texts(render("plain text")) == ["plain text"]
    assert texts(render(None)) == ["None"]
    nested = render({"x": np.arange(3), "raw": b"\x00\x01", "n": 1.5})
    data = json.loads(text(nested))
    assert data["x"]["data"] == [0, 1, 2] and data["raw"]["base64"] == "AAE=" and data["n"] == 1.5
    assert nested.structured_content == {"result": data}
    json.dumps(render({"inf": float("inf")}).structured_content, allow_nan=False)


# --- end to end -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scoped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("seer.sandbox.scoped")
    from seer.sandbox.scoped import ScopedSandbox

    box = ScopedSandbox(SandboxConfig(timeout=900)).start()
    try:
        yield box
    finally:
        box.terminate()


@pytest.fixture(scope="module")
def config(scoped: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("iface") / "tools.py"
    path.write_text(textwrap.dedent(INTERFACE))
    return dict(scoped.serve(str(path), expose_as="mcp", name="tools"))


@pytest.fixture(scope="module")
def client(config: dict[str, Any]) -> Iterator[McpClient]:
    with McpClient(config["args"], server_env(config["env"]), command=config["command"]) as c:
        yield c


@pytest.mark.slow
def test_serve_as_mcp_returns_a_stdio_server_config(config: dict[str, Any], scoped: Any) -> None:
    served = scoped.served["tools"]
    assert config == {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "seer_mcp.interface"],
        "env": {"SEER_RPC_URL": served.url, "SEER_RPC_TOKEN": served.token, "SEER_RPC_NAME": "tools"},
    }


@pytest.mark.slow
def test_one_tool_per_exposed_function(client: McpClient, scoped: Any) -> None:
    tools = {t.name: t for t in client.tools()}
    assert set(tools) == FUNCTIONS
    for spec in scoped.served["tools"].functions:
        tool = tools[spec.name]
        assert tool.input_schema == spec.input_schema
        assert spec.doc and spec.doc in (tool.description or "")
        assert f"{spec.name}{spec.signature}" in (tool.description or "")
    assert tools["add"].input_schema["required"] == ["a"]


@pytest.mark.slow
def test_calls_return_values(client: McpClient) -> None:
    result = client.call("add", {"a": 40})
    assert not result.is_error and texts(result) == ["42"] and result.structured_content == {"result": 42}
    described = client.call("describe", {"name": "cat", "tags": ["x"]})
    assert json.loads(text(described)) == {"name": "cat", "tags": ["x"], "length": 3}


@pytest.mark.slow
def test_arrays_come_back_as_summary_plus_data(client: McpClient) -> None:
    small = client.call("small_array", {})
    assert not small.is_error
    summary, data = texts(small)
    assert summary.startswith("array float32, shape [2x3] (6 elements)")
    assert "min 0  max 2.5  mean 1.25" in summary
    assert json.loads(data) == [[0.0, 0.5, 1.0], [1.5, 2.0, 2.5]]
    assert small.structured_content is not None
    assert small.structured_content["result"]["data"] == [[0.0, 0.5, 1.0], [1.5, 2.0, 2.5]]

    big = client.call("big_array", {"n": 100})
    (summary,) = texts(big)
    assert "shape [100x100] (10000 elements)" in summary and "data omitted" in summary and "..." in summary
    assert "data" not in big.structured_content["result"]  # type: ignore[index]


@pytest.mark.slow
def test_tensors_in_nested_results(client: McpClient) -> None:
    pytest.importorskip("torch")
    result = client.call("activations", {"text": "the cat sat"})
    assert not result.is_error, text(result)
    data = json.loads(text(result))
    assert data["tokens"] == ["the", "cat", "sat"] and data["layer"] == 3
    acts = data["acts"]
    assert (acts["type"], acts["dtype"], acts["shape"], acts["size"]) == ("tensor", "bfloat16", [2, 3], 6)
    assert acts["data"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and acts["max"] == 5.0


@pytest.mark.slow
def test_errors_are_error_results_and_the_server_keeps_serving(client: McpClient) -> None:
    raised = client.call("fail", {"message": "no such layer"})
    assert raised.is_error
    assert "fail() raised ValueError: no such layer" in text(raised)
    assert "Traceback (in the sandbox)" in text(raised) and "raise ValueError(message)" in text(raised)

    cases = [
        ({"a": "forty"}, "'a'"),
        ({}, "missing 'a'"),
        ({"a": 1, "c": 2}, "no parameter 'c'"),
    ]
    for arguments, needle in cases:
        bad = client.call("add", arguments)
        assert (
            bad.is_error and needle in text(bad) and "Signature: add(a: int, b: int = 2) -> int" in text(bad)
        )
    unknown = client.call("no_such_tool", {})
    assert unknown.is_error and "no function 'no_such_tool'" in text(unknown) and "add" in text(unknown)
    assert texts(client.call("add", {"a": 1, "b": 1})) == ["2"]


@pytest.mark.slow
def test_a_huge_string_comes_back_clipped_with_a_note(client: McpClient) -> None:
    result = client.call("long_text", {"n": 20_000_000})
    assert not result.is_error
    (clipped,) = texts(result)
    assert len(clipped) < MAX_TEXT + 200 and clipped.startswith("abab") and clipped.endswith("abab")
    assert f"[{20_000_000 - MAX_TEXT} of 20000000 characters cut: return less" in clipped
    assert result.structured_content is None  # not the whole string either
    small = client.call("long_text", {"n": 10})
    assert texts(small) == ["ababababab"] and small.structured_content == {"result": "ababababab"}


@pytest.mark.slow
def test_lists_of_floats_come_back_on_one_line(client: McpClient) -> None:
    result = client.call("norms", {"n": 40})
    (line,) = texts(result)
    assert "\n" not in line and json.loads(line) == [i / 7 for i in range(40)]
    described = text(client.call("describe", {"name": "a-rather-long-name " * 6, "tags": ["x", "y"]}))
    assert '"tags": ["x", "y"]' in described and json.loads(described)["length"] == 114


@pytest.mark.slow
def test_one_serve_exposed_as_library_and_mcp_at_once(scoped: Any, tmp_path: Path) -> None:
    import subprocess

    path = tmp_path / "both.py"
    path.write_text(textwrap.dedent(INTERFACE))
    exposed = scoped.serve(str(path), expose_as=["library", "mcp"], name="both")
    assert set(exposed) == {"library", "mcp"}
    work = tmp_path / "work"
    exposed["library"].install_into(work)

    def library_call() -> subprocess.CompletedProcess[str]:
        script = "import both\nprint(both.add(40))"
        return subprocess.run(
            [sys.executable, "-c", script], cwd=work, capture_output=True, text=True, timeout=120
        )

    config = exposed["mcp"]
    with McpClient(config["args"], server_env(config["env"]), command=config["command"]) as mcp:
        assert library_call().stdout.strip() == "42"
        assert texts(mcp.call("add", {"a": 1, "b": 1})) == ["2"]
        assert library_call().stdout.strip() == "42"  # both valid together, in any order
        # A later exposure of the same serve shares its server and token.
        assert config["env"]["SEER_RPC_TOKEN"] in scoped.served["both"].expose("prompt")

        # Serving the name again ends every earlier handle, and each says why.
        with pytest.warns(UserWarning, match="'both' is served again: the handles made from its earlier"):
            scoped.serve(str(path), expose_as=None, name="both")
        stale = library_call()
        assert stale.returncode != 0 and "ended when it was served again" in stale.stderr
        refused = mcp.call("add", {"a": 1})
        assert refused.is_error and "served again with a new token" in text(refused)


@pytest.mark.slow
def test_long_calls_send_progress(client: McpClient) -> None:
    progress = Progress()
    result = client.call("slow", {"seconds": 3.5}, progress=progress)
    assert texts(result) == ["slept 3.5"]
    assert len(progress.seen) >= 2 and all("slow() running" in (m or "") for _, _, m in progress.seen)


@pytest.mark.slow
def test_a_stale_token_or_a_gone_server_is_explained(config: dict[str, Any]) -> None:
    env = server_env({**config["env"], "SEER_RPC_TOKEN": "not-the-token"})
    with (
        McpClient(config["args"], env, command=config["command"]) as c,
        pytest.raises(MCPError, match="new token"),
    ):
        c.tools()
    env = server_env({**config["env"], "SEER_RPC_URL": "http://127.0.0.1:9"})
    with (
        McpClient(config["args"], env, command=config["command"]) as c,
        pytest.raises(MCPError, match="Cannot reach"),
    ):
        c.tools()


def test_python_m_seer_mcp_interface_needs_its_env(tmp_path: Path) -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "seer_mcp.interface"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": ""},
    )
    assert out.returncode != 0 and "SEER_RPC_URL" in out.stderr
