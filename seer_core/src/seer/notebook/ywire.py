"""The live document's wire and cells: the Y sync protocol's framing as jupyter-collaboration's
rooms speak it (message kinds, the RAW message that asks the server to save), and nbformat cells
as Y types and back (Yjs keeps every number as a float). :mod:`seer.notebook.live` uses them.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "RAW",
    "STEP2",
    "SYNC",
    "cell_from_y",
    "from_yjs",
    "raw_message",
    "read_raw",
    "reorder_ycells",
    "to_yjs",
    "update_ycell",
    "var_uint",
    "ycell",
    "youtput",
]

#: The first byte of a room's message: its kind.
SYNC, AWARENESS, RAW = 0, 1, 2
STEP1, STEP2, UPDATE = 0, 1, 2


def var_uint(num: int) -> bytes:
    out = bytearray()
    while True:
        byte = num & 0x7F
        num >>= 7
        if num:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def raw_message(text: str, number: int) -> bytes:
    data = text.encode()
    return bytes([RAW]) + var_uint(len(data)) + data + var_uint(number)


def read_raw(data: bytes) -> dict[str, Any] | None:
    """The JSON of a RAW message (the server's answer to a save), or None."""
    pos, length, shift = 1, 0, 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    try:
        decoded = json.loads(data[pos : pos + length])
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


def to_yjs(value: Any) -> Any:
    """``value`` (JSON) with ints as floats: Yjs keeps every number as a float, and a browser's
    JupyterLab reads an integer put there otherwise as a BigInt."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        return {k: to_yjs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_yjs(v) for v in value]
    return value


def from_yjs(value: Any) -> Any:
    """``value`` with the floats Yjs keeps numbers as turned back into ints where whole."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: from_yjs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_yjs(v) for v in value]
    return value


def ycell(pycrdt: Any, cell: dict[str, Any]) -> Any:
    """A new Y map for nbformat ``cell`` (its source a Y text, outputs a Y array)."""
    value: dict[str, Any] = {
        k: to_yjs(v) for k, v in cell.items() if k not in ("source", "metadata", "outputs")
    }
    value["source"] = pycrdt.Text(str(cell.get("source", "")))
    value["metadata"] = pycrdt.Map(to_yjs(json.loads(json.dumps(cell.get("metadata") or {}))))
    if cell.get("cell_type") == "code":
        value["outputs"] = pycrdt.Array([youtput(pycrdt, o) for o in cell.get("outputs") or []])
        value["execution_state"] = "idle"
    return pycrdt.Map(value)


def youtput(pycrdt: Any, output: dict[str, Any]) -> Any:
    """A new Y map for nbformat ``output`` (a stream's text a Y text)."""
    value = to_yjs(json.loads(json.dumps(output)))
    if value.get("output_type") == "stream":
        text = value.get("text", "")
        value["text"] = pycrdt.Text("".join(text) if isinstance(text, list) else str(text))
    return pycrdt.Map(value)


def update_ycell(pycrdt: Any, ycell: Any, cell: dict[str, Any], known: dict[str, str]) -> None:
    """Make Y map ``ycell`` agree with nbformat ``cell``, changing only what differs; outputs
    streaming in are appended. ``known`` holds, per cell id, the outputs as this writer last put
    them or read them (JSON), and is updated."""
    source = str(cell.get("source", ""))
    ytext = ycell.get("source")
    if ytext is None or str(ytext) != source:
        if ytext is None:
            ycell["source"] = pycrdt.Text(source)
        else:
            del ytext[:]
            ytext += source
    metadata = cell.get("metadata") or {}
    ymeta = ycell.get("metadata")
    if ymeta is None or from_yjs(ymeta.to_py()) != metadata:
        ycell["metadata"] = pycrdt.Map(to_yjs(json.loads(json.dumps(metadata))))
    if cell.get("cell_type") != "code":
        return
    if from_yjs(ycell.get("execution_count")) != cell.get("execution_count"):
        ycell["execution_count"] = to_yjs(cell.get("execution_count"))
    outputs = cell.get("outputs") or []
    text = json.dumps(outputs, sort_keys=True)
    cid = str(cell.get("id"))
    if known.get(cid) != text:
        youtputs = ycell.get("outputs")
        old = json.loads(known.get(cid) or "[]")
        if youtputs is not None and len(youtputs) >= len(old) and outputs[: len(old)] == old:
            # outputs streaming in: append what is new (the last one may have grown)
            start = len(old)
            if old and outputs[len(old) - 1] != old[-1]:
                start = len(old) - 1
                del youtputs[start]
            youtputs.extend([youtput(pycrdt, o) for o in outputs[start:]])
        else:
            ycell["outputs"] = pycrdt.Array([youtput(pycrdt, o) for o in outputs])
        known[cid] = text


def cell_from_y(yentry: Any, cid: str, known: dict[str, str]) -> dict[str, Any]:
    """The nbformat cell (id ``cid``) that Y map ``yentry`` holds; its outputs' JSON goes into
    ``known`` (see :func:`update_ycell`)."""
    cell: dict[str, Any] = from_yjs(yentry.to_py() or {})
    cell.pop("execution_state", None)
    cell["id"] = cid
    cell.setdefault("metadata", {})
    cell["source"] = str(cell.get("source", ""))
    if cell.get("cell_type") == "code":
        cell.setdefault("outputs", [])
        cell.setdefault("execution_count", None)
        known[cid] = json.dumps(cell["outputs"], sort_keys=True)
    elif not cell.get("attachments"):
        cell.pop("attachments", None)
    return cell


def reorder_ycells(
    pycrdt: Any,
    ycells: Any,
    ids: list[str],
    cells: list[dict[str, Any]],
    moved: set[str],
    known: dict[str, str],
) -> None:
    """Put the cells in ``moved`` (the ones this writer moved) where they are in its order:
    after the cell that precedes each here (before the one that follows, at the top). Other
    writers' cells are never moved from here: this writer's copy of them may be behind. A
    shared cell cannot be moved in place: a moved cell is deleted and inserted again. ``ids``
    (the document's cell ids, in order) and ``known`` (see :func:`update_ycell`) follow."""
    if len(set(ids)) != len(ids):
        return  # the same cell twice (writers raced): moving by id would be ambiguous
    order = [str(c.get("id")) for c in cells]
    for k, cell in enumerate(cells):
        cid = order[k]
        if cid not in moved or cid not in ids:
            continue
        source = ids.index(cid)
        before = next((o for o in reversed(order[:k]) if o in ids and o != cid), None)
        after = next((o for o in order[k + 1 :] if o in ids and o != cid), None)
        del ycells[source]
        ids.pop(source)
        if before is not None:
            dest = ids.index(before) + 1
        elif after is not None:
            dest = ids.index(after)
        else:
            dest = 0
        ycells.insert(dest, ycell(pycrdt, cell))
        ids.insert(dest, cid)
        if cell.get("cell_type") == "code":
            known[cid] = json.dumps(cell.get("outputs") or [], sort_keys=True)
