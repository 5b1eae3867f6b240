"""seer-claude's own parts: the plugin registers the runner, Claude Code is found, and the fake
Messages API answers as the API does, streamed as server-sent events when asked, with the client's
own background calls kept apart from the script. The runner end to end is tests/test_harness_*.py."""

from __future__ import annotations

import json

import httpx
import pytest
from seer import plugins
from seer.testing.model_api import Call, Say

pytestmark = pytest.mark.e2e

pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk is not installed")


def test_the_runner_is_registered_and_finds_claude_code() -> None:
    from seer_claude.runner import bundled_cli

    reg = plugins.agent_runners()["claude"]
    assert reg.distribution == "seer-claude"
    usable = reg.cls.availability()
    assert usable.usable == (bundled_cli() is not None), usable.reason


def _events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_the_fake_streams_tool_calls_and_answers() -> None:
    from seer_claude.testing import FakeAnthropic

    with FakeAnthropic([Call("mcp__tools__triple", {"x": 2}), Say("six")]) as fake:
        headers = {"x-api-key": fake.env()["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01"}
        body = {
            "model": "m",
            "max_tokens": 100,
            "stream": True,
            "system": [{"type": "text", "text": "be brief"}],
            "tools": [{"name": "mcp__tools__triple", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": "3x2?"}],
        }
        first = _events(httpx.post(f"{fake.origin}/v1/messages", json=body, headers=headers).text)
        assert first[0]["type"] == "message_start" and first[-1]["type"] == "message_stop"
        start = next(e for e in first if e["type"] == "content_block_start")["content_block"]
        delta = next(e for e in first if e["type"] == "content_block_delta")["delta"]
        assert start["name"] == "mcp__tools__triple" and json.loads(delta["partial_json"]) == {"x": 2}
        assert next(e for e in first if e["type"] == "message_delta")["delta"]["stop_reason"] == "tool_use"

        # A background call (no tools) is answered without taking a step.
        side = httpx.post(
            f"{fake.origin}/v1/messages", json={**body, "stream": False, "tools": []}, headers=headers
        ).json()
        assert side["content"] == [{"type": "text", "text": "ok"}] and len(fake.side_requests) == 1

        result = {
            "type": "tool_result",
            "tool_use_id": start["id"],
            "content": [{"type": "text", "text": "6"}],
        }
        body["messages"] += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", **{k: start[k] for k in ("id", "name")}, "input": {"x": 2}}],
            },
            {"role": "user", "content": [result]},
        ]
        second = httpx.post(
            f"{fake.origin}/v1/messages", json={**body, "stream": False}, headers=headers
        ).json()
        assert second["content"] == [{"type": "text", "text": "six"}] and second["stop_reason"] == "end_turn"
        assert fake.requests[0].system == "be brief" and fake.requests[1].result() == "6"
        assert httpx.post(f"{fake.origin}/v1/complete", json={}, headers=headers).status_code == 404
        assert fake.unknown == ["POST /v1/complete"]
        assert httpx.post(f"{fake.origin}/v1/messages", json=body).status_code == 401, "a key is required"
