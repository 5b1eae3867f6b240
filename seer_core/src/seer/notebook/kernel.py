"""A session's link to its kernel: the kernel channels websocket (connecting to a kernel still
starting, requests and replies, what arrives between cells), whether the kernel died, and the
cells an earlier client with the same channel key started and did not see finish."""

from __future__ import annotations

import contextlib
import queue
import time
from typing import Any

from seer.errors import (
    JupyterServerDiedError,
    KernelDiedError,
    NotebookError,
)
from seer.notebook.client import (
    CONNECT_TIMEOUT,
    ChannelClosed,
    KernelChannels,
    KernelRestarted,
)
from seer.notebook.document import (
    new_cell_id,
    source_text,
)
from seer.notebook.handle import RUNNING_KEY, OrphanCell
from seer.notebook.order import ExecutionOrder
from seer.notebook.results import OutputCollector

#: Pause before connecting again to a kernel whose websocket the server dropped while it started.
CONNECT_RETRY_PAUSE = 1.0


#: While a fresh kernel's output stream is not yet heard, ask it for its info this often (seconds).
IOPUB_NUDGE_INTERVAL = 0.5


class KernelLink(ExecutionOrder):
    """The kernel websocket of a session, and what its messages say about the kernel."""

    def _connect(self, *, fresh: bool = False) -> None:
        """Open the kernel websocket and ask the kernel for its info, within ``CONNECT_TIMEOUT``.

        A kernel still starting (its imports for the models take minutes on a loaded machine)
        may not answer before the Jupyter server gives up waiting for it (``kernel_info_timeout``)
        and drops the websocket: while the kernel lives, connect again until the deadline. A
        kernel that is gone or dead, or a deadline spent, raises :class:`NotebookError` saying so.

        ``fresh``: the kernel was just started (or restarted) for this session and runs nothing,
        so it can be asked on shell: the connection is made only once its output stream is heard
        (see :meth:`_await_iopub`).
        """
        deadline = time.monotonic() + CONNECT_TIMEOUT
        attempts = 0
        while True:
            attempts += 1
            if self._channels is not None:
                self._channels.close()
                self._channels = None
            reply: dict[str, Any] | None = None
            try:
                remaining = max(deadline - time.monotonic(), 1.0)
                self._channels = KernelChannels(
                    self._client, self.kernel_id, session=self._channel_key, timeout=remaining
                )
                # On the control channel: a kernel busy with a cell (one an earlier client left
                # running) answers there at once, not after the cell.
                remaining = max(deadline - time.monotonic(), 0.001)
                reply = self._request("kernel_info_request", {}, timeout=remaining, channel="control")
                if fresh:
                    self._await_iopub(deadline)
                break
            except NotebookError as exc:
                lost = self._channels is None or self._channels.closed
                if not lost and time.monotonic() >= deadline:
                    if reply is not None:  # it answered; exc says what else did not come in time
                        raise
                    raise NotebookError(
                        f"kernel {self.kernel_id} did not answer within {CONNECT_TIMEOUT:g}s ({exc})"
                    ) from exc
                # The websocket could not be opened, or was dropped: is the kernel still there?
                model = self._kernel_model()
                state = None if model is None else model.get("execution_state")
                if model is None or state == "dead":
                    gone = "is gone" if model is None else "died"
                    raise NotebookError(f"kernel {self.kernel_id} {gone} while connecting ({exc})") from exc
                if time.monotonic() + CONNECT_RETRY_PAUSE >= deadline:
                    raise NotebookError(
                        f"could not connect to kernel {self.kernel_id} within {CONNECT_TIMEOUT:g}s: "
                        f"the Jupyter server dropped its websocket {attempts} times while the kernel "
                        f"was {state!r} (last: {exc})"
                    ) from exc
                time.sleep(CONNECT_RETRY_PAUSE)
        info = reply.get("language_info")
        if info:
            self._nb.metadata["language_info"] = info

    def _await_iopub(self, deadline: float) -> None:
        """Return once the kernel's output stream (iopub) reaches this websocket.

        A kernel the server has just restarted, on new ports, can answer on shell and control
        while the server's subscription to its iopub is not yet in place (ZMQ subscribes in the
        background, and the server skips its own check when it still takes the kernel for busy
        with the cell that killed it). A cell run then gets its reply but never its outputs or
        its idle status. So ask for kernel_info on shell, every ``IOPUB_NUDGE_INTERVAL``, until
        the status of one of those requests comes back on iopub; only for a kernel that runs
        nothing (a shell request would wait behind a running cell).
        """
        channels = self._channels
        assert channels is not None
        asked: set[str] = set()
        next_ask = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise NotebookError(
                    f"kernel {self.kernel_id} answers, but its output stream (iopub) did not reach "
                    f"this client within {CONNECT_TIMEOUT:g}s"
                )
            if now >= next_ask:
                msg = channels.message("kernel_info_request", {})
                channels.send(msg)
                asked.add(msg["header"]["msg_id"])
                next_ask = now + IOPUB_NUDGE_INTERVAL
            item = channels.get(max(min(next_ask, deadline) - now, 0.0))
            if item is None:
                continue
            if isinstance(item, ChannelClosed):
                raise NotebookError(f"the kernel websocket closed: {item.reason}")
            if isinstance(item, dict) and (item.get("parent_header") or {}).get("msg_id") in asked:
                if item.get("channel") == "iopub":
                    return
                continue  # a reply to one of these requests, on shell
            self._absorb(item)

    def _request(
        self, msg_type: str, content: dict[str, Any], *, timeout: float, channel: str = "shell"
    ) -> dict[str, Any]:
        """Send a request (shell or control) and wait for its reply's content."""
        channels = self._channels
        assert channels is not None
        msg = channels.message(msg_type, content, channel)
        channels.send(msg)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise NotebookError(f"the kernel did not answer a {msg_type} within {timeout:g}s")
            item = channels.get(remaining)
            if isinstance(item, ChannelClosed):
                raise NotebookError(f"the kernel websocket closed: {item.reason}")
            if (
                isinstance(item, dict)
                and item.get("channel") == channel
                and item.get("parent_header", {}).get("msg_id") == msg["header"]["msg_id"]
            ):
                content_: dict[str, Any] = item["content"]
                return content_
            self._absorb(item)

    def interrupt(self) -> None:
        """Interrupt the running cell (it ends with ``KeyboardInterrupt``). Safe from any thread."""
        self._client.call("POST", f"/api/kernels/{self.kernel_id}/interrupt")

    def _check_usable(self) -> None:
        if self._closed:
            raise NotebookError(f"notebook session {self.session_id} is shut down")
        if self._dead is not None and self._server_gone:
            raise JupyterServerDiedError(
                f"{self._dead}; start the server again (seer.execution.restart_jupyter(sandbox)), "
                "then session.reopen(sandbox)"
            )
        if self._dead is not None:
            raise KernelDiedError(f"{self._dead}; call session.restart() to start it again")

    def _drain(self) -> None:
        """Drop what arrived between cells, noticing a kernel that died or restarted meanwhile."""
        channels = self._channels
        assert channels is not None
        while True:
            try:
                item = channels.inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, ChannelClosed):
                self._reconnect_or_die(item.reason)
                return
            if isinstance(item, dict) and not item.get("parent_header"):
                why = self._death(item)
                if why is not None:
                    self._dead = f"{why} between cells"
                    self._check_usable()
            self._absorb(item)

    def _reconnect_or_die(self, reason: str) -> None:
        why = self._death(ChannelClosed(reason))
        if why is not None:
            self._dead = why
            self._check_usable()
        self._connect()

    def _death(self, event: object) -> str | None:
        """Why the kernel is dead, judging by ``event`` from its websocket; None while it lives.
        The one place that tells, whatever the event: the kernel's own status saying it died or
        restarts (a message with no parent), ``restart()`` taking the kernel away
        (:class:`~seer.notebook.client.KernelRestarted`); and where the websocket closed
        (:class:`~seer.notebook.client.ChannelClosed`) or fell silent (None), the server's word
        on the kernel (:attr:`_kernel_state` keeps what it said), and whether the server itself
        still answers. Any other event says nothing (None)."""
        if isinstance(event, KernelRestarted):
            return "the kernel was restarted"
        if isinstance(event, dict):
            state = (event.get("content") or {}).get("execution_state")
            if event.get("parent_header") or event.get("msg_type") != "status":
                return None
            if state not in ("restarting", "dead"):
                return None
            # "restarting": the server is already starting a fresh kernel in its place.
            self._auto_restarted = state == "restarting"
            return "the kernel died"
        if event is not None and not isinstance(event, ChannelClosed):
            return None
        model = self._kernel_model()
        if model is not None and model.get("execution_state") != "dead":
            return None
        how = "is gone" if model is None else "died"
        reason = f" ({event.reason})" if isinstance(event, ChannelClosed) else ""
        return self._why_gone(f"the kernel {how}{reason}")

    def _kernel_model(self) -> dict[str, Any] | None:
        """The server's model of the kernel (None: it knows none, or does not answer); its
        ``execution_state`` is kept in :attr:`_kernel_state`."""
        try:
            model = self._client.kernel(self.kernel_id)
        except (NotebookError, OSError):
            model = None
        self._kernel_state = None if model is None else model.get("execution_state")
        return model

    def _why_gone(self, why: str) -> str:
        """``why``, or that the Jupyter server itself stopped answering (it took the kernel)."""
        try:
            self._client.request("GET", "/api/status", timeout=10)
        except OSError as exc:
            self._server_gone = True
            reason = exc.strerror or type(exc).__name__
            return (
                f"the Jupyter server at {self._client.url} stopped answering ({reason}); "
                "its kernels died with it"
            )
        return why

    def _absorb(self, item: Any) -> None:
        """Keep a message about a cell an earlier client with this handle's channel key started
        (the server replays what the kernel sent while no client was connected, and sends the
        rest live): the cell's outputs are recorded in its notebook cell when it finishes."""
        if not isinstance(item, dict):
            return
        parent = item.get("parent_header") or {}
        if item.get("msg_type") == "execute_input" and parent.get("msg_id"):
            self._note_started(
                str(parent["msg_id"]),
                (item.get("content") or {}).get("execution_count"),
                (item.get("header") or {}).get("session"),
            )
        key = self._channel_key
        if key is None:
            return
        if parent.get("session") != key or parent.get("msg_type") != "execute_request":
            return
        msg_id = parent.get("msg_id")
        if not msg_id or msg_id in self._orphans_done:
            return
        orphan = self._orphans.get(msg_id)
        if orphan is None:
            orphan = self._orphans[msg_id] = OrphanCell(msg_id, OutputCollector(self._displays))
        msg_type = item.get("msg_type") or item.get("header", {}).get("msg_type")
        content = item.get("content") or {}
        if item.get("channel") == "shell":
            orphan.reply = content
        elif msg_type == "execute_input":
            orphan.code = content.get("code")
            orphan.count = content.get("execution_count")
        elif msg_type == "status":
            if content.get("execution_state") == "idle":
                orphan.idle = True
        elif item.get("channel") == "iopub":
            orphan.collector.handle(msg_type, content)
        if orphan.idle:
            self._fold(orphan)

    def _fold(self, orphan: OrphanCell) -> None:
        """An earlier client's cell finished: its notebook cell gets all its outputs."""
        self._orphans.pop(orphan.msg_id, None)
        self._orphans_done.add(orphan.msg_id)
        cell = next(
            (c for c in self._nb.cells if c.get("metadata", {}).get(RUNNING_KEY) == orphan.msg_id), None
        )
        code = orphan.code if orphan.code is not None else (source_text(cell["source"]) if cell else "")
        # The count comes from the replayed execute_input, else the reply, else what the client
        # that started the cell saved (it saw the execute_input before it went).
        count = next(
            (
                n
                for n in (
                    orphan.count,
                    (orphan.reply or {}).get("execution_count"),
                    cell.get("execution_count") if cell else None,
                )
                if n is not None
            ),
            None,
        )
        if cell is None:
            cell = {
                "cell_type": "code",
                "execution_count": None,
                "id": new_cell_id(),
                "metadata": {},
                "outputs": [],
                "source": code,
            }
            self._nb.add(cell)
        # What the earlier client saw (and saved) came before what was replayed: one stream.
        merged = OutputCollector(self._displays)
        merged.outputs = [dict(o) for o in cell.get("outputs") or []]
        for out in orphan.collector.outputs:
            merged.append(dict(out))
        merged.error = orphan.collector.error
        if orphan.reply is not None:
            merged.error_from_reply(orphan.reply)
        result = merged.result(code, hidden=False, execution_count=count, started=orphan.started)
        cell["metadata"].pop(RUNNING_KEY, None)
        cell["execution_count"] = count
        self._stamp(cell)
        cell["outputs"] = result.outputs
        self._nb.touch(cell)
        self.recovered.append(result)
        with contextlib.suppress(Exception):
            self.save()

    @property
    def orphans_running(self) -> bool:
        """True while a cell an earlier client started (see ``attach``) has not finished."""
        return bool(self._orphans)
