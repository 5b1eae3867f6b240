"""Images for tests that need one, built by hand (no PIL, no matplotlib)."""

from __future__ import annotations

import struct
import zlib


def tiny_png(width: int, height: int, rgb: bytes) -> bytes:
    """A valid ``width`` x ``height`` PNG filled with one ``rgb`` colour (3 bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack("!I", len(data)) + kind + data + struct.pack("!I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + rgb * width for _ in range(height))
    header = struct.pack("!IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
