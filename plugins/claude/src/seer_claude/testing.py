"""A fake of the Anthropic Messages API on 127.0.0.1 for tests: ``POST /v1/messages`` plays a
scripted agent (the steps of :mod:`seer.testing.model_api`), streamed as server-sent events when
the client asks (Claude Code does), so the real Claude Agent SDK and the Claude Code it drives run
end to end with no model and no network::

    from seer.testing.model_api import Call, Say
    from seer_claude.testing import FakeAnthropic

    with FakeAnthropic([Call("mcp__tools__triple", {"x": 14}), Say("42")]) as fake:
        os.environ.update(fake.env())  # ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, no telemetry
        ...

A request that offers no tools is the client's own background call (a title, a quota check), not
one of the agent's turns: it is answered ``ok`` and kept in :attr:`side_requests`.
``POST /v1/messages/count_tokens`` is answered with a rough count.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from seer.testing.model_api import Call, FakeModelServer, ModelRequest, Say, ToolResult, send_json, send_sse

__all__ = ["FAKE_API_KEY", "FakeAnthropic"]

#: The key the fake hands clients (it checks that one is sent, not its value).
FAKE_API_KEY = "sk-ant-fake-seer-testing-0000"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _results(message: dict[str, Any]) -> list[ToolResult]:
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list):
        return []
    return [
        ToolResult(b.get("tool_use_id", ""), _text(b.get("content")), bool(b.get("is_error")))
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


class FakeAnthropic(FakeModelServer):
    """The Messages API, scripted."""

    routes = ("/v1/messages", "/v1/messages/count_tokens")

    def env(self) -> dict[str, str]:
        """What Claude Code and the Anthropic SDK need to talk to this fake, and nothing else:
        no telemetry, error reports or update checks."""
        return {
            "ANTHROPIC_BASE_URL": self.origin,
            "ANTHROPIC_API_KEY": FAKE_API_KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
        }

    def parse(self, path: str, body: dict[str, Any]) -> ModelRequest:
        messages = body.get("messages") or []
        system = _text(body.get("system"))
        every = [r for m in messages for r in _results(m)]
        trailing = _results(messages[-1]) if messages else []
        task = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
        tools = [t.get("name", "") for t in body.get("tools") or []]
        return ModelRequest(path, body, system, tools, trailing, every, task)

    def scripted(self, request: ModelRequest) -> bool:
        return request.path == "/v1/messages" and bool(request.tools)

    def respond(self, handler: BaseHTTPRequestHandler, request: ModelRequest, step: Say | list[Call]) -> None:
        if not (handler.headers.get("x-api-key") or handler.headers.get("Authorization")):
            send_json(
                handler,
                401,
                {"type": "error", "error": {"type": "authentication_error", "message": "no key"}},
            )
            return
        if request.path.endswith("/count_tokens"):
            send_json(handler, 200, {"input_tokens": max(1, len(json.dumps(request.body)) // 4)})
            return
        if isinstance(step, Say):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": step.text}]
            stop = "end_turn"
        else:
            said = "\n".join(c.text for c in step if c.text)
            blocks = [{"type": "text", "text": said}] if said else []
            blocks += [
                {"type": "tool_use", "id": self.next_id("toolu_"), "name": c.tool, "input": c.arguments}
                for c in step
            ]
            stop = "tool_use"
        message = {
            "id": self.next_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": request.body.get("model", self.model),
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        if not request.body.get("stream"):
            send_json(handler, 200, message)
            return
        events: list[tuple[str | None, Any]] = [
            (
                "message_start",
                {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}},
            )
        ]
        for i, block in enumerate(blocks):
            start: dict[str, Any]
            delta: dict[str, Any]
            if block["type"] == "text":
                start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
            else:
                start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += [
                ("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
                ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": i}),
            ]
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        send_sse(handler, events)
