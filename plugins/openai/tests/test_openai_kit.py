"""seer-openai's own parts: the plugin registers the runner, and the fake Chat Completions API
answers the real ``openai`` client as the API does (plain and streamed), records what it was sent,
and fails loudly on what it does not implement. The runner end to end is tests/test_harness_*.py."""

from __future__ import annotations

import json

import pytest
from seer import plugins
from seer.testing.model_api import Call, Say

pytestmark = pytest.mark.e2e

openai = pytest.importorskip("openai", reason="openai is not installed")


def test_the_runner_is_registered_and_usable() -> None:
    reg = plugins.agent_runners()["openai"]
    assert reg.distribution == "seer-openai"
    assert reg.cls.availability().usable


def test_the_fake_answers_the_real_client_plain_and_streamed() -> None:
    from seer_openai.testing import FakeOpenAI

    script = [Call("triple", {"x": 2}, text="let me see"), Say("six")]
    with FakeOpenAI(script) as fake:
        client = openai.OpenAI(base_url=fake.url, api_key=fake.env()["OPENAI_API_KEY"], max_retries=0)
        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "3x2?"}]
        tools = [{"type": "function", "function": {"name": "triple", "parameters": {"type": "object"}}}]
        first = client.chat.completions.create(model="m", messages=messages, tools=tools)  # type: ignore[arg-type]
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        assert (call.function.name, json.loads(call.function.arguments)) == ("triple", {"x": 2})
        assert first.choices[0].message.content == "let me see"
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "6"},
        ]
        stream = client.chat.completions.create(model="m", messages=messages, tools=tools, stream=True)  # type: ignore[arg-type]
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert text == "six"
        assert fake.requests[0].system == "be brief" and fake.requests[0].tools == ["triple"]
        assert fake.requests[1].result() == "6" and fake.requests[1].tool_results[0].call_id == call.id
        with pytest.raises(openai.NotFoundError, match="the fake has no POST /v1/embeddings"):
            client.embeddings.create(model="m", input="x")
        assert fake.unknown == ["POST /v1/embeddings"]
