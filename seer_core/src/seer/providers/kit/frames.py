"""Docker's multiplexed output stream, demultiplexed as its bytes arrive.

An exec or attach without a TTY on a Docker engine sends stdout and stderr on one stream, as
frames: an 8-byte header (stream: 1 stdout, 2 stderr; three zero bytes; the payload's size, big
endian), then the payload. The docker SDK reads such frames from a socket it blocks on; a provider
pumping output through :class:`~seer.providers.kit.OutputPump` gets chunks split anywhere, so
this reassembles them incrementally. seer-docker's machines and seer-modal's fake control plane
(whose sandboxes are containers) both read exec output this way.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

__all__ = ["STDERR", "STDOUT", "StreamFrames"]

#: Stream numbers in a frame's header.
STDOUT = 1
STDERR = 2

_HEADER = struct.Struct(">BxxxL")


class StreamFrames:
    """Feed it the stream's bytes in chunks of any size; ``on_data(stream, payload)`` is called
    once per complete, non-empty frame, in order."""

    def __init__(self, on_data: Callable[[int, bytes], None]):
        self._buf = bytearray()
        self._on_data = on_data

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the stream; deliver every frame they complete."""
        self._buf += data
        while len(self._buf) >= _HEADER.size:
            stream, size = _HEADER.unpack_from(self._buf)
            end = _HEADER.size + size
            if len(self._buf) < end:
                return
            payload = bytes(self._buf[_HEADER.size : end])
            del self._buf[:end]
            if payload:
                self._on_data(stream, payload)

    @property
    def pending(self) -> int:
        """Bytes held of a frame not yet complete (0 once the stream ended cleanly)."""
        return len(self._buf)
