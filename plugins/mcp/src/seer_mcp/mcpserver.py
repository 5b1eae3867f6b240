"""The MCP server class seer's notebook and shell servers share: the SDK's ``MCPServer`` with
tool descriptions dedented (a docstring's source indentation is not part of what the agent reads)
and argument errors answered with the tool's signature, as the interface server answers them,
instead of pydantic's validation report."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

__all__ = ["SeerMCPServer", "argument_problems", "signature"]


def _type_name(schema: dict[str, Any]) -> str:
    """A JSON schema's type, as Python spells it (``str``, ``float | None``, ``'a' | 'b'``)."""
    if "anyOf" in schema:
        return " | ".join(_type_name(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    if "const" in schema:
        return repr(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_type_name({"type": k}) for k in kind)
    if kind == "array":
        return f"list[{_type_name(schema.get('items') or {})}]"
    return {
        "string": "str",
        "integer": "int",
        "number": "float",
        "boolean": "bool",
        "null": "None",
        "object": "dict",
    }.get(str(kind), "Any")


def signature(tool: types.Tool | Any) -> str:
    """``name(arg: type, other: type = default)``, from a tool's input schema."""
    schema = getattr(tool, "input_schema", None) or getattr(tool, "parameters", None) or {}
    required = set(schema.get("required") or [])
    parts = []
    for name, prop in (schema.get("properties") or {}).items():
        part = f"{name}: {_type_name(prop)}"
        if name not in required:
            part += f" = {prop.get('default')!r}"
        parts.append(part)
    return f"{tool.name}({', '.join(parts)})"


def argument_problems(error: ValidationError) -> list[str]:
    """What is wrong with a call's arguments, one line per argument, without pydantic's links."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item.get("loc", ())) or "arguments"
        if item.get("type") == "missing":
            problems.append(f"missing argument {where!r}")
        else:
            got = item.get("input")
            shown = repr(got) if len(repr(got)) <= 60 else f"a {type(got).__name__}"
            problems.append(f"{where!r}: {item.get('msg', 'invalid')} (got {shown})")
    return problems


class SeerMCPServer(MCPServer):
    """``MCPServer`` with dedented tool descriptions and argument errors that name the signature."""

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, *args: Any, **kw: Any) -> None:
        text = kw.pop("description", None)
        kw["description"] = inspect.cleandoc(text if text is not None else (fn.__doc__ or ""))
        super().add_tool(fn, name, *args, **kw)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            tool = self._tool_manager.get_tool(name)
            if tool is None:
                known = ", ".join(sorted(t.name for t in self._tool_manager.list_tools()))
                return _error(f"There is no tool {name!r}; the tools are: {known}.")
            if not isinstance(cause, ValidationError):
                raise
            unknown = sorted(set(arguments) - set(tool.parameters.get("properties") or {}))
            problems = argument_problems(cause) + [f"unknown argument {u!r}" for u in unknown]
            return _error(f"Wrong arguments for {name}: {'; '.join(problems)}.\nSignature: {signature(tool)}")


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
