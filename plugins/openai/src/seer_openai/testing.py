"""A fake of the OpenAI API on 127.0.0.1 for tests: ``POST /v1/chat/completions`` plays a
scripted agent (see :mod:`seer.testing.model_api` for the script's steps), so the real OpenAI
Agents SDK runs end to end with no model and no network::

    from seer.testing.model_api import Call, Say
    from seer_openai.testing import FakeOpenAI

    with FakeOpenAI([Call("load_skill", {"name": "x"}), Say("done")]) as fake:
        os.environ.update(fake.env())  # OPENAI_BASE_URL, OPENAI_API_KEY
        ...
        assert fake.requests[1].tool_results[0].text.startswith("---")

Streaming requests (``"stream": true``) are answered as server-sent events.
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from seer.testing.model_api import Call, FakeModelServer, ModelRequest, Say, ToolResult, send_json, send_sse

__all__ = ["FAKE_API_KEY", "FakeOpenAI"]

#: The key the fake hands clients (it checks that one is sent, not its value).
FAKE_API_KEY = "sk-fake-seer-testing-key-0000"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


class FakeOpenAI(FakeModelServer):
    """The Chat Completions API, scripted."""

    routes = ("/v1/chat/completions",)

    def env(self) -> dict[str, str]:
        """What the OpenAI SDK needs to talk to this fake."""
        return {"OPENAI_BASE_URL": self.url, "OPENAI_API_KEY": FAKE_API_KEY}

    @property
    def url(self) -> str:
        """The base URL (``.../v1``)."""
        return f"{self.origin}/v1"

    def parse(self, path: str, body: dict[str, Any]) -> ModelRequest:
        messages = body.get("messages") or []
        system = "\n".join(
            _content_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
        )
        results = [
            ToolResult(m.get("tool_call_id", ""), _content_text(m.get("content")))
            for m in messages
            if m.get("role") == "tool"
        ]
        trailing: list[ToolResult] = []
        for m in reversed(messages):
            if m.get("role") != "tool":
                break
            trailing.insert(0, ToolResult(m.get("tool_call_id", ""), _content_text(m.get("content"))))
        task = next((_content_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
        tools = [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
        return ModelRequest(path, body, system, tools, trailing, results, task)

    def respond(self, handler: BaseHTTPRequestHandler, request: ModelRequest, step: Say | list[Call]) -> None:
        if not (handler.headers.get("Authorization") or "").startswith("Bearer "):
            send_json(
                handler, 401, {"error": {"message": "no API key sent", "type": "invalid_request_error"}}
            )
            return
        if isinstance(step, Say):
            message: dict[str, Any] = {"role": "assistant", "content": step.text}
            finish = "stop"
        else:
            message = {
                "role": "assistant",
                "content": "\n".join(c.text for c in step if c.text) or None,
                "tool_calls": [
                    {
                        "id": self.next_id("call_"),
                        "type": "function",
                        "function": {"name": c.tool, "arguments": json.dumps(c.arguments)},
                    }
                    for c in step
                ],
            }
            finish = "tool_calls"
        completion_id = self.next_id("chatcmpl-")
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not request.body.get("stream"):
            send_json(
                handler,
                200,
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": request.body.get("model", self.model),
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                },
            )
            return
        base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": request.body.get("model", self.model),
        }
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if "tool_calls" in message:
            delta["tool_calls"] = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
        events: list[tuple[str | None, Any]] = [
            (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
            (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage}),
            (None, "[DONE]"),
        ]
        send_sse(handler, events)
