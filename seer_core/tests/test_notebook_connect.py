"""How a notebook session connects to its kernel when the Jupyter server drops the kernel websocket
while the kernel is still starting (it gives up on a kernel that does not answer within its
``kernel_info_timeout``: one importing torch for its models on a loaded machine): the session
connects again while the kernel lives, within ``CONNECT_TIMEOUT``, and says what happened when
it cannot. And how it makes sure a fresh kernel's output stream reaches it before the first cell
(after a restart the server's iopub subscription can lag), and what a cell whose output stream
falls silent after its reply does. Fast unit tests with a fake websocket; tests/test_notebook.py
has a real server's case, and plugins/mcp/tests/test_mcp_notebook.py a restart after a crash.
"""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest
import seer.notebook.kernel as notebook
import seer.notebook.run as running
from seer.errors import NotebookError
from seer.notebook import NotebookSession

pytestmark = pytest.mark.unit

KERNEL = "7ff5962a-880d-43de-9442-eb3d49388e31"


class FakeClient:
    """The REST side: the kernel's model, in the states given (the last one repeats)."""

    def __init__(self, *states: str | None):
        self.states = list(states)

    def kernel(self, kernel_id: str) -> dict[str, Any] | None:
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return None if state is None else {"id": kernel_id, "execution_state": state}


class FakeChannels:
    """A kernel websocket that, per connection in ``plan``, is refused ("refuse"), dropped by the
    server after the request ("drop"), stays open with no answer ("silent"), or answers the
    kernel_info request ("answer"). When it answers, the iopub messages of the first
    ``iopub_lost`` shell requests never arrive (the server's subscription is not in place yet)."""

    plan: list[str] = []
    made: list[FakeChannels] = []
    iopub_lost = 0

    def __init__(self, client: Any, kernel_id: str, *, session: str | None = None, timeout: float = 0):
        what = self.plan.pop(0) if len(self.plan) > 1 else self.plan[0]
        if what == "refuse":
            raise NotebookError(f"cannot open the kernel websocket for kernel {kernel_id}: HTTP 500")
        self.what = what
        self.closed = False
        self.sent: list[dict[str, Any]] = []
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.made.append(self)

    def message(self, msg_type: str, content: dict[str, Any], channel: str = "shell") -> dict[str, Any]:
        return {"header": {"msg_id": f"m{len(self.sent)}", "msg_type": msg_type}, "channel": channel}

    def send(self, msg: dict[str, Any]) -> None:
        self.sent.append(msg)
        if self.what == "drop":
            self.closed = True
            self.inbox.put(notebook.ChannelClosed("the server closed it"))
        elif self.what == "answer":
            msg_type, channel = msg["header"]["msg_type"], msg["channel"]
            if msg_type == "kernel_info_request":
                content = {"language_info": {"name": "python", "version": "3.11"}}
            else:
                content = {"status": "ok", "execution_count": 1}
            reply = {"channel": channel, "msg_type": msg_type.replace("request", "reply")}
            self.inbox.put({**reply, "parent_header": msg["header"], "content": content})
            if channel == "shell":
                if type(self).iopub_lost > 0:
                    type(self).iopub_lost -= 1
                    return
                for state in ("busy", "idle"):
                    status = {"execution_state": state}
                    self.inbox.put(
                        {
                            "channel": "iopub",
                            "msg_type": "status",
                            "parent_header": msg["header"],
                            "content": status,
                        }
                    )

    def get(self, timeout: float | None) -> Any:
        try:
            return self.inbox.get(timeout=min(timeout or 0.0, 0.01))
        except queue.Empty:
            return None

    def asked(self, channel: str) -> list[str]:
        return [m["header"]["msg_type"] for m in self.sent if m["channel"] == channel]

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def channels(monkeypatch: pytest.MonkeyPatch) -> type[FakeChannels]:
    monkeypatch.setattr(notebook, "KernelChannels", FakeChannels)
    monkeypatch.setattr(notebook, "CONNECT_RETRY_PAUSE", 0.0, raising=False)
    FakeChannels.made = []
    FakeChannels.iopub_lost = 0
    return FakeChannels


def _session(client: FakeClient) -> NotebookSession:
    return NotebookSession(
        client,  # type: ignore[arg-type]
        session_id="s",
        kernel_id=KERNEL,
        notebook_path="notebooks/x.ipynb",
        name="x",
    )


