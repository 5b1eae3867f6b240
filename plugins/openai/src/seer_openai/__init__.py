"""seer's agent runner on the OpenAI Agents SDK (``run_agent(..., provider="openai")``)."""
