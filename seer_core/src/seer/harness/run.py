"""``run_agent``: one agent run on what seer prepared, yielding its messages as they come.

The runner (an :class:`~seer.harness.runner.AgentRunner` plugin) runs as one asyncio task and
emits messages; this module records each in the transcript, hands it to the caller, and ends the
run at its limits: ``max_turns`` model responses (the runner passes the limit to its client; a
response past it stops the run here too) and ``timeout`` seconds of wall-clock time, each with a
``final`` message saying so. :meth:`AgentRun.cancel`, Ctrl-C, or leaving the ``async for`` early
stops the agent the same way; the sandbox, the notebook and the transcript stay as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from seer.errors import AgentRunError, ConfigError
from seer.harness.messages import AgentMessage
from seer.harness.runner import AgentRunner, AgentSetup
from seer.harness.setup import DEFAULT_MAX_TURNS, DEFAULT_TIMEOUT, install_skills, prepare, skills_prompt
from seer.harness.transcript import Redactor, Transcript, secret_values

__all__ = ["AgentRun", "AgentRunError", "choose_runner", "max_turns_final", "run_agent", "run_agent_sync"]

#: Runners tried, in this order, when ``run_agent`` names none (then any other installed one).
PREFERRED_RUNNERS = ("claude", "openai")


class _Done:
    def __init__(self, error: BaseException | None = None):
        self.error = error


_CANCEL = object()

#: Seconds a cancelled run waits for its runner (the agent client, its MCP servers) to end.
CLOSE_GRACE = 10.0

log = logging.getLogger(__name__)


def choose_runner(provider: str | None) -> type[AgentRunner]:
    """The runner class named ``provider`` (default: ``$SEER_AGENT_RUNNER``), or else the first
    usable one installed (``claude``, then ``openai``, then any other); a clear error when it is
    unknown or cannot run here."""
    from seer import plugins

    if provider is None and os.environ.get("SEER_AGENT_RUNNER", "").strip():
        provider = os.environ["SEER_AGENT_RUNNER"].strip()
    if provider is not None:
        if not isinstance(provider, str) or not provider.strip():
            raise ConfigError(f"provider: expected an agent runner's name, got {provider!r}")
        cls = plugins.get_agent_runner(provider)
        available = cls.availability()
        if not available.usable:
            raise ConfigError(f"provider: the agent runner {provider!r} cannot run here: {available.reason}")
        return cls
    installed = plugins.agent_runners()
    order = [n for n in PREFERRED_RUNNERS if n in installed] + sorted(set(installed) - set(PREFERRED_RUNNERS))
    reasons = []
    for name in order:
        cls = installed[name].cls
        available = cls.availability()
        if available.usable:
            return cls
        reasons.append(f"{name}: {available.reason}")
    if not installed:
        raise ConfigError(
            "provider: no agent runner is installed; install one with: "
            'pip install "seer[claude]" or pip install "seer[openai]"'
        )
    raise ConfigError("provider: no installed agent runner can run here (" + "; ".join(reasons) + ")")


class AgentRun:
    """One agent run: iterate it (``async for msg in run``) to run the agent and get each
    :class:`~seer.harness.messages.AgentMessage`; :meth:`cancel` stops it. Single use."""

    def __init__(self, runner: AgentRunner, prepared: Any, setup_args: dict[str, Any], redactor: Redactor):
        self.runner = runner
        self.run_id: str = prepared.run_id
        self._prepared = prepared
        self._setup_args = setup_args
        self._redactor = redactor
        #: every message so far (what was yielded)
        self.messages: list[AgentMessage] = []
        #: the run's last message, once it ended
        self.final: AgentMessage | None = None
        #: the transcript files (known once the run started)
        self.transcript_path: Path = prepared.record_dir / f"{self.run_id}.jsonl"
        self.markdown_path: Path = prepared.record_dir / f"{self.run_id}.md"
        self._cancelled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Any] | None = None
        self._iterator: AsyncIterator[AgentMessage] | None = None

    def __repr__(self) -> str:
        return f"<AgentRun {self.run_id} runner={self.runner.name!r}>"

    def __aiter__(self) -> AsyncIterator[AgentMessage]:
        if self._iterator is None:
            self._iterator = self._iterate()
        return self._iterator

    async def __anext__(self) -> AgentMessage:
        return await self.__aiter__().__anext__()

    async def aclose(self) -> None:
        """Stop the run if it is going (as :meth:`cancel`) and wait for it to end."""
        if self._iterator is not None:
            await self._iterator.aclose()  # type: ignore[attr-defined]

    def cancel(self) -> None:
        """Stop the agent: its client and MCP servers are closed, the transcript ends with a
        ``final`` message (``cancelled``). Safe from any thread, and more than once."""
        self._cancelled = True
        if self._loop is not None and self._queue is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._queue.put_nowait, _CANCEL)

    async def _iterate(self) -> AsyncIterator[AgentMessage]:
        p = self._prepared
        args = self._setup_args
        loop = asyncio.get_running_loop()
        self._loop = loop
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._queue = queue
        scratch = Path(tempfile.mkdtemp(prefix="seer-agent-"))
        transcript: Transcript | None = None
        task: asyncio.Task[None] | None = None
        turns = 0

        def emit(message: AgentMessage) -> None:
            nonlocal turns
            if message.kind == "assistant":
                turns += 1
            message.turn = turns
            queue.put_nowait(message)

        try:
            skills = install_skills(p.skills, scratch / "skills")
            prompt = "\n\n".join(x for x in (p.system_prompt, skills_prompt(skills)) if x)
            cwd = p.cwd or (scratch / "work")
            cwd.mkdir(parents=True, exist_ok=True)
            setup = AgentSetup(
                task=p.task,
                system_prompt=prompt,
                mcp_servers=p.mcp_servers,
                skills=skills,
                cwd=cwd,
                skills_dir=scratch / "skills",
                local_tools=p.local_tools,
                model=args["model"] or type(self.runner).default_model,
                max_turns=args["max_turns"],
                timeout=float(args["timeout"]),
                options=dict(args["options"] or {}),
            )
            transcript = Transcript(
                p.record_dir,
                self.run_id,
                self._redactor,
                {
                    "runner": self.runner.name,
                    "model": setup.model,
                    "session": p.session_label,
                    "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "max_turns": setup.max_turns,
                    "timeout": setup.timeout,
                    "mcp_servers": sorted(setup.mcp_servers),
                    "skills": sorted(setup.skills),
                    "cwd": str(cwd) if p.local_tools else None,
                },
            )
            emit(AgentMessage("system", prompt))
            emit(AgentMessage("user", p.task))

            async def drive() -> None:
                try:
                    await self.runner.run(setup, emit)
                except asyncio.CancelledError:
                    raise
                except BaseException as exc:
                    queue.put_nowait(_Done(exc))
                    return
                queue.put_nowait(_Done())

            task = asyncio.create_task(drive(), name=f"seer-agent-{self.run_id}")
            deadline = loop.time() + setup.timeout
            stop: tuple[str, str] | None = None
            error: BaseException | None = None
            while True:
                if self._cancelled:
                    stop = ("cancelled", "Stopped: the run was cancelled.")
                    break
                # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the item and drops
                # a cancel (Ctrl-C) that comes in the step where the item arrives
                try:
                    async with asyncio.timeout_at(deadline):
                        item = await queue.get()
                except TimeoutError:
                    stop = ("timeout", f"Stopped: the wall-clock limit of {setup.timeout:g} s passed.")
                    break
                if item is _CANCEL:
                    continue
                if isinstance(item, _Done):
                    error = item.error
                    break
                message: AgentMessage = item
                if message.kind == "assistant" and message.turn > setup.max_turns:
                    stop = ("max_turns", max_turns_final(setup.max_turns).text)
                    break
                if message.kind == "final" and self.final is not None:
                    continue
                yield self._record(transcript, message)
            await _end(task)
            # What the runner emitted before it stopped is part of the record (a response past
            # max_turns is not: the run ended before it).
            for message in _queued(queue, setup.max_turns):
                if not (message.kind == "final" and self.final is not None):
                    yield self._record(transcript, message)
            if stop is not None and self.final is None:
                yield self._record(
                    transcript, AgentMessage("final", stop[1], stop_reason=stop[0], is_error=True, turn=turns)
                )
            elif error is not None and self.final is None:
                text = self._redactor.text(f"The agent client failed: {type(error).__name__}: {error}")
                yield self._record(
                    transcript, AgentMessage("final", text, stop_reason="error", is_error=True, turn=turns)
                )
                raise AgentRunError(text) from error
            elif self.final is None:
                said = [m.text for m in self.messages if m.kind == "assistant" and m.text.strip()]
                yield self._record(
                    transcript,
                    AgentMessage("final", said[-1] if said else "", stop_reason="answered", turn=turns),
                )
        finally:
            await _end(task)
            if transcript is not None:
                for message in _queued(queue, None):
                    if self.final is None or message.kind != "final":
                        self._record(transcript, message)
                if self.final is None:
                    self._record(
                        transcript,
                        AgentMessage(
                            "final",
                            "Stopped: the run was interrupted.",
                            stop_reason="cancelled",
                            is_error=True,
                            turn=turns,
                        ),
                    )
                transcript.close()
            shutil.rmtree(scratch, ignore_errors=True)

    def _record(self, transcript: Transcript, message: AgentMessage) -> AgentMessage:
        # What the caller gets is redacted as the transcript is: it is printed and logged.
        message.text = self._redactor.text(message.text)
        if message.arguments is not None:
            message.arguments = self._redactor.value(message.arguments)
        transcript.add(message)
        self.messages.append(message)
        if message.kind == "final":
            self.final = message
        return message


async def _end(task: asyncio.Task[None] | None) -> None:
    """Cancel the runner's task and wait for it to end, at most ``CLOSE_GRACE`` seconds: a client
    that takes longer to close does not hold up the transcript (the task is cancelled again when
    the run's event loop closes, as ``asyncio.run`` does with every task left)."""
    if task is None or task.done():
        return
    task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait({task}, timeout=CLOSE_GRACE)
    if not task.done():
        log.warning("the agent client did not end within %g s of being cancelled", CLOSE_GRACE)


def _queued(queue: asyncio.Queue[Any], max_turns: int | None) -> list[AgentMessage]:
    """The messages still in ``queue`` (taken out), up to turn ``max_turns``."""
    out = []
    while not queue.empty():
        item = queue.get_nowait()
        if isinstance(item, AgentMessage) and (max_turns is None or item.turn <= max_turns):
            out.append(item)
    return out


def max_turns_final(max_turns: int) -> AgentMessage:
    """The ``final`` message of a run stopped at ``max_turns``: runners whose client enforces the
    limit itself emit this one, so every runner says it the same way."""
    return AgentMessage(
        "final",
        f"Stopped: the agent used its {max_turns} turns (max_turns) without a final answer.",
        stop_reason="max_turns",
        is_error=True,
    )


def run_agent(
    task: str | None = None,
    *,
    prompts: Sequence[str | os.PathLike[str]] | str = (),
    session: Any = None,
    mcp_servers: Sequence[dict[str, Any]] | dict[str, Any] = (),
    skills: Sequence[Any] = (),
    provider: str | None = None,
    model: str | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    timeout: float = DEFAULT_TIMEOUT,
    outputs_dir: str | os.PathLike[str] | None = None,
    secrets: Sequence[str] = (),
    options: dict[str, Any] | None = None,
) -> AgentRun:
    """Run an agent on ``task``; iterate the result for its messages::

        async for msg in run_agent(session=session, mcp_servers=[tools], task="Analyze model activations"):
            print(msg)

    - ``session``: a notebook, CLI or local session; its MCP servers, prompt, skills and (for a
      local session) working directory are the agent's.
    - ``prompts``: more system prompt parts (text, or paths of files to read): a served
      interface's ``expose_as="prompt"`` text, a methodology.
    - ``mcp_servers``: more MCP server configs (a served interface's ``expose_as="mcp"``).
    - ``skills``: more skills (``Skill`` objects or skill folders).
    - ``provider``: the agent runner (``claude``, ``openai``, or a plugin's); default: the first
      installed one that can run here. ``model``: the model it asks for.
    - ``max_turns`` (model responses) and ``timeout`` (seconds, wall clock) end the run with a
      ``final`` message saying which limit was reached.
    - ``outputs_dir``: where the transcript goes (default: the session's record on this machine,
      ``<record>/agent-runs/<run_id>.jsonl`` and ``.md``). ``secrets``: more values never to
      write there.
    - ``options``: passed to the runner as they are.

    Every argument is checked here, before anything starts (:class:`~seer.errors.ConfigError`).
    """
    prepared = prepare(
        task=task,
        prompts=prompts,
        session=session,
        mcp_servers=mcp_servers,
        skills=skills,
        max_turns=max_turns,
        timeout=timeout,
        outputs_dir=outputs_dir,
    )
    if options is not None and not isinstance(options, dict):
        raise ConfigError(f"options: expected a dict of runner options, got {options!r}")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ConfigError(f"model: expected a model name, got {model!r}")
    runner = choose_runner(provider)()
    redactor = Redactor(secret_values(prepared.mcp_servers) | {s for s in secrets if isinstance(s, str)})
    args = {"model": model, "max_turns": max_turns, "timeout": timeout, "options": options}
    return AgentRun(runner, prepared, args, redactor)


def _noting_sigint(flag: threading.Event, run: AgentRun) -> Callable[[], None]:
    """Set ``flag`` and cancel ``run`` on SIGINT, then do what the handler in place (asyncio's:
    cancel the main task) does; returns what puts that handler back. Only in the main thread,
    where signal handlers run. The run's own cancel stops it even where the main task's cancel is
    lost on its way (a library that swallows a CancelledError)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):
        return lambda: None

    def on_sigint(signum: int, frame: Any) -> None:
        flag.set()
        run.cancel()
        previous(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)

    def restore() -> None:
        if signal.getsignal(signal.SIGINT) is on_sigint:
            signal.signal(signal.SIGINT, previous)

    return restore


def run_agent_sync(
    task: str | None = None, *, on_message: Callable[[AgentMessage], None] | None = print, **kwargs: Any
) -> AgentRun:
    """:func:`run_agent` for scripts: runs the agent to its end, calling ``on_message`` (default
    ``print``; None: nothing) with each message, and returns the finished :class:`AgentRun`
    (``final``, ``messages``, ``transcript_path``). Ctrl-C stops the agent, keeps the transcript
    and raises ``KeyboardInterrupt``. Works from inside a running event loop (a notebook) too,
    by running in a thread of its own."""
    run = run_agent(task, **kwargs)
    interrupted = threading.Event()

    async def main() -> None:
        restore = _noting_sigint(interrupted, run)
        try:
            async with contextlib.aclosing(run.__aiter__()) as messages:  # type: ignore[type-var]
                async for message in messages:
                    if on_message is not None:
                        on_message(message)
        finally:
            restore()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        try:
            asyncio.run(main())
        except Exception:
            # Ctrl-C reaches the agent client's own process too (one process group): where it
            # ended first and its runner failed, the run was still interrupted, not failed
            if interrupted.is_set():
                raise KeyboardInterrupt from None
            raise
        if interrupted.is_set():  # the run's cancel ended it: still a Ctrl-C
            raise KeyboardInterrupt from None
        return run
    failure: list[BaseException] = []

    def in_thread() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=in_thread, name=f"seer-agent-{run.run_id}", daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        run.cancel()
        thread.join()
        raise
    if failure:
        raise failure[0]
    return run
