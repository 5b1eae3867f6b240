"""The base of the fake model APIs the agent runners' test kits ship (``seer_openai.testing``,
``seer_claude.testing``): an HTTP server on 127.0.0.1 that plays a scripted agent, so a real agent
SDK runs end to end with no model and no network.

A script is a list of steps, one per model request, each a :class:`Say` (the answer: the agent
stops) or a :class:`Call` / list of calls (the agent calls tools and asks again), or a callable
given the :class:`ModelRequest` (the conversation so far, parsed) that returns a step, so a later
step can use what an earlier tool answered. When the script runs out, the model answers
``(script ended)``; :func:`forever` makes a script that never stops calling a tool.

Every request is kept (:attr:`FakeModelServer.requests`, parsed as :class:`ModelRequest`), so a
test checks what reached the model: each tool result arrives in the request after the call. A
request to a path the fake does not implement fails loudly (HTTP 404 naming it) and is recorded in
:attr:`FakeModelServer.unknown`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from seer.testing.loopback import LoopbackServer

__all__ = ["Call", "FakeModelServer", "ModelRequest", "Say", "Step", "ToolResult", "forever"]


@dataclass(frozen=True)
class Say:
    """The model answers ``text`` and calls no tool (the end of the agent's run)."""

    text: str


@dataclass(frozen=True)
class Call:
    """The model calls ``tool`` with ``arguments`` (a runner's tool name: an MCP tool is
    ``execute_code`` for the OpenAI Agents SDK, ``mcp__notebook__execute_code`` for Claude)."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    #: words said before the call, if any
    text: str = ""


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer as the model received it."""

    call_id: str
    text: str
    is_error: bool = False


@dataclass
class ModelRequest:
    """One request the fake received: its JSON body, and what a script needs from it."""

    path: str
    body: dict[str, Any]
    #: the system prompt
    system: str = ""
    #: the names of the tools offered
    tools: list[str] = field(default_factory=list)
    #: the tool results at the end of the conversation (answers to the last calls)
    tool_results: list[ToolResult] = field(default_factory=list)
    #: every tool result in the conversation, in order
    all_tool_results: list[ToolResult] = field(default_factory=list)
    #: the first user message
    task: str = ""

    def result(self, index: int = -1) -> str:
        """The text of one of the latest tool results (the last by default); '' when none."""
        try:
            return self.tool_results[index].text
        except IndexError:
            return ""


Step = Say | Call | Sequence[Call] | Callable[[ModelRequest], Any]


def forever(tool: str, arguments: dict[str, Any] | None = None) -> Callable[[ModelRequest], Call]:
    """A step for a script that never stops: call ``tool`` on every request."""
    return lambda request: Call(tool, dict(arguments or {}))


class FakeModelServer(LoopbackServer):
    """Serves a scripted model on ``http://127.0.0.1:<free port>``. Subclasses speak one API:
    :meth:`parse` reads a request body into a :class:`ModelRequest`, :meth:`respond` writes the
    answer for a step, :attr:`routes` names the POST paths of model requests."""

    handler_attribute = "fake"
    thread_name = "seer-fake-model"
    what = "the fake model server"

    def request_handler(self) -> type[BaseHTTPRequestHandler]:
        """The handler answering each connection (this module's)."""
        return _Handler

    #: POST paths that are model requests
    routes: tuple[str, ...] = ()

    def __init__(self, script: Sequence[Step], *, model: str = "fake-model", delay: float = 0.0):
        self.script = list(script)
        self.model = model
        #: seconds each of the agent's turns takes to answer (a model thinking)
        self.delay = delay
        self.requests: list[ModelRequest] = []
        #: ``"METHOD path"`` of every request to something the fake does not implement
        self.unknown: list[str] = []
        #: model requests that are not the agent's turns (a client's own background calls: a
        #: title, a quota check), answered ``ok`` without taking a step of the script
        self.side_requests: list[ModelRequest] = []
        self._lock = threading.Lock()
        self._ids = 0

    def reset(self, script: Sequence[Step]) -> None:
        """Play ``script`` from its first step on the next request, forgetting the requests so far."""
        with self._lock:
            self.script = list(script)
            self.requests.clear()
            self.side_requests.clear()
            self.unknown.clear()

    # --- what subclasses implement -------------------------------------------------------
    def parse(self, path: str, body: dict[str, Any]) -> ModelRequest:
        """Read a model request's JSON body into a :class:`ModelRequest`."""
        raise NotImplementedError

    def respond(self, handler: BaseHTTPRequestHandler, request: ModelRequest, step: Say | list[Call]) -> None:
        """Write the API's response for ``step`` (an answer, or tool calls) to ``handler``."""
        raise NotImplementedError

    def scripted(self, request: ModelRequest) -> bool:
        """Whether ``request`` is one of the agent's turns (takes the script's next step); the
        default: every model request is."""
        return True

    def other(self, handler: BaseHTTPRequestHandler, method: str, path: str) -> bool:
        """Answer a request that is not a model request; False: unknown (a loud 404)."""
        return False

    # --- the script ----------------------------------------------------------------------
    def next_id(self, prefix: str) -> str:
        """A fresh id (``<prefix>0001``, ...) for a response or a tool call."""
        with self._lock:
            self._ids += 1
            return f"{prefix}{self._ids:04d}"

    def step_for(self, request: ModelRequest) -> Say | list[Call]:
        """The step for the ``n``-th model request (``request`` is already recorded)."""
        index = len(self.requests) - 1
        step: Any = self.script[index] if index < len(self.script) else Say("(script ended)")
        while callable(step) and not isinstance(step, Say | Call):
            step = step(request)
        if isinstance(step, Say):
            return step
        calls = [step] if isinstance(step, Call) else list(step)
        if not calls or not all(isinstance(c, Call) for c in calls):
            raise TypeError(f"script step {index}: expected Say, Call or a list of Call, got {step!r}")
        return calls

    # --- serving -------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    fake: FakeModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _path(self) -> str:
        return self.path.split("?", 1)[0]

    def _unknown(self, method: str) -> None:
        what = f"{method} {self._path()}"
        self.fake.unknown.append(what)
        send_json(self, 404, {"error": {"type": "not_found_error", "message": f"the fake has no {what}"}})

    def do_GET(self) -> None:
        if not self.fake.other(self, "GET", self._path()):
            self._unknown("GET")

    def do_HEAD(self) -> None:
        if not self.fake.other(self, "HEAD", self._path()):
            self._unknown("HEAD")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self._path()
        if path not in self.fake.routes:
            if not self.fake.other(self, "POST", path):
                self._unknown("POST")
            return
        try:
            body = json.loads(raw or b"{}")
            request = self.fake.parse(path, body)
            if not self.fake.scripted(request):
                with self.fake._lock:
                    self.fake.side_requests.append(request)
                self.fake.respond(self, request, Say("ok"))
                return
            with self.fake._lock:
                self.fake.requests.append(request)
            step = self.fake.step_for(request)
            if self.fake.delay:
                time.sleep(self.fake.delay)
        except Exception as exc:  # a broken script or request: say so to the client
            send_json(self, 500, {"error": {"type": "fake_error", "message": f"{type(exc).__name__}: {exc}"}})
            return
        self.fake.respond(self, request, step)


def send_json(handler: BaseHTTPRequestHandler, status: int, data: Any) -> None:
    """Write ``data`` as a JSON response."""
    payload = json.dumps(data).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


def send_sse(handler: BaseHTTPRequestHandler, events: Sequence[tuple[str | None, Any]]) -> None:
    """Write ``(event name or None, data)`` pairs as a server-sent-events response, then close."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for name, data in events:
        chunk = (
            f"event: {name}\n" if name else ""
        ) + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        handler.wfile.write(chunk.encode())
    handler.wfile.flush()
    handler.close_connection = True