def test_a_websocket_dropped_while_the_kernel_starts_is_opened_again(channels: type[FakeChannels]) -> None:
    channels.plan = ["refuse", "drop", "drop", "answer"]
    session = _session(FakeClient("starting", "starting", "busy", "idle"))
    session._connect()
    assert [c.what for c in channels.made] == ["drop", "drop", "answer"]
    assert [c.closed for c in channels.made] == [True, True, False]
    assert session._channels is channels.made[-1]
    assert session.notebook["metadata"]["language_info"]["version"] == "3.11"


@pytest.mark.parametrize(("state", "said"), [("dead", "died"), (None, "is gone")])
def test_a_kernel_that_died_while_connecting_is_said_at_once(
    channels: type[FakeChannels], state: str | None, said: str
) -> None:
    channels.plan = ["drop"]
    session = _session(FakeClient(state))
    with pytest.raises(NotebookError, match=f"kernel {KERNEL} {said} while connecting") as info:
        session._connect()
    assert "the server closed it" in str(info.value)
    assert len(channels.made) == 1  # not tried again


def test_a_websocket_dropped_until_the_deadline_says_how_often_and_why(
    channels: type[FakeChannels], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notebook, "CONNECT_TIMEOUT", 0.2)
    monkeypatch.setattr(notebook, "CONNECT_RETRY_PAUSE", 0.01, raising=False)
    channels.plan = ["drop"]
    session = _session(FakeClient("starting"))
    with pytest.raises(NotebookError) as info:
        session._connect()
    message = str(info.value)
    assert message.startswith(f"could not connect to kernel {KERNEL} within 0.2s")
    assert f"dropped its websocket {len(channels.made)} times while the kernel was 'starting'" in message
    assert len(channels.made) > 1


def test_a_kernel_that_never_answers_an_open_websocket_is_not_connected_to_again(
    channels: type[FakeChannels], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notebook, "CONNECT_TIMEOUT", 0.2)
    channels.plan = ["silent"]
    session = _session(FakeClient("busy"))
    with pytest.raises(NotebookError, match=f"kernel {KERNEL} did not answer within 0.2s"):
        session._connect()
    assert len(channels.made) == 1


@pytest.mark.parametrize("lost", [0, 1, 3])
def test_a_fresh_kernel_is_connected_once_its_output_stream_is_heard(
    channels: type[FakeChannels], monkeypatch: pytest.MonkeyPatch, lost: int
) -> None:
    monkeypatch.setattr(notebook, "IOPUB_NUDGE_INTERVAL", 0.02)
    channels.plan = ["answer"]
    channels.iopub_lost = lost
    session = _session(FakeClient("idle"))
    session._connect(fresh=True)
    # Asked on control first, then on shell until a request's status came back on iopub.
    assert channels.made[-1].asked("control") == ["kernel_info_request"]
    assert channels.made[-1].asked("shell") == ["kernel_info_request"] * (lost + 1)
    assert channels.iopub_lost == 0


def test_a_kernel_attached_to_is_not_asked_on_shell(channels: type[FakeChannels]) -> None:
    # It may be busy with a cell: a shell request would wait behind it.
    channels.plan = ["answer"]
    session = _session(FakeClient("busy"))
    session._connect()
    assert channels.made[-1].asked("shell") == []


def test_a_fresh_kernel_whose_output_stream_never_comes_says_so(
    channels: type[FakeChannels], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notebook, "CONNECT_TIMEOUT", 0.3)
    monkeypatch.setattr(notebook, "IOPUB_NUDGE_INTERVAL", 0.02)
    channels.plan = ["answer"]
    channels.iopub_lost = 10**6
    session = _session(FakeClient("idle"))
    started = time.monotonic()
    with pytest.raises(NotebookError) as info:
        session._connect(fresh=True)
    # It answered: the error says what did not come, not that the kernel was silent.
    assert str(info.value) == (
        f"kernel {KERNEL} answers, but its output stream (iopub) did not reach this client within 0.3s"
    )
    assert time.monotonic() - started < 5
    assert len(channels.made[-1].asked("shell")) > 2


def test_a_cell_whose_output_stream_falls_silent_after_its_reply_fails_instead_of_waiting(
    channels: type[FakeChannels], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply came, the idle status never does: the cell must not wait forever."""
    monkeypatch.setattr(running, "LIVENESS_INTERVAL", 0.1)
    channels.plan = ["answer"]
    session = _session(FakeClient("idle"))
    session._connect()
    channels.iopub_lost = 1
    with pytest.raises(NotebookError, match=r"output stream \(iopub\) fell silent for 0.1s"):
        session._run("1", hidden=True, timeout=None, record=False)
    # With its output stream working, the next cell runs.
    assert session._run("2", hidden=True, timeout=None, record=False).error is None
