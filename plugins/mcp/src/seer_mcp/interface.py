"""The interface MCP server: the ``@expose`` functions of an interface served from a ScopedSandbox,
as MCP tools (stdio).

``ScopedSandbox.serve("interface.py", expose_as="mcp")`` returns the config that starts it
(``python -m seer_mcp.interface``) with the interface's RPC endpoint in the environment:
``SEER_RPC_URL``, ``SEER_RPC_TOKEN`` and ``SEER_RPC_NAME``; ``SEER_RPC_TIMEOUT`` caps each call
(seconds, default 300; ``none`` for no limit).

One tool per exposed function: its name, the function's docstring and signature as description,
and the JSON Schema read from its type hints (:attr:`seer.rpc.FunctionSpec.input_schema`) as
input schema. A call runs the function in the sandbox over RPC (progress notifications every
second while it runs). Results come back as text: strings as they are, other values as compact
JSON (a list of numbers on one line); tensors and arrays, wherever they sit in the result, as a
summary (shape, dtype, min, max, mean, std, a preview) plus, for small ones (up to
:data:`MAX_DATA_ELEMENTS` elements), the data as JSON lists. The same JSON is the result's
``structuredContent`` (``{"result": ...}``) when it fits in :data:`MAX_TEXT` characters; text
longer than that is clipped with a note, as the notebook tools clip. A function that raised
comes back as an error result with the remote traceback.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from seer.errors import (
    BadArgumentsError,
    RemoteError,
    RpcAuthError,
    RpcConnectionError,
    RpcError,
    RpcTimeoutError,
    UnknownFunctionError,
)
from seer.rpc import FunctionSpec, RpcClient

__all__ = ["MAX_DATA_ELEMENTS", "MAX_TEXT", "InterfaceTools", "main", "render", "summarize_array"]

#: Arrays with at most this many elements come back whole (as JSON lists) beside their summary.
MAX_DATA_ELEMENTS = 1000
#: A preview shows at most this many elements (the edges of each axis beyond it).
PREVIEW_THRESHOLD = 60
#: Bytes values up to this size come back whole (base64).
MAX_DATA_BYTES = 4096
#: Longest text block a result carries.
MAX_TEXT = 60_000
#: Seconds between progress notifications while a call runs.
PROGRESS_INTERVAL = float(os.environ.get("SEER_MCP_PROGRESS_INTERVAL") or 1.0)

_INTERNAL_ERROR = -32603


# --- results ---------------------------------------------------------------------------------


def _is_array(value: Any) -> bool:
    module = type(value).__module__
    return (
        (module == "numpy" or module.startswith("torch"))
        and hasattr(value, "shape")
        and hasattr(value, "dtype")
    )


def _to_numpy(value: Any) -> tuple[Any, str, str]:
    """``(numpy array, "tensor" or "array", dtype)`` for a NumPy array or torch tensor. (The wire
    brings tensors to the CPU: where one lived in the sandbox is not known here.)"""
    import numpy as np

    if type(value).__module__.startswith("torch"):
        import torch

        tensor = value.detach().cpu()
        dtype = str(value.dtype).removeprefix("torch.")
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()
        return tensor.numpy(), "tensor", dtype
    arr = np.asarray(value)
    return arr, "array", str(arr.dtype)


def _number(x: Any) -> Any:
    """A JSON-safe number: NaN and infinities as strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _jsonable_list(value: Any) -> Any:
    if isinstance(value, list):
        return [_jsonable_list(v) for v in value]
    if isinstance(value, complex):
        return [_number(value.real), _number(value.imag)]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return _number(value)


def summarize_array(value: Any) -> dict[str, Any]:
    """A tensor or array as a JSON-able summary: type, dtype, shape, statistics, a preview,
    and the data itself (nested lists) when it has at most :data:`MAX_DATA_ELEMENTS` elements."""
    import numpy as np

    arr, kind, dtype = _to_numpy(value)
    out: dict[str, Any] = {"type": kind, "dtype": dtype, "shape": list(arr.shape), "size": int(arr.size)}
    if arr.size and arr.dtype.kind in "biuf":
        data = arr.astype(np.float64) if arr.dtype.kind == "b" else arr
        if arr.dtype.kind == "f":
            nans = int(np.isnan(data).sum())
            if nans:
                out["nan_count"] = nans
            finite = data[np.isfinite(data)]
        else:
            finite = data.reshape(-1)
        if finite.size:
            out["min"] = _number(float(finite.min()))
            out["max"] = _number(float(finite.max()))
            out["mean"] = _number(float(finite.mean(dtype=np.float64)))
            out["std"] = _number(float(finite.std(dtype=np.float64)))
    out["preview"] = np.array2string(
        arr, threshold=PREVIEW_THRESHOLD, edgeitems=3, precision=4, separator=", ", max_line_width=100
    )
    if arr.size <= MAX_DATA_ELEMENTS:
        out["data"] = _jsonable_list(arr.tolist())
    else:
        out["data_omitted"] = (
            f"{arr.size} elements, more than the {MAX_DATA_ELEMENTS} returned whole: slice or reduce it in "
            "the function to get the values"
        )
    return out


