"""How a notebook session connects to its kernel when the Jupyter server drops the kernel websocket
while the kernel is still starting (it gives up on a kernel that does not answer within its
``kernel_info_timeout``: one importing torch for its models on a loaded machine): the session
connects again while the kernel lives, within ``CONNECT_TIMEOUT``, and says what happened when
it cannot. Fast unit tests with a fake websocket; tests/test_notebook.py has a real server's case.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import seer.notebook.session as notebook
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
    kernel_info request ("answer")."""

    plan: list[str] = []
    made: list[FakeChannels] = []

    def __init__(self, client: Any, kernel_id: str, *, session: str | None = None, timeout: float = 0):
        what = self.plan.pop(0) if len(self.plan) > 1 else self.plan[0]
        if what == "refuse":
            raise NotebookError(f"cannot open the kernel websocket for kernel {kernel_id}: HTTP 500")
        self.what = what
        self.closed = False
        self.sent: list[dict[str, Any]] = []
        self.inbox: list[Any] = []
        self.made.append(self)

    def message(self, msg_type: str, content: dict[str, Any], channel: str = "shell") -> dict[str, Any]:
        return {"header": {"msg_id": f"m{len(self.sent)}", "msg_type": msg_type}, "channel": channel}

    def send(self, msg: dict[str, Any]) -> None:
        self.sent.append(msg)
        if self.what == "drop":
            self.closed = True
            self.inbox.append(notebook.ChannelClosed("the server closed it"))
        elif self.what == "answer":
            content = {"language_info": {"name": "python", "version": "3.11"}}
            self.inbox.append({"channel": "control", "parent_header": msg["header"], "content": content})

    def get(self, timeout: float | None) -> Any:
        if not self.inbox:
            time.sleep(min(timeout or 0.0, 0.01))
            return None
        return self.inbox.pop(0)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def channels(monkeypatch: pytest.MonkeyPatch) -> type[FakeChannels]:
    monkeypatch.setattr(notebook, "KernelChannels", FakeChannels)
    monkeypatch.setattr(notebook, "CONNECT_RETRY_PAUSE", 0.0, raising=False)
    FakeChannels.made = []
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
