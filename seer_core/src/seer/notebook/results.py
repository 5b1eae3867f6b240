"""What running a cell gives back: :class:`CellResult` (its outputs, as text and as nbformat
outputs) and :class:`CellError`, and the :class:`OutputCollector` that builds them from the
kernel's iopub messages."""

from __future__ import annotations

import base64
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from seer.errors import (
    CellExecutionError,
)

__all__ = ["MODEL_INFO_MIME", "CellError", "CellResult", "OutputCollector", "strip_ansi"]

if TYPE_CHECKING:
    pass


#: The mimetype the model-loading cell reports ``describe()``'s text under; never recorded.
MODEL_INFO_MIME = "application/vnd.seer.model-info+json"

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (colours, cursor moves)."""
    return _ANSI.sub("", text)


# --- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellError:
    """An exception a cell raised."""

    ename: str
    evalue: str
    #: the formatted traceback, ANSI colours stripped
    traceback: str
    #: the traceback lines as the kernel sent them (with colours)
    raw_traceback: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.traceback or f"{self.ename}: {self.evalue}"


@dataclass
class CellResult:
    """What one cell produced.

    ``outputs`` are nbformat output dicts (``stream``, ``display_data``, ``execute_result``,
    ``error``) exactly as they are written to the notebook: images are base64 strings under
    ``data["image/png"]``, HTML under ``data["text/html"]``.
    """

    code: str
    stdout: str = ""
    stderr: str = ""
    #: ``text/plain`` of the cell's value (``execute_result``), if it had one
    result: str | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    error: CellError | None = None
    #: ``In[n]``; None for hidden cells
    execution_count: int | None = None
    hidden: bool = False
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the cell raised nothing."""
        return self.error is None

    def data(self, mimetype: str) -> list[Any]:
        """Every payload of ``mimetype`` the cell displayed or returned, in order."""
        return [
            out["data"][mimetype]
            for out in self.outputs
            if out.get("output_type") in ("display_data", "execute_result") and mimetype in out["data"]
        ]

    @property
    def images(self) -> list[bytes]:
        """The PNG and JPEG images the cell displayed, decoded."""
        found = []
        for out in self.outputs:
            data = out.get("data", {})
            for mime in ("image/png", "image/jpeg"):
                if mime in data:
                    found.append(base64.b64decode(data[mime]))
        return found

    def raise_for_error(self) -> CellResult:
        """Return self, or raise :class:`~seer.errors.CellExecutionError` if the cell raised."""
        if self.error is not None:
            raise CellExecutionError(f"the cell raised {self.error.ename}:\n{self.error}", result=self)
        return self

    def __str__(self) -> str:
        parts = [p for p in (self.stdout, self.stderr) if p]
        if self.result is not None:
            parts.append(self.result)
        if self.error is not None:
            parts.append(str(self.error))
        return "\n".join(p.rstrip("\n") for p in parts)


class OutputCollector:
    """Turns a cell's iopub messages into nbformat outputs."""

    def __init__(self, displays: dict[str, list[dict[str, Any]]]):
        self.outputs: list[dict[str, Any]] = []
        self.error: CellError | None = None
        self.model_info: dict[str, Any] | None = None
        self._clear_pending = False
        self._displays = displays
        self.updated_displays = False

    def append(self, out: dict[str, Any]) -> None:
        """Add one nbformat output, honouring a pending ``clear_output(wait=True)`` and merging a
        stream output into the one before it on the same stream."""
        if self._clear_pending:
            self.outputs.clear()
            self._clear_pending = False
        last = self.outputs[-1] if self.outputs else None
        if (
            out["output_type"] == "stream"
            and last is not None
            and last["output_type"] == "stream"
            and last["name"] == out["name"]
        ):
            last["text"] += out["text"]
            return
        self.outputs.append(out)

    def handle(self, msg_type: str, content: dict[str, Any]) -> None:
        """Take one iopub message of the cell (its type and content) into the outputs."""
        if msg_type == "stream":
            self.append(
                {"output_type": "stream", "name": content.get("name", "stdout"), "text": content["text"]}
            )
        elif msg_type in ("display_data", "execute_result"):
            data = content.get("data", {})
            if MODEL_INFO_MIME in data:
                self.model_info = data[MODEL_INFO_MIME]
                return
            out: dict[str, Any] = {
                "output_type": msg_type,
                "data": data,
                "metadata": content.get("metadata", {}),
            }
            if msg_type == "execute_result":
                out["execution_count"] = content.get("execution_count")
            self.append(out)
            display_id = (content.get("transient") or {}).get("display_id")
            if display_id:
                self._displays.setdefault(display_id, []).append(out)
        elif msg_type == "update_display_data":
            display_id = (content.get("transient") or {}).get("display_id")
            for out in self._displays.get(display_id or "", []):
                out["data"] = content.get("data", {})
                out["metadata"] = content.get("metadata", {})
                self.updated_displays = True
        elif msg_type == "clear_output":
            if content.get("wait"):
                self._clear_pending = True
            else:
                self.outputs.clear()
        elif msg_type == "error":
            raw = list(content.get("traceback", []))
            self.error = CellError(
                ename=content.get("ename", ""),
                evalue=content.get("evalue", ""),
                traceback=strip_ansi("\n".join(raw)),
                raw_traceback=raw,
            )
            self.append(
                {
                    "output_type": "error",
                    "ename": self.error.ename,
                    "evalue": self.error.evalue,
                    "traceback": raw,
                }
            )

    def error_from_reply(self, content: dict[str, Any]) -> None:
        """An error reply without an ``error`` message on iopub (e.g. an aborted request)."""
        if self.error is None and content.get("status") in ("error", "aborted"):
            raw = list(content.get("traceback", []))
            self.error = CellError(
                ename=content.get("ename", "Aborted" if content.get("status") == "aborted" else ""),
                evalue=content.get("evalue", ""),
                traceback=strip_ansi("\n".join(raw)),
                raw_traceback=raw,
            )

    def result(self, code: str, *, hidden: bool, execution_count: int | None, started: float) -> CellResult:
        """The :class:`CellResult` of the cell whose messages were collected."""
        stdout = "".join(
            o["text"] for o in self.outputs if o["output_type"] == "stream" and o["name"] == "stdout"
        )
        stderr = "".join(
            o["text"] for o in self.outputs if o["output_type"] == "stream" and o["name"] == "stderr"
        )
        value = None
        for out in self.outputs:
            if out["output_type"] == "execute_result":
                value = out["data"].get("text/plain")
        return CellResult(
            code=code,
            stdout=stdout,
            stderr=stderr,
            result=value,
            outputs=self.outputs,
            error=self.error,
            execution_count=execution_count,
            hidden=hidden,
            duration=time.monotonic() - started,
        )
