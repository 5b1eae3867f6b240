"""seer's MCP plugin: MCP servers for agents (notebook, shell) and the ``mcp`` expose mode.

Importing this package is cheap; the ``mcp`` SDK is imported only by the servers themselves.
"""
