"""The stdio transport seer's MCP servers run on: the mcp SDK's ``stdio_server`` fed by
non-blocking pipe streams.

The SDK's own streams read and write stdin/stdout through worker threads (``anyio.wrap_file``):
three thread hand-offs a request. When stdin and stdout are pipes or sockets (as an MCP client
starts a server), these streams wait on the descriptors in the event loop instead, which takes
about half a millisecond off every tool call. Like the SDK, they take the protocol's descriptors
for themselves and point fd 0 at the null device and fd 1 at stderr while serving, so stray
output (of the server, its libraries, the processes it starts) never reaches the wire. Anything
else (a terminal, a file, ``SEER_MCP_STDIO=sdk``) gets the SDK's streams.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.server.stdio import stdio_server

__all__ = ["serve_stdio"]

_CHUNK = 1 << 16


class _PipeLines:
    """``async for line in ...`` over a non-blocking descriptor."""

    def __init__(self, fd: int):
        self._fd = fd
        self._buffer = b""
        self._eof = False

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line, self._buffer = self._buffer[: end + 1], self._buffer[end + 1 :]
                return line.decode("utf-8", "replace")
            if self._eof:
                if self._buffer:
                    line, self._buffer = self._buffer, b""
                    return line.decode("utf-8", "replace")
                raise StopAsyncIteration
            try:
                chunk = os.read(self._fd, _CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self._eof = True
            self._buffer += chunk


class _PipeWriter:
    """``await write(text)`` / ``await flush()`` on a non-blocking descriptor."""

    def __init__(self, fd: int):
        self._fd = fd
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        async with self._lock:
            while data:
                try:
                    written = os.write(self._fd, data)
                except BlockingIOError:
                    await anyio.wait_writable(self._fd)
                    continue
                data = data[written:]

    async def flush(self) -> None:
        """Every write is already on the wire."""


def _is_stream(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def serve_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` for ``Server.run``, on this process's stdin and stdout."""
    fast = (
        os.environ.get("SEER_MCP_STDIO", "").lower() != "sdk"
        and sys.platform != "win32"
        and _is_stream(0)
        and _is_stream(1)
    )
    if not fast:
        async with stdio_server() as streams:
            yield streams
        return
    import fcntl

    sys.stdout.flush()
    # Private copies of the protocol's descriptors (not inherited by children), then fd 0 reads
    # nothing and fd 1 writes to stderr while the server runs.
    read_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    write_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    saved_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    saved_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    try:
        async with stdio_server(_PipeLines(read_fd), _PipeWriter(write_fd)) as streams:  # type: ignore[arg-type]
            yield streams
    finally:
        sys.stdout.flush()
        for fd in (read_fd, write_fd):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out, read_fd, write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
