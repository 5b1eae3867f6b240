"""seer's agent runner on the Claude Agent SDK (``run_agent(..., provider="claude")``)."""
