"""The kernel websocket's v1 protocol (``v1.kernel.websocket.jupyter.org``): seer's frames are
the ones jupyter_server makes and reads, byte for byte. tests/test_notebook.py runs sessions on a
real server with it and without it."""

from __future__ import annotations

import json

import pytest
from seer.notebook.client import decode_v1, encode_v1

pytestmark = pytest.mark.unit

base = pytest.importorskip("jupyter_server.services.kernels.connection.base")

PARTS = [
    json.dumps({"msg_id": "a1", "msg_type": "execute_request", "date": "2026-11-27T16:00:00+00:00"}).encode(),
    b"{}",
    b"{}",
    json.dumps({"code": "print('\u00e9\u2028')", "silent": False}).encode(),
    b"\x00\x01\xffbinary buffer",
]


@pytest.mark.parametrize("parts", [PARTS, PARTS[:4], [b"{}", b"{}", b"{}", b""]])
@pytest.mark.parametrize("channel", ["shell", "iopub", "control", "stdin"])
def test_frames_are_the_servers_byte_for_byte(channel: str, parts: list[bytes]) -> None:
    made = encode_v1(channel, parts)
    assert made == base.serialize_msg_to_ws_v1(parts, channel)
    assert decode_v1(made) == (channel, parts)
    assert base.deserialize_msg_from_ws_v1(made) == (channel, parts)


def test_a_message_from_the_server_decodes_with_its_buffers() -> None:
    from seer.notebook.client import _v1_message

    msg = _v1_message(base.serialize_msg_to_ws_v1(PARTS, "iopub"))
    assert msg["channel"] == "iopub"
    assert (msg["msg_id"], msg["msg_type"]) == ("a1", "execute_request")
    assert msg["content"]["code"] == "print('\u00e9\u2028')"
    assert msg["parent_header"] == {} and msg["metadata"] == {}
    assert msg["buffers"] == [PARTS[4]]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x01" + b"\x00" * 7,
        (5).to_bytes(8, "little") + b"\x00" * 8,
        encode_v1("shell", PARTS)[:-1],  # cut short
        encode_v1("shell", PARTS) + b"x",  # longer than its offsets say
    ],
)
def test_what_is_not_a_frame_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="not a v1 kernel websocket frame"):
        decode_v1(data)
