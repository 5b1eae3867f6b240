"""The RPC wire format: msgpack, with NumPy arrays and torch tensors carried out of band.

A *frame* (the body of every request and answer with ``Content-Type: application/x-seer-rpc``)::

    b"SRPC" | u32 big-endian N | N bytes of msgpack | zero padding to 64 | buffer 0 | pad | buffer 1 ...

The msgpack part holds the value. An array or tensor in it is a msgpack *ext* (code 1: NumPy
array, code 2: torch tensor) whose payload is ``[dtype, shape, offset, nbytes]``: its raw bytes
(C order, little-endian) sit after the msgpack part, at ``offset`` from the (64-byte aligned)
start of the buffers. So a large tensor is written to the socket straight from its memory and read
into one buffer the decoded array points into: no copies beyond the one the kernel makes.

What crosses, and how it comes back:

========================================  =================================================
sent                                      received
========================================  =================================================
None, bool, int (64-bit), float, str      the same
bytes, bytearray, memoryview              bytes
list, tuple                               list (as in JSON)
set, frozenset                            list (as in JSON; a ``set[...]`` hinted parameter
                                          gets a set again)
dict (str or int keys, or any of these)   dict
NumPy array (bool, int, uint, float,      NumPy array: same dtype and shape (a
complex; any layout)                      non-contiguous one arrives contiguous)
NumPy scalar                              the Python scalar
torch tensor (any device, incl.           torch tensor on the CPU, same dtype and shape, when
bfloat16, float16, bool, ...)             torch is importable here; otherwise a NumPy array
                                          (bfloat16 arrives as float32, exactly)
========================================  =================================================

Anything else (a dataclass, a model, a datetime) is refused with a
:class:`~seer.errors.SerializationError` naming its type and where it is (``result['x'][2]``).

:func:`serialize` / :func:`deserialize` turn a value into one ``bytes`` frame and back;
:func:`encode` gives the frame as a list of buffers for writing without joining them.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from typing import Any

import msgpack

from seer.errors import SerializationError

__all__ = [
    "CONTENT_TYPE",
    "decode",
    "deserialize",
    "encode",
    "serialize",
    "to_jsonable",
]

CONTENT_TYPE = "application/x-seer-rpc"
MAGIC = b"SRPC"
_PREFIX = struct.Struct(">4sI")
ALIGN = 64
EXT_NDARRAY = 1
EXT_TENSOR = 2

#: dtypes a tensor may have, and the NumPy dtype its raw bytes are read as
_TORCH_RAW = {"bfloat16": "<i2"}
_NUMPY_KINDS = "biufc"
_JSON_KINDS = "biuf"
_SUPPORTED = (
    "None, bool, int (64-bit), float, str, bytes, list, tuple, set, dict, NumPy arrays and scalars, "
    "torch tensors"
)


class _Refused(Exception):
    def __init__(self, what: str):
        self.what = what


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _type_name(obj: Any) -> str:
    cls = type(obj)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _torch() -> Any:
    return sys.modules.get("torch")


def _numpy_raw(arr: Any) -> tuple[str, Any]:
    """(dtype name, C-contiguous little-endian array) for a NumPy array, or raise _Refused."""
    import numpy as np

    if arr.dtype.kind not in _NUMPY_KINDS or arr.dtype.fields is not None:
        raise _Refused(f"NumPy array of dtype {arr.dtype}")
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and sys.byteorder == "big"):
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    arr = np.ascontiguousarray(arr)
    return arr.dtype.newbyteorder("=").name, arr


def _tensor_raw(t: Any) -> tuple[str, Any]:
    """(dtype name, C-contiguous NumPy view of its bytes) for a torch tensor, or raise _Refused."""
    torch = _torch()
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    t = t.contiguous()
    name = str(t.dtype).removeprefix("torch.")
    if name == "bfloat16":
        return name, t.view(torch.int16).numpy()
    try:
        arr = t.numpy()
    except (TypeError, RuntimeError):
        raise _Refused(f"torch tensor of dtype {t.dtype}") from None
    if arr.dtype.kind not in _NUMPY_KINDS:
        raise _Refused(f"torch tensor of dtype {t.dtype}")
    return name, arr


def encode(obj: Any, *, label: str = "value") -> tuple[list[Any], int]:
    """``obj`` as a frame: a list of buffers (bytes or memoryviews) to write in order, and their
    total length. Raises :class:`~seer.errors.SerializationError` naming what cannot cross and
    where it is (``label`` names ``obj`` itself: ``result``, ``args``)."""
    buffers: list[tuple[int, memoryview]] = []
    end = 0

    def default(o: Any) -> Any:
        nonlocal end
        cls_module = type(o).__module__
        torch = _torch()
        if torch is not None and isinstance(o, torch.Tensor):
            code = EXT_TENSOR
            dtype, raw = _tensor_raw(o)
        elif _is_ndarray(o):
            code = EXT_NDARRAY
            dtype, raw = _numpy_raw(o)
        elif isinstance(o, set | frozenset):
            return list(o)
        elif isinstance(o, memoryview):
            return o.tobytes()
        elif isinstance(o, int):
            raise _Refused("an int outside the 64-bit range")
        elif cls_module == "numpy" and hasattr(o, "item") and getattr(o, "shape", None) == ():
            value = o.item()
            if isinstance(value, bytes | str | bool | int | float):
                return value
            raise _Refused(f"NumPy scalar of dtype {o.dtype}")
        else:
            raise _Refused(_type_name(o))
        offset = _align(end)
        view = memoryview(raw.reshape(-1).view("u1")) if raw.size else memoryview(b"")
        buffers.append((offset, view))
        end = offset + view.nbytes
        payload = msgpack.packb([dtype, list(raw.shape), offset, view.nbytes])
        return msgpack.ExtType(code, payload)

    try:
        head = msgpack.packb(obj, default=default, use_bin_type=True, datetime=False)
    except _Refused as exc:
        path = _find(obj, label)
        raise SerializationError(
            f"cannot send {exc.what}{f' at {path}' if path else ''}; the wire carries {_SUPPORTED}"
        ) from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise SerializationError(f"cannot serialize: {exc}") from None
    parts: list[Any] = [_PREFIX.pack(MAGIC, len(head)), head]
    total = _PREFIX.size + len(head)
    if buffers:
        start = _align(total)
        parts.append(bytes(start - total))
        pos = 0
        for offset, view in buffers:
            if offset > pos:
                parts.append(bytes(offset - pos))
            parts.append(view)
            pos = offset + view.nbytes
        total = start + pos
    return parts, total


def _is_ndarray(o: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(o, np.ndarray)


def serialize(obj: Any) -> bytes:
    """``obj`` as one frame (see the module docs)."""
    parts, _ = encode(obj)
    return b"".join(parts)


def decode(frame: bytes | bytearray | memoryview, *, tensors: str = "auto") -> Any:
    """The value in a frame. Arrays point into ``frame`` (no copy) when it is writable (a
    ``bytearray``); from read-only ``bytes`` they are copied out.

    ``tensors``: ``"auto"`` gives torch tensors when torch is importable, NumPy arrays otherwise;
    ``"numpy"`` always gives NumPy arrays.
    """
    view = memoryview(frame)
    if view.nbytes < _PREFIX.size:
        raise SerializationError("malformed message: shorter than its header")
    magic, length = _PREFIX.unpack_from(view)
    if magic != MAGIC or _PREFIX.size + length > view.nbytes:
        raise SerializationError("malformed message: not a seer RPC frame")
    region = _align(_PREFIX.size + length)
    size = view.nbytes

    def ext_hook(code: int, data: bytes) -> Any:
        if code not in (EXT_NDARRAY, EXT_TENSOR):
            return msgpack.ExtType(code, data)
        try:
            dtype, shape, offset, nbytes = msgpack.unpackb(data)
        except (ValueError, msgpack.UnpackException):
            raise SerializationError("malformed message: bad array header") from None
        start = region + int(offset)
        if start + int(nbytes) > size:
            raise SerializationError("malformed message: an array runs past the end")
        return _array(view, dtype, shape, start, int(nbytes), code == EXT_TENSOR and tensors == "auto")

    try:
        return msgpack.unpackb(
            view[_PREFIX.size : _PREFIX.size + length],
            ext_hook=ext_hook,
            raw=False,
            strict_map_key=False,
            use_list=True,
        )
    except SerializationError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise SerializationError(f"malformed message: {exc}") from None


def deserialize(frame: bytes | bytearray | memoryview, *, tensors: str = "auto") -> Any:
    """The value in a frame (see :func:`decode`)."""
    return decode(frame, tensors=tensors)


_torch_import_failed = False


def _import_torch() -> Any:
    global _torch_import_failed
    torch = _torch()
    if torch is not None or _torch_import_failed:
        return torch
    try:
        import torch
    except ImportError:
        _torch_import_failed = True
        return None
    return torch


def _array(view: memoryview, dtype: str, shape: list[int], start: int, nbytes: int, as_tensor: bool) -> Any:
    try:
        import numpy as np
    except ImportError:
        raise SerializationError(
            "the message holds an array, and NumPy is not installed here: pip install numpy"
        ) from None
    raw_dtype = np.dtype(_TORCH_RAW.get(dtype, dtype))
    count = nbytes // raw_dtype.itemsize if raw_dtype.itemsize else 0
    arr = np.frombuffer(view, dtype=raw_dtype, count=count, offset=start) if count else np.empty(0, raw_dtype)
    arr = arr.reshape(shape)
    if not arr.flags.writeable:
        arr = arr.copy()
    torch = _import_torch() if as_tensor else None
    if torch is not None:
        tensor = torch.from_numpy(arr)
        return tensor.view(torch.bfloat16) if dtype == "bfloat16" else tensor
    if dtype == "bfloat16":  # no bfloat16 in NumPy: widen to float32, which is exact
        return (arr.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return arr


# --- errors: where is the value that cannot cross -------------------------------------------
def _walk(obj: Any, path: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    yield path, obj
    if depth > 100:
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _walk(value, f"{path}[{key!r}]", depth + 1)
    elif isinstance(obj, list | tuple):
        for i, value in enumerate(obj):
            yield from _walk(value, f"{path}[{i}]", depth + 1)


def _find(obj: Any, label: str) -> str | None:
    """The path (``value['x'][2]``) of the first value that cannot be encoded."""
    for path, value in _walk(obj, label):
        if isinstance(value, dict | list | tuple | str | bytes | float | bool | type(None)):
            continue
        if isinstance(value, int):
            if -(2**63) <= value < 2**64:
                continue
            return path
        try:
            msgpack.packb(value, default=_leaf_default)
        except (_Refused, TypeError, ValueError, OverflowError):
            return path
    return None


def _leaf_default(o: Any) -> Any:
    torch = _torch()
    if (torch is not None and isinstance(o, torch.Tensor)) or _is_ndarray(o):
        raw = _tensor_raw(o) if not _is_ndarray(o) else _numpy_raw(o)
        return msgpack.ExtType(EXT_NDARRAY, raw[0].encode())
    if isinstance(o, set | frozenset):
        return list(o)
    if isinstance(o, memoryview):
        return o.tobytes()
    if type(o).__module__ == "numpy" and getattr(o, "shape", None) == ():
        value = o.item()
        if isinstance(value, bytes | str | bool | int | float):
            return value
    raise _Refused(_type_name(o))


# --- JSON, for callers that ask for it (curl, tools) -----------------------------------------
def to_jsonable(obj: Any) -> Any:
    """``obj`` with arrays and tensors as nested lists, tuples and sets as lists and bytes as
    latin-1 text: what a JSON answer carries (lossy for dtypes; the frame format is not)."""
    torch = _torch()
    if isinstance(obj, dict):
        return {
            k if isinstance(k, str | int | float | bool) else str(k): to_jsonable(v) for k, v in obj.items()
        }
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, bytes | bytearray | memoryview):
        return bytes(obj).decode("latin-1")
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.is_complex():
            raise SerializationError(f"cannot send torch tensor of dtype {obj.dtype} as JSON")
        t = obj.detach().cpu()
        return (t.float() if t.dtype == torch.bfloat16 else t).tolist()
    if _is_ndarray(obj):
        # Numbers only: bytes, void, object, record and complex arrays have no JSON form.
        if obj.dtype.kind not in _JSON_KINDS or obj.dtype.fields is not None:
            raise SerializationError(f"cannot send NumPy array of dtype {obj.dtype} as JSON")
        return obj.tolist()
    if type(obj).__module__ == "numpy" and hasattr(obj, "item") and getattr(obj, "shape", None) == ():
        value = obj.item()
        if isinstance(value, bytes | str | bool | int | float):
            return to_jsonable(value)
        raise SerializationError(f"cannot send NumPy scalar of dtype {obj.dtype} as JSON")
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    raise SerializationError(f"cannot send {_type_name(obj)} as JSON")