def _summary_text(summary: Mapping[str, Any]) -> str:
    shape = "x".join(str(n) for n in summary["shape"]) or "scalar"
    head = f"{summary['type']} {summary['dtype']}, shape [{shape}] ({summary['size']} elements)"
    lines = [head]
    stats = [
        f"{key} {summary[key]:.6g}"
        for key in ("min", "max", "mean", "std")
        if isinstance(summary.get(key), float | int)
    ]
    if stats:
        lines.append("  ".join(stats) + (f"  ({summary['nan_count']} NaN)" if "nan_count" in summary else ""))
    lines.append(summary["preview"])
    if "data_omitted" in summary:
        lines.append(f"(data omitted: {summary['data_omitted']})")
    return "\n".join(lines)


def _jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-able data, every tensor and array replaced by its summary."""
    if depth > 50:
        return repr(value)
    if _is_array(value):
        return summarize_array(value)
    if isinstance(value, Mapping):
        return {str(k) if not isinstance(k, str) else k: _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        if len(raw) <= MAX_DATA_BYTES:
            return {"type": "bytes", "size": len(raw), "base64": base64.b64encode(raw).decode()}
        return {"type": "bytes", "size": len(raw), "data_omitted": f"more than {MAX_DATA_BYTES} bytes"}
    if isinstance(value, float):
        return _number(value)
    if value is None or isinstance(value, str | int | bool):
        return value
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return _jsonable(value.item(), depth + 1)
    return repr(value)


def _clip(text: str) -> str:
    """``text``, or its start and end around a note saying how much was cut (as the notebook
    tools clip), when it is longer than :data:`MAX_TEXT`."""
    if len(text) <= MAX_TEXT:
        return text
    half = MAX_TEXT // 2
    cut = len(text) - 2 * half
    return (
        f"{text[:half]}\n\n... [{cut} of {len(text)} characters cut: return less (a slice, a summary) "
        f"to see it whole] ...\n\n{text[-half:]}"
    )


#: A JSON value whose one-line form is at most this long is written on one line.
LINE = 100


def _dumps(data: Any, indent: str = "") -> str:
    """JSON that reads well and stays short: a value that fits on a line is written on one
    (a list of numbers is never one number per line); a longer object gets a line per key and
    a longer list of objects or lists a line per item."""
    line = json.dumps(data, ensure_ascii=False)
    if len(line) <= LINE or not data or not isinstance(data, dict | list):
        return line
    inner = indent + "  "
    if isinstance(data, dict):
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {_dumps(v, inner)}" for k, v in data.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if not any(isinstance(v, dict | list) for v in data):
        return line  # numbers and strings: one line, however long (clipped like any text)
    return "[\n" + ",\n".join(f"{inner}{_dumps(v, inner)}" for v in data) + f"\n{indent}]"


def render(value: Any) -> types.CallToolResult:
    """A function's result as MCP content: readable text first, the data as JSON.

    Text past :data:`MAX_TEXT` characters is clipped with a note; ``structuredContent``
    (``{"result": ...}``) comes only with a result whose JSON fits in that size too, so no
    client is handed a huge answer whole."""
    data = _jsonable(value)
    structured: dict[str, Any] | None = {"result": data}
    if _is_array(value):
        blocks = [types.TextContent(type="text", text=_clip(_summary_text(data)))]
        if "data" in data:
            blocks.append(types.TextContent(type="text", text=_clip(json.dumps(data["data"]))))
    else:
        if isinstance(value, str):
            text = value
        elif value is None:
            text = "None"
        else:
            text = _dumps(data)
        blocks = [types.TextContent(type="text", text=_clip(text))]
    if len(json.dumps(structured, ensure_ascii=False)) > MAX_TEXT:
        structured = None
    return types.CallToolResult(content=blocks, structured_content=structured)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=_clip(text))], is_error=True)


# --- the server ------------------------------------------------------------------------------


class InterfaceTools:
    """The tools of one served interface: its functions, fetched from the RPC server on first use."""

    def __init__(self, url: str, token: str, name: str = "", *, timeout: float | None = 300.0):
        self.url = url
        self.name = name or "interface"
        self.client = RpcClient(url, token, timeout=timeout)
        self._specs: dict[str, FunctionSpec] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> InterfaceTools:
        env = os.environ if environ is None else environ
        url, token = env.get("SEER_RPC_URL", ""), env.get("SEER_RPC_TOKEN", "")
        if not url or not token:
            raise SystemExit(
                "seer_mcp.interface: set SEER_RPC_URL and SEER_RPC_TOKEN (the config that "
                "ScopedSandbox.serve(..., expose_as='mcp') returns does)"
            )
        raw = (env.get("SEER_RPC_TIMEOUT") or "300").strip().lower()
        timeout = None if raw in ("none", "0", "") else float(raw)
        return cls(url, token, env.get("SEER_RPC_NAME", ""), timeout=timeout)

    def specs(self, *, refresh: bool = False) -> dict[str, FunctionSpec]:
        """The exposed functions by name (blocking: asks the RPC server once)."""
        with self._lock:
            if self._specs is None or refresh:
                try:
                    self._specs = {f.name: f for f in self.client.functions()}
                except RpcAuthError as exc:
                    raise MCPError(_INTERNAL_ERROR, _stale_token(exc)) from exc
                except RpcError as exc:
                    raise MCPError(_INTERNAL_ERROR, _unreachable(self, exc)) from exc
            return self._specs

    def tool(self, spec: FunctionSpec) -> types.Tool:
        doc = spec.doc.strip() or f"The exposed function {spec.name} of the interface {self.name!r}."
        description = f"{doc}\n\nSignature: {spec.name}{spec.signature}"
        schema = dict(spec.input_schema) or {"type": "object", "properties": {}}
        schema.setdefault("type", "object")
        return types.Tool(name=spec.name, description=description, input_schema=schema)

    def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """(Blocking.) Call the function ``name``; every failure is an error result saying why."""
        specs = self.specs()
        spec = specs.get(name) or self.specs(refresh=True).get(name)
        if spec is None:
            known = ", ".join(sorted(self.specs())) or "none"
            return _error(f"The interface {self.name!r} has no function {name!r}; its tools: {known}.")
        problem = _check_arguments(spec, arguments)
        if problem:
            return _error(f"{problem}\nSignature: {spec.name}{spec.signature}")
        try:
            value = self.client.invoke(name, (), arguments)
        except RemoteError as exc:
            text = f"{name}() raised {exc.remote_type}: {exc.message}"
            if exc.traceback.strip():
                text += f"\n\nTraceback (in the sandbox):\n{exc.traceback.rstrip()}"
            return _error(text)
        except BadArgumentsError as exc:
            return _error(f"{exc}\nSignature: {spec.name}{spec.signature}")
        except UnknownFunctionError as exc:
            self._specs = None
            return _error(f"{exc}. The interface changed since the tools were listed: list them again.")
        except RpcAuthError as exc:
            return _error(_stale_token(exc))
        except RpcConnectionError as exc:
            return _error(_unreachable(self, exc))
        except RpcTimeoutError as exc:
            return _error(f"{exc} (SEER_RPC_TIMEOUT sets this server's limit per call)")
        except RpcError as exc:
            return _error(f"{type(exc).__name__}: {exc}")
        try:
            return render(value)
        except Exception as exc:  # a result we cannot describe still says what it was
            return _error(f"{name}() returned a {type(value).__name__} that could not be shown: {exc}")


def _check_arguments(spec: FunctionSpec, arguments: Mapping[str, Any]) -> str:
    names = [p.name for p in spec.params]
    unknown = sorted(set(arguments) - set(names))
    missing = [p.name for p in spec.params if p.required and p.name not in arguments]
    parts = []
    if unknown:
        parts.append(f"{spec.name}() has no parameter {', '.join(repr(u) for u in unknown)}")
    if missing:
        parts.append(f"{spec.name}() is missing {', '.join(repr(m) for m in missing)}")
    return "; ".join(parts)


def _stale_token(exc: Exception) -> str:
    return (
        f"The RPC server refused this MCP server's token ({exc}): the interface was served again with a "
        "new token. Use the MCP config the new serve(..., expose_as='mcp') returned."
    )


def _unreachable(tools: InterfaceTools, exc: Exception) -> str:
    return (
        f"Cannot reach the RPC server of the interface {tools.name!r} at {tools.url} ({exc}). Is the "
        "sandbox still running? `seer ls` lists running sandboxes; serving the interface again gives a "
        "new MCP config."
    )


def build_server(tools: InterfaceTools) -> Server[Any]:
    """A low-level MCP server whose tools are ``tools``' functions."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        specs = await anyio.to_thread.run_sync(tools.specs)
        return types.ListToolsResult(tools=[tools.tool(s) for s in specs.values()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name, arguments = params.name, dict(params.arguments or {})
        started = time.monotonic()
        outcome: list[types.CallToolResult] = []

        def run() -> None:
            try:
                outcome.append(tools.call(name, arguments))
            except MCPError as exc:
                outcome.append(_error(exc.message))
            except Exception as exc:
                outcome.append(_error(f"unexpected error: {type(exc).__name__}: {exc}"))

        async def ticker() -> None:
            while True:
                await anyio.sleep(PROGRESS_INTERVAL)
                elapsed = time.monotonic() - started
                with contextlib.suppress(Exception):
                    await ctx.session.report_progress(elapsed, None, f"{name}() running for {elapsed:.0f}s")

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
            tg.cancel_scope.cancel()
        return outcome[0]

    return Server(
        f"seer-{tools.name}",
        instructions=(
            f"Tools calling the functions of the interface {tools.name!r}, which run in a seer sandbox "
            "(on its GPU, with its models). Tensors and arrays in results come back as a summary "
            "(shape, dtype, statistics, a preview) plus the values for small ones."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _serve(server: Server[Any]) -> None:
    from seer_mcp._stdio import serve_stdio

    async with serve_stdio() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the interface's tools on stdio until the client closes stdin (or SIGTERM)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return
    tools = InterfaceTools.from_env()

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        anyio.run(_serve, build_server(tools))
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        tools.client.close()


if __name__ == "__main__":
    main()
