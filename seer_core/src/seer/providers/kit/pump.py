"""The output pump: a command's output collected from however it arrives (pipes, a socket, an SDK's
iterators), streamed to ``on_output``, its deadline enforced; :func:`pump_popen` runs it over a
local :class:`subprocess.Popen`."""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from seer.errors import ExecTimeoutError
from seer.providers.base import (
    ExecResult,
    OutputCallback,
)


# --- the output pump -------------------------------------------------------------------------
class OutputPump:
    """One command's output, collected as it arrives, and its deadline.

    A provider hands it the command's streams with :meth:`read_stream` (each read on a thread of
    its own, so a blocking SDK call is fine), optionally its stdin with :meth:`send`, then calls
    :meth:`wait`. The raw bytes are kept (:meth:`data`, for files read over exec); the text is
    decoded as UTF-8 with replacement, and ``on_output`` sees it piece by piece, in order, from
    the reader threads. An exception raised by ``on_output`` ends the command and is re-raised
    by :meth:`wait`.
    """

    def __init__(
        self,
        command: str,
        *,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        kill: Callable[[], None] | None = None,
    ):
        self.command = command
        self.timeout = timeout
        self.started = time.monotonic()
        #: monotonic time past which the command is killed (None: no deadline)
        self.deadline = None if timeout is None else self.started + timeout
        #: kills the command's processes on a timeout (set by :class:`ExecMachine`)
        self.kill = kill
        self.closed = threading.Event()
        self._on_output = on_output
        self._raw = {"stdout": bytearray(), "stderr": bytearray()}
        self._decoders = {name: codecs.getincrementaldecoder("utf-8")(errors="replace") for name in self._raw}
        self._lock = threading.Lock()
        self._readers = 0
        self._all_read = threading.Event()
        self._all_read.set()
        self._error: BaseException | None = None
        self._inline: tuple[Any, Any, Any] | None = None
        self._last_output = self.started

    # --- feeding --------------------------------------------------------------------------
    def feed(self, stream: str, data: bytes) -> None:
        """Add ``data`` that ``stream`` (``stdout`` or ``stderr``) produced."""
        if not data:
            return
        with self._lock:
            self._raw[stream] += data
            self._last_output = time.monotonic()
            if self._on_output is not None:
                piece = self._decoders[stream].decode(data)
                if piece:
                    self._on_output(stream, piece)

    def read_stream(
        self,
        read: Callable[[], bytes | None],
        stream: str | Callable[[bytes], None],
        *,
        close: Callable[[], None] | None = None,
        inline: bool = False,
    ) -> None:
        """Read a stream on a thread until it ends: ``read()`` returns bytes, ``b""`` at its end,
        or None when nothing came yet (a read with a timeout: it is called again until
        :meth:`wait` is over). The data goes to ``stream`` (a name, or a function that splits a
        multiplexed stream and calls :meth:`feed`); ``close`` runs at the end.

        With ``inline``, :meth:`wait` reads the stream itself, on the calling thread, so no
        thread hands output over per command (what a single multiplexed stream wants); then
        ``read()`` must return None after at most a fraction of a second. One per pump."""
        reader = (read, stream, close)
        with self._lock:
            self._readers += 1
            self._all_read.clear()
        if inline:
            self._inline = reader
            return

        def loop() -> None:
            while not self.closed.is_set() and self._read_once(reader):
                pass
            self._reader_done(reader)

        threading.Thread(target=loop, name="seer-output-pump", daemon=True).start()

    def _read_once(self, reader: tuple[Any, Any, Any]) -> bool:
        """One read of a stream into the pump; False once the stream ended or broke (what came
        is what there is), or ``on_output`` raised (kept for :meth:`wait` to raise)."""
        read, stream, _close = reader
        try:
            data = read()
            if data is None:
                return True
            if not data:
                return False
            if isinstance(stream, str):
                self.feed(stream, data)
            else:
                stream(data)
            return True
        except OSError:
            return False
        except BaseException as exc:
            self._error = self._error or exc
            return False

    def _reader_done(self, reader: tuple[Any, Any, Any]) -> None:
        if reader is self._inline:
            self._inline = None
        if reader[2] is not None:
            with contextlib.suppress(OSError):
                reader[2]()
        with self._lock:
            self._readers -= 1
            if not self._readers:
                self._all_read.set()

    def _read_inline(self) -> None:
        if self._inline is not None and not self._read_once(self._inline):
            self._reader_done(self._inline)

    @staticmethod
    def send(data: bytes, write: Callable[[bytes], Any], close: Callable[[], Any]) -> None:
        """Write ``data`` to the command's stdin on a thread, then close it (a command that stops
        reading early is no error)."""

        def feed() -> None:
            with contextlib.suppress(OSError):
                write(data)
            with contextlib.suppress(OSError):
                close()

        threading.Thread(target=feed, name="seer-stdin", daemon=True).start()

    # --- waiting --------------------------------------------------------------------------
    def remaining(self) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def wait(
        self,
        exited: Callable[[float], bool],
        *,
        kill: Callable[[], None] | None = None,
        linger: float = 1.0,
        poll: float = 0.5,
        drain: float = 2.0,
    ) -> None:
        """Wait for the command to end: its streams ended and ``exited(seconds)`` (which may wait
        up to that long) says it exited; or it exited and its streams then stayed quiet for
        ``linger`` seconds (a background child holds them). While the streams are open and
        quiet, ``exited(0)`` is asked at most every ``poll`` seconds. The quiet that ends the
        wait counts from when the exit was seen, never from before it: the exit status can
        arrive ahead of the last output (separate calls to a remote API, reader threads that a
        loaded machine runs late), and a command that ran silent for a while has output in
        flight at its exit all the same. At the deadline, or on any exception, ``kill`` and
        :attr:`kill` end the command; after a deadline the output that still comes within
        ``drain`` seconds is kept and :class:`~seer.errors.ExecTimeoutError` raised."""
        try:
            finished = self._wait(exited, linger, poll)
        except BaseException:
            self._kill(kill)
            self._close()
            raise
        if not finished:
            self._kill(kill)
            end = time.monotonic() + drain
            while self._inline is not None and time.monotonic() < end:
                self._read_inline()
            self._all_read.wait(max(0.0, end - time.monotonic()))
        self._close()
        if not finished:
            raise ExecTimeoutError(self.command, self.timeout or 0, self.text("stdout"), self.text("stderr"))

    def _wait(self, exited: Callable[[float], bool], linger: float, poll: float) -> bool:
        """True once the command ended, False at the deadline."""
        last_poll = 0.0
        exited_at: float | None = None  # when exited(0) first said the command exited
        while True:
            if self._error is not None:
                raise self._error
            left = self.remaining()
            if left is not None and left <= 0:
                return False
            step = 0.1 if left is None else min(0.1, left)
            if self._all_read.is_set():
                if exited(step):
                    return True
                continue
            if self._inline is not None:
                self._read_inline()
            elif self._all_read.wait(step):
                continue
            now = time.monotonic()
            if exited_at is not None:
                if now - max(exited_at, self._last_output) >= linger:
                    return True
            elif now - self._last_output >= poll and now - last_poll >= poll:
                last_poll = now
                if exited(0):
                    exited_at = now

    def _close(self) -> None:
        """Stop the readers: threads at their next read, an inline stream now."""
        self.closed.set()
        if self._inline is not None:
            self._reader_done(self._inline)

    def _kill(self, kill: Callable[[], None] | None) -> None:
        for fn in (kill, self.kill):
            if fn is not None:
                with contextlib.suppress(Exception):
                    fn()

    # --- results --------------------------------------------------------------------------
    def data(self, stream: str) -> bytes:
        """The raw bytes ``stream`` produced so far."""
        with self._lock:
            return bytes(self._raw[stream])

    def text(self, stream: str) -> str:
        """What ``stream`` produced so far, decoded."""
        return self.data(stream).decode("utf-8", errors="replace")

    def result(self, exit_code: int) -> ExecResult:
        """The finished command's :class:`~seer.providers.base.ExecResult`."""
        if self._on_output is not None:
            for name, decoder in self._decoders.items():
                tail = decoder.decode(b"", final=True)
                if tail:
                    self._on_output(name, tail)
        return ExecResult(
            self.command, exit_code, self.text("stdout"), self.text("stderr"), time.monotonic() - self.started
        )


def pump_popen(proc: subprocess.Popen[bytes], pump: OutputPump, stdin: bytes | None = None) -> int:
    """Pump a local process started with ``stdout`` and ``stderr`` pipes (and a stdin pipe if
    ``stdin`` is given) in a session of its own (``start_new_session=True``); return its exit
    code. At the deadline its process group is killed."""

    def pipe(stream: Any) -> Callable[[], bytes]:
        fd = stream.fileno()
        return lambda: os.read(fd, 65536)

    pump.read_stream(pipe(proc.stdout), "stdout", close=proc.stdout.close)  # type: ignore[union-attr]
    pump.read_stream(pipe(proc.stderr), "stderr", close=proc.stderr.close)  # type: ignore[union-attr]
    if stdin is not None and proc.stdin is not None:
        pump.send(stdin, proc.stdin.write, proc.stdin.close)

    def exited(seconds: float) -> bool:
        try:
            proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    try:
        pump.wait(exited, kill=kill)
    finally:
        if proc.returncode is None:
            kill()
            proc.wait()
    return proc.returncode
