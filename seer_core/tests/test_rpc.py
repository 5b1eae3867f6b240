"""The RPC layer without a sandbox: the wire format, reading interface files, and the server
(``python -m seer.runtime.rpc_server``, one process for the module) with its client.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from seer.errors import ConfigError, InterfaceError
from seer.rpc import (
    BadArgumentsError,
    FunctionSpec,
    ParamSpec,
    RemoteError,
    RequestTooLargeError,
    RpcAuthError,
    RpcClient,
    RpcConnectionError,
    RpcError,
    RpcTimeoutError,
    SerializationError,
    ServedInterface,
    UnknownFunctionError,
    deserialize,
    inspect_interface,
    serialize,
)
from seer.rpc.spec import parse_annotation

pytestmark = pytest.mark.e2e

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

TOKEN = "test-token-0123456789"
MAX_REQUEST = 4 * 1024 * 1024

INTERFACE = '''
"""Functions for the RPC tests."""
import asyncio
import time
from typing import Literal, Optional

import numpy as np
import torch

SECRET = "module global"
calls = {"n": 0}


class MyError(Exception):
    pass


def _helper():
    return "private"


@expose
def echo(value):
    """Return the value."""
    return value


@expose
def add(a: int, b: int = 2) -> int:
    """Add two ints."""
    return a + b


@expose
def count() -> int:
    calls["n"] += 1
    return calls["n"]


@expose
def typed(
    x: float,
    s: str,
    flag: bool,
    items: list[int],
    mapping: dict[str, float],
    maybe: Optional[int] = None,
    choice: Literal["a", "b"] = "a",
    tup: tuple[int, ...] = (),
    tags: set[str] = frozenset(),
) -> dict:
    return {
        "types": [type(v).__name__ for v in (x, s, flag, items, mapping, maybe, choice, tup, tags)],
        "tup": tup,
    }


@expose
def posonly(a: int, /, b: int = 0, *, c: int = 0) -> list:
    return [a, b, c]


@expose
async def aadd(a: int) -> int:
    await asyncio.sleep(0)
    return a + 1


@expose
def tensor(dtype: str, shape: list[int], transpose: bool = False):
    t = (torch.arange(int(np.prod(shape))) % 7).to(getattr(torch, dtype)).reshape(shape)
    return t.t() if transpose else t


@expose
def big(n: int):
    return torch.ones(n, dtype=torch.float32)


@expose
def sizes(value) -> int:
    return int(value.numel() if hasattr(value, "numel") else value.size)


@expose
def boom(message: str):
    raise MyError(message)


@expose
def sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@expose
def unserializable():
    return {"ok": [1, 2], "bad": [3, object()]}


meta_calls = {"n": 0}


@expose
def count_meta():
    """Counts its calls, then returns what cannot be encoded (a meta tensor has no data)."""
    meta_calls["n"] += 1
    return torch.empty(3, device="meta")


@expose
def meta_count() -> int:
    return meta_calls["n"]


@expose
def odd_array(kind: str):
    return np.array([b"ab", b"c"]) if kind == "bytes" else np.zeros(2, dtype="V3")
'''


# --- the wire format ----------------------------------------------------------------------------
def _roundtrip(value: Any, **kw: Any) -> Any:
    return deserialize(bytearray(serialize(value)), **kw)


@pytest.mark.parametrize(
    "dtype",
    ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex64"],
)
@pytest.mark.unit
def test_numpy_arrays_keep_dtype_and_shape(dtype: str) -> None:
    arr = (np.arange(24) % 5).astype(dtype).reshape(2, 3, 4)
    for value in (arr, arr[:, ::2, 1:], arr.T, np.asfortranarray(arr), arr[0, 0, 0:0]):
        out = _roundtrip(value)
        assert isinstance(out, np.ndarray)
        assert out.dtype == value.dtype and out.shape == value.shape
        np.testing.assert_array_equal(out, value)


@pytest.mark.parametrize(
    "dtype",
    ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"],
)
@pytest.mark.unit
def test_torch_tensors_keep_dtype_and_shape(dtype: str) -> None:
    t = (torch.arange(60) % 7).to(getattr(torch, dtype)).reshape(3, 4, 5)
    for value in (t, t.transpose(0, 2), t[:, 1:3, ::2], t[0, 0, 0], t[:0]):
        out = _roundtrip(value)
        assert isinstance(out, torch.Tensor)
        assert out.dtype == value.dtype and out.shape == value.shape
        assert torch.equal(out, value)


@pytest.mark.unit
def test_tensors_without_torch_arrive_as_numpy_and_bfloat16_widens_exactly() -> None:
    t = torch.randn(4, 6).to(torch.bfloat16)
    out = _roundtrip({"t": t, "f": t.float()}, tensors="numpy")
    assert isinstance(out["t"], np.ndarray) and out["t"].dtype == np.float32 and out["t"].shape == (4, 6)
    np.testing.assert_array_equal(out["t"], t.float().numpy())


@pytest.mark.unit
def test_decoded_arrays_share_the_frame_and_are_writable() -> None:
    frame = bytearray(serialize(np.arange(1000, dtype=np.float32)))
    out = deserialize(frame)
    assert out.flags.writeable and np.shares_memory(out, np.frombuffer(frame, dtype=np.uint8))
    from_bytes = deserialize(bytes(frame))  # read-only input: copied out, still writable
    assert from_bytes.flags.writeable and torch.from_numpy(from_bytes).sum().item() == sum(range(1000))


@pytest.mark.unit
def test_tensor_views_send_only_their_elements() -> None:
    base = torch.zeros(1000, 1000)
    assert len(serialize(base[:2])) < 2 * 1000 * 4 + 512


@pytest.mark.unit
def test_json_types_round_trip() -> None:
    value = {
        "none": None,
        "bool": True,
        "int": -(2**63),
        "uint": 2**64 - 1,
        "float": 1.5,
        "nan": float("inf"),
        "str": "héllo",
        "bytes": b"\x00\xff",
        "list": [1, [2, [3]]],
        3: "int key",
        "nested": {"a": {"b": [{"c": None}]}},
        "np scalar": np.float32(2.5),
        "np int": np.int64(7),
    }
    out = _roundtrip(value)
    assert out == {**value, "np scalar": 2.5, "np int": 7}
    assert type(out["np int"]) is int


@pytest.mark.unit
def test_tuples_and_sets_become_lists() -> None:
    assert _roundtrip((1, (2, 3))) == [1, [2, 3]]
    assert sorted(_roundtrip({3, 1, 2})) == [1, 2, 3]
    assert _roundtrip(frozenset()) == []


@pytest.mark.unit
def test_unserializable_values_are_named_with_where_they_are() -> None:
    class Widget:
        pass

    with pytest.raises(SerializationError, match=r"test_rpc\..*Widget at value\['a'\]\[1\]"):
        serialize({"a": [1, Widget()]})
    with pytest.raises(SerializationError, match=r"64-bit range at value\[0\]"):
        serialize([2**80])
    with pytest.raises(SerializationError, match=r"dtype <U1"):
        serialize(np.array(["x"]))
    with pytest.raises(SerializationError, match="not a seer RPC frame"):
        deserialize(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(SerializationError, match="shorter"):
        deserialize(b"SR")


# --- reading interface files ----------------------------------------------------------------------
@pytest.mark.unit
def test_specs_describe_the_exposed_functions() -> None:
    info = inspect_interface(INTERFACE, "iface.py")
    assert info.doc == "Functions for the RPC tests."
    specs = {f.name: f for f in info.functions}
    assert "_helper" not in specs and "MyError" not in specs
    add = specs["add"]
    assert add.signature == "(a: int, b: int = 2) -> int"
    assert add.params == [
        ParamSpec("a", "positional_or_keyword", "int", None),
        ParamSpec("b", "positional_or_keyword", "int", "2"),
    ]
    assert (
        add.returns == "int"
        and add.doc == "Add two ints."
        and add.line == INTERFACE.splitlines().index("def add(a: int, b: int = 2) -> int:") + 1
    )
    assert add.input_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert specs["posonly"].signature == "(a: int, /, b: int = 0, *, c: int = 0) -> list"
    assert [p.kind for p in specs["posonly"].params] == [
        "positional_only",
        "positional_or_keyword",
        "keyword_only",
    ]
    assert specs["echo"].params == [ParamSpec("value", "positional_or_keyword", None, None)]
    props = specs["typed"].input_schema["properties"]
    assert props["items"] == {"type": "array", "items": {"type": "integer"}}
    assert props["mapping"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["maybe"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert props["choice"] == {"enum": ["a", "b"], "default": "a"}
    assert FunctionSpec.from_dict(json.loads(json.dumps(add.to_dict()))) == add


@pytest.mark.unit
def test_annotations_that_cannot_be_checked_are_shown_not_checked() -> None:
    check = parse_annotation("torch.Tensor")
    assert check.kind == "any" and check.schema() == {"description": "Python type: torch.Tensor"}
    assert parse_annotation("'int'").kind == "int"
    assert parse_annotation("typing.Optional[typing.List[int]]").problem([1, "x"], "x") is not None
    assert parse_annotation("int | torch.Tensor").kind == "any"


@pytest.mark.parametrize(
    ("source", "line", "message"),
    [
        ("x = 1\ndef f(:\n    pass\n", 2, "syntax"),
        ("@expose\ndef f(*args):\n    pass\n", 2, r"\*args is not supported"),
        ("@expose\ndef f(a, **options):\n    pass\n", 2, r"\*\*options is not supported"),
        ("def g():\n    @expose\n    def f():\n        pass\n", 3, "module-level functions"),
        ("class C:\n    @expose\n    def f(self):\n        pass\n", 3, "method or nested function"),
        ("@expose(name='x')\ndef f():\n    pass\n", 2, "without arguments"),
        ("@expose\ndef f():\n    pass\n\n@expose\ndef f():\n    pass\n", 6, "already exposed at line 2"),
        ("def f():\n    pass\n", 1, "no function is exposed"),
    ],
)
@pytest.mark.unit
def test_bad_interface_files_are_refused_with_file_and_line(source: str, line: int, message: str) -> None:
    with pytest.raises(InterfaceError, match=message) as info:
        inspect_interface(source, "/x/iface.py")
    assert isinstance(info.value, ConfigError)
    assert f"/x/iface.py:{line}:" in str(info.value)


# --- the server -----------------------------------------------------------------------------------
def _token_file(tmp: Path) -> Path:
    path = tmp / "token"
    path.write_text(TOKEN)
    path.chmod(0o600)
    return path


def _server_argv(iface: Path, state: Path, *extra: str) -> list[str]:
    """The command serving ``iface`` with the test token (from a file beside it)."""
    token = _token_file(iface.parent)
    return [
        *(sys.executable, "-P", "-m", "seer.runtime.rpc_server", str(iface)),
        *("--token-file", str(token), "--state", str(state), *extra),
    ]


def _start_server(tmp: Path, source: str, *extra: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    iface = tmp / "iface.py"
    iface.write_text(source)
    state = tmp / "state.json"
    log = tmp / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            _server_argv(iface, state, *extra),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if state.is_file():
            data = json.loads(state.read_text())
            if data["status"] == "ready":
                return proc, f"http://127.0.0.1:{data['port']}", log
            assert data["status"] != "failed", data
        assert proc.poll() is None, log.read_text()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"server did not start:\n{log.read_text()}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    proc, url, log = _start_server(
        tmp_path_factory.mktemp("rpc"), INTERFACE, "--max-request-bytes", str(MAX_REQUEST)
    )
    try:
        yield url, log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def client(server: tuple[str, Path]) -> Iterator[RpcClient]:
    with RpcClient(server[0], TOKEN, timeout=60) as c:
        yield c


def _raw(url: str, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> Any:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, path, body=body or None, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type"), response.read()
    finally:
        conn.close()


def test_calls_return_results_and_module_state_persists(client: RpcClient) -> None:
    assert client.call("add", 1) == 3
    assert client.call("add", 1, b=10) == 11
    assert client.invoke("add", [], {"a": 4, "b": 5}) == 9
    first = client.call("count")
    assert client.call("count") == first + 1
    assert client.call("aadd", 1) == 2
    assert client.call("posonly", 1, 2, c=3) == [1, 2, 3]
    assert client.call("posonly", a=1) == [1, 0, 0]  # by name, as MCP calls it


def test_tensors_and_arrays_round_trip_through_the_server(client: RpcClient) -> None:
    for dtype in ("float32", "bfloat16", "float16", "int64", "bool"):
        out = client.call("tensor", dtype, [3, 4], transpose=True)
        expected = (torch.arange(12) % 7).to(getattr(torch, dtype)).reshape(3, 4).t()
        assert out.dtype == expected.dtype and out.shape == expected.shape and torch.equal(out, expected)
    arr = np.arange(30, dtype=np.float64).reshape(5, 6)[:, ::2]
    echoed = client.call("echo", arr)
    assert isinstance(echoed, np.ndarray) and echoed.dtype == arr.dtype
    np.testing.assert_array_equal(echoed, arr)
    t = torch.randn(2, 3).to(torch.bfloat16)
    assert torch.equal(client.call("echo", {"t": [t]})["t"][0], t)
    assert client.call("sizes", torch.zeros(7, 3)) == 21
    assert client.call("echo", {"a": (1, 2), "b": None, 5: b"x"}) == {"a": [1, 2], "b": None, 5: b"x"}


def test_type_hints_are_checked_and_coerced(client: RpcClient) -> None:
    good = client.call("typed", 1, "s", True, [1, 2], {"k": 1.5}, tup=[1, 2], tags=["x"])
    assert good["types"] == ["int", "str", "bool", "list", "dict", "NoneType", "str", "tuple", "set"]
    cases = [
        (("x", "s", True, [], {}), {}, "x", "argument 'x' must be float, got str"),
        ((1.0, "s", 1, [], {}), {}, "flag", "argument 'flag' must be bool, got int"),
        ((1.0, "s", True, [1, "2"]), {"mapping": {}}, "items", r"argument 'items'\[1\] must be int, got str"),
        ((1.0, "s", True, [], {"k": "v"}), {}, "mapping", r"argument 'mapping'\['k'\] must be float"),
        ((1.0, "s", True, [], {}), {"maybe": "1"}, "maybe", "argument 'maybe' must be Optional"),
        ((1.0, "s", True, [], {}), {"choice": "c"}, "choice", "must be one of 'a', 'b'"),
        ((1.0,), {}, "s", "missing a required argument: 's'"),
        ((1.0, "s", True, [], {}), {"nope": 1}, "nope", "unexpected keyword argument 'nope'"),
    ]
    for args, kwargs, parameter, message in cases:
        with pytest.raises(BadArgumentsError, match=message) as info:
            client.invoke("typed", args, kwargs)
        assert info.value.parameter == parameter and info.value.status == 422
        assert info.value.function == "typed" and str(info.value).startswith("typed(): ")
    with pytest.raises(BadArgumentsError, match=r"too many positional .* signature is aadd\(a: int\) -> int"):
        client.call("aadd", 1, 2)


def test_unknown_and_unexposed_names_are_refused(client: RpcClient) -> None:
    for name in (
        "nope",
        "_helper",
        "SECRET",
        "calls",
        "MyError",
        "expose",
        "get_model_path",
        "list_configured_models",
        "np",
        "__builtins__",
        "echo/../add",
        "add.__globals__",
    ):
        with pytest.raises(UnknownFunctionError, match="exposes no function") as info:
            client.call(name)
        assert info.value.status == 404
        assert "echo" in str(info.value)  # it lists what is exposed


def test_an_exception_in_the_function_is_a_remote_error(client: RpcClient) -> None:
    with pytest.raises(RemoteError) as info:
        client.call("boom", "it broke")
    err = info.value
    assert err.remote_type == "iface.MyError" and err.message == "it broke" and err.function == "boom"
    assert "raise MyError(message)" in err.traceback and "iface.py" in err.traceback
    assert "rpc_server.py" not in err.traceback
    assert "Remote traceback" in str(err) and isinstance(err, RpcError)


def test_an_unserializable_result_names_its_type(client: RpcClient) -> None:
    with pytest.raises(
        SerializationError, match=r"unserializable\(\) returned .*object at result\['bad'\]\[1\]"
    ):
        client.call("unserializable")
    assert client.call("add", 1) == 3  # the connection is still good


def test_unserializable_arguments_are_refused_before_sending(client: RpcClient) -> None:
    with pytest.raises(SerializationError, match=r"object at arguments\['args'\]\[0\]"):
        client.call("echo", object())


def test_a_call_past_its_timeout_is_answered_at_once(client: RpcClient) -> None:
    started = time.monotonic()
    with pytest.raises(RpcTimeoutError, match=r"sleep\(\) ran past its 0.3s timeout") as info:
        client.invoke("sleep", [3], timeout=0.3)
    assert time.monotonic() - started < 2.5 and info.value.status == 504
    assert client.call("add", 1) == 3


def test_calls_run_concurrently(client: RpcClient) -> None:
    results: list[float] = []
    started = time.monotonic()
    threads = [threading.Thread(target=lambda: results.append(client.call("sleep", 0.5))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    elapsed = time.monotonic() - started
    assert results == [0.5] * 8
    assert elapsed < 2.0, f"8 calls sleeping 0.5 s took {elapsed:.2f}s"


def test_oversized_requests_are_refused_with_413(server: tuple[str, Path]) -> None:
    big = np.zeros(MAX_REQUEST // 4 + 1024, dtype=np.float32)
    fresh = RpcClient(server[0], TOKEN)
    with pytest.raises(RequestTooLargeError, match=f"accepts at most {MAX_REQUEST}") as info:
        fresh.call("sizes", big)
    assert info.value.status == 413
    assert fresh.max_request_bytes == MAX_REQUEST
    with pytest.raises(RequestTooLargeError, match=f"accepts at most {MAX_REQUEST}"):  # refused here now
        fresh.call("sizes", big)
    assert fresh.call("sizes", big[: MAX_REQUEST // 8]) == MAX_REQUEST // 8
    # A claimed size far past the limit is answered at once, without reading the body.
    status, _, body = _raw(
        server[0],
        "POST",
        "/call/sizes",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Length": "10" * 6},
    )
    assert status == 413 and b"too_large" in body


def test_every_request_needs_the_token(server: tuple[str, Path]) -> None:
    url = server[0]
    for path in ("/health", "/functions", "/call/add"):
        status, ctype, body = _raw(url, "POST" if "call" in path else "GET", path, b"{}")
        assert status == 401 and ctype == "application/json"
        assert json.loads(body)["error"]["code"] == "unauthorized"
        status, _, body = _raw(url, "GET", path, headers={"Authorization": "Bearer wrong"})
        assert status == 403 and json.loads(body)["error"]["code"] == "forbidden"
    with pytest.raises(RpcAuthError) as info:
        RpcClient(url, "wrong").call("add", 1)
    assert info.value.status == 403
    with pytest.raises(RpcAuthError):
        RpcClient(url, "").functions()


def test_json_requests_and_answers_for_other_clients(server: tuple[str, Path]) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    status, ctype, body = _raw(server[0], "POST", "/call/tensor", b'{"args": ["bfloat16", [2]]}', auth)
    assert status == 200 and ctype == "application/json" and json.loads(body) == {"result": [0.0, 1.0]}
    status, _, body = _raw(server[0], "POST", "/call/add", b'{"kwargs": {"a": "x"}}', auth)
    assert status == 422 and json.loads(body)["error"]["parameter"] == "a"
    status, _, body = _raw(server[0], "POST", "/call/add", b"not json", auth)
    assert status == 400 and json.loads(body)["error"]["code"] == "malformed"
    status, _, _ = _raw(server[0], "GET", "/nope", headers=auth)
    assert status == 404


def test_functions_and_health(client: RpcClient) -> None:
    specs = {f.name: f for f in client.functions()}
    assert specs["add"].signature == "(a: int, b: int = 2) -> int" and "_helper" not in specs
    health = client.health()
    assert health["status"] == "ok" and "add" in health["functions"] and health["name"] == "iface"


def test_the_log_has_one_line_per_call_and_no_argument_values(
    client: RpcClient, server: tuple[str, Path]
) -> None:
    client.call("echo", "a-very-secret-argument-value")
    with pytest.raises(RemoteError):
        client.call("boom", "another-secret-value")
    text = server[1].read_text()
    assert "call echo ok" in text and "call boom error iface.MyError (500)" in text
    assert "a-very-secret-argument-value" not in text and "another-secret-value" not in text
    assert TOKEN not in text


def test_a_stopped_server_is_a_connection_error(tmp_path: Path) -> None:
    proc, url, _ = _start_server(tmp_path, "@expose\ndef one() -> int:\n    return 1\n")
    client = RpcClient(url, TOKEN, timeout=10)
    try:
        assert client.call("one") == 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    with pytest.raises(RpcConnectionError, match="cannot reach the RPC server"):
        client.call("one")


def test_an_interface_that_fails_to_load_reports_it(tmp_path: Path) -> None:
    iface = tmp_path / "iface.py"
    iface.write_text("@expose\ndef f():\n    pass\n\nraise RuntimeError('no model here')\n")
    state = tmp_path / "state.json"
    proc = subprocess.run(
        _server_argv(iface, state),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    data = json.loads(state.read_text())
    assert data["status"] == "failed" and data["error"] == "RuntimeError"
    assert "no model here" in data["traceback"] and "line 5" in data["traceback"]
    no_token = subprocess.run(
        [sys.executable, "-m", "seer.runtime.rpc_server", str(iface)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert no_token.returncode == 2 and "--token-file" in no_token.stderr
    empty = tmp_path / "empty-token"
    empty.write_text("\n")
    no_token = subprocess.run(
        [sys.executable, "-m", "seer.runtime.rpc_server", str(iface), "--token-file", str(empty)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert no_token.returncode == 2 and "the file is empty" in no_token.stderr


@pytest.mark.skipif(not Path("/proc/self/environ").is_file(), reason="reads /proc")
def test_the_token_is_read_from_a_file_it_deletes_and_is_in_no_environment(
    server: tuple[str, Path], client: RpcClient
) -> None:
    pid = client.health()["pid"]
    assert TOKEN.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
    assert TOKEN.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert not (server[1].parent / "token").exists()


@pytest.mark.unit
def test_served_interface_round_trips_and_builds_clients() -> None:
    spec = inspect_interface("@expose\ndef f(x: int) -> int:\n    return x\n", "i.py").functions[0]
    served = ServedInterface("tools", "/local/i.py", "http://127.0.0.1:1", "tok", [spec], doc="d")
    again = ServedInterface.from_dict(json.loads(json.dumps(served.to_dict())))
    assert again == served and "tok" not in repr(served)
    assert served.function("f") is spec
    with pytest.raises(UnknownFunctionError, match="exposes: f"):
        served.function("g")
    client = served.client(timeout=5)
    assert client.timeout == 5 and client.url == "http://127.0.0.1:1" and served.client().timeout == 300
    with pytest.raises(ValueError, match="url"):
        RpcClient("127.0.0.1:80", "t")


def test_a_port_nobody_listens_on_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RpcConnectionError, match=f"127.0.0.1:{port}"):
        RpcClient(f"http://127.0.0.1:{port}", "t", timeout=5).call("f")


@pytest.mark.unit
def test_module_docs_example_interface_is_valid() -> None:
    example = textwrap.dedent(
        """
        @expose
        def my_function(prompt: str, layer: int = 10) -> dict:
            '''Do it.'''
            return {}
        """
    )
    (spec,) = inspect_interface(example, "example.py").functions
    assert spec.signature == "(prompt: str, layer: int = 10) -> dict"


# --- one call, one execution; every failure an answer ---------------------------------------------
def test_a_result_that_cannot_be_encoded_is_a_remote_error_and_runs_once(client: RpcClient) -> None:
    assert client.call("add", 1) == 3  # a kept-alive connection in the pool, as in real use
    before = client.call("meta_count")
    with pytest.raises(RemoteError) as info:
        client.call("count_meta")
    assert info.value.function == "count_meta" and info.value.status == 500
    assert "count_meta() returned a value that could not be sent" in str(info.value)
    assert client.call("meta_count") == before + 1  # one call, one execution
    assert client.call("add", 1) == 3


def test_deep_json_and_numpy_bytes_or_void_arrays_are_clean_errors(
    server: tuple[str, Path], client: RpcClient
) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    deep = b'{"args": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"
    status, ctype, body = _raw(server[0], "POST", "/call/echo", deep, auth)
    assert status == 400 and ctype == "application/json"
    error = json.loads(body)["error"]
    assert error["code"] == "malformed" and "nested too deeply" in error["message"]
    for kind, dtype in (("bytes", "|S2"), ("void", "|V3")):
        status, _, body = _raw(
            server[0], "POST", "/call/odd_array", json.dumps({"args": [kind]}).encode(), auth
        )
        error = json.loads(body)["error"]
        assert status == 500 and error["code"] == "unserializable", error
        assert f"NumPy array of dtype {dtype}" in error["message"]
        with pytest.raises(SerializationError, match=f"NumPy array of dtype {re.escape(dtype)}"):
            client.call("odd_array", kind)  # the same refusal in the framed format
    assert client.call("add", 1) == 3


class _DroppingServer:
    """An HTTP server on 127.0.0.1 speaking just enough of the RPC protocol to answer ``add``,
    counting the calls it receives. ``drop`` names the calls (1-based) it reads whole and then
    closes the connection on without answering (a server that fails mid-answer);
    ``close_after`` the calls after whose answer it closes the kept-alive connection."""

    def __init__(self, *, drop: set[int] = frozenset(), close_after: set[int] = frozenset()):
        self.drop, self.close_after = drop, close_after
        self.calls = 0
        self.connections = 0
        self.closed = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        with conn, reader:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
                reader.read(length)
                self.calls += 1
                if self.calls in self.drop:
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                frame = serialize(self.calls)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-seer-rpc\r\n"
                    + f"Content-Length: {len(frame)}\r\n\r\n".encode()
                    + frame
                )
                if self.calls in self.close_after:
                    conn.shutdown(socket.SHUT_RDWR)
                    self.closed.set()
                    return

    def close(self) -> None:
        self.sock.close()


def test_a_call_the_server_received_is_never_sent_again() -> None:
    fake = _DroppingServer(drop={2})
    try:
        client = RpcClient(fake.url, TOKEN, timeout=10)
        assert client.call("add", 1) == 1  # its connection is kept alive and reused below
        with pytest.raises(RpcConnectionError, match="may have run") as info:
            client.call("add", 1)
        assert info.value.function == "add"
        assert fake.calls == 2  # not re-sent on a fresh connection
        assert client.call("add", 1) == 3
    finally:
        fake.close()


def test_a_kept_alive_connection_the_server_closed_is_replaced() -> None:
    fake = _DroppingServer(close_after={1})
    try:
        client = RpcClient(fake.url, TOKEN, timeout=10)
        assert client.call("add", 1) == 1
        assert fake.closed.wait(5)
        time.sleep(0.05)
        assert client.call("add", 1) == 2 and fake.calls == 2 and fake.connections == 2
    finally:
        fake.close()


def _rss(pid: int) -> int:
    """The resident memory of process ``pid``, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc")
def test_a_claimed_body_costs_only_what_arrives(tmp_path: Path) -> None:
    proc, url, _ = _start_server(tmp_path, "@expose\ndef one(x=None) -> int:\n    return 1\n")
    try:
        before = _rss(proc.pid)
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            claimed = 500_000_000  # under the default 512 MiB limit
            sock.sendall(
                f"POST /call/one HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {claimed}\r\n\r\n".encode()
                + b'{"args": ['
            )
            peak = before
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                peak = max(peak, _rss(proc.pid))
                time.sleep(0.05)
        assert peak - before < 50 * 2**20, f"the server grew by {(peak - before) / 2**20:.0f} MiB"
        assert RpcClient(url, TOKEN, timeout=10).call("one") == 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
