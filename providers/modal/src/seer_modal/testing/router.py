"""The fake's ``modal.task_command_router.TaskCommandRouter`` service: what Modal's workers serve
for a running sandbox (execs with their stdio, filesystem snapshots), on the same server as the
control plane. Each call must carry a router token the control plane issued for the task.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from grpclib import GRPCError, Status
from modal_proto import task_command_router_grpc
from modal_proto import task_command_router_pb2 as sr_pb2

from seer_modal.testing.control_plane import blocking
from seer_modal.testing.engine import ENV_FILE, ExecProcess
from seer_modal.testing.state import FakeExec, FakeImage, FakeSandbox, FakeState, Output, new_id

__all__ = ["Router"]

#: The most one ``TaskExecStdioRead`` message carries.
CHUNK = 1 << 16
_STDERR_TO_STDOUT = sr_pb2.TaskExecStderrConfig.TASK_EXEC_STDERR_CONFIG_STDOUT
_DEVNULL = (
    sr_pb2.TaskExecStdoutConfig.TASK_EXEC_STDOUT_CONFIG_DEVNULL,
    sr_pb2.TaskExecStderrConfig.TASK_EXEC_STDERR_CONFIG_DEVNULL,
)


def _soon(loop: asyncio.AbstractEventLoop, fn: Any, *args: Any) -> None:
    """Hand a result from a worker thread to the loop (dropped once the fake has shut down)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


class Router(task_command_router_grpc.TaskCommandRouterBase):
    """Handlers of the router calls the fake implements, on one :class:`FakeState`."""

    def __init__(self, state: FakeState):
        self.state = state

    def _sandbox(self, stream: Any, task_id: str) -> FakeSandbox:
        """The running sandbox of ``task_id``, if the call's token was issued for it."""
        sandbox = self.state.sandbox_for_task(task_id)
        if sandbox is None:
            raise GRPCError(Status.NOT_FOUND, f"task {task_id} not found")
        token = str(stream.metadata.get("authorization", "")).removeprefix("Bearer ")
        if token not in sandbox.jwts:
            raise GRPCError(Status.UNAUTHENTICATED, f"no valid router token for task {task_id}")
        if sandbox.finished.is_set():
            raise GRPCError(Status.NOT_FOUND, f"task {task_id} has finished")
        return sandbox

    def _exec(self, stream: Any, task_id: str, exec_id: str) -> FakeExec:
        sandbox = self.state.sandbox_for_task(task_id)
        process = sandbox.execs.get(exec_id) if sandbox else None
        if sandbox is None or process is None:
            raise GRPCError(Status.NOT_FOUND, f"exec {exec_id} not found in task {task_id}")
        token = str(stream.metadata.get("authorization", "")).removeprefix("Bearer ")
        if token not in sandbox.jwts:
            raise GRPCError(Status.UNAUTHENTICATED, f"no valid router token for task {task_id}")
        return process

    # --- execs ---------------------------------------------------------------------------------
    async def TaskExecStart(self, stream: Any) -> None:
        req = await stream.recv_message()
        sandbox = self._sandbox(stream, req.task_id)
        if req.container_id:
            raise GRPCError(Status.UNIMPLEMENTED, "TaskExecStart: the fake has no sidecar containers")
        if req.exec_id in sandbox.execs:  # a retried start
            await stream.send_message(sr_pb2.TaskExecStartResponse())
            return
        env = dict(sandbox.env)
        for secret_id in req.secret_ids:
            env.update(self.state.secrets.get(secret_id, {}))
        for source in req.secret_sources:
            env.update(
                self.state.secrets.get(source.secret_id, {}) if source.secret_id else source.env.contents
            )
        env.update(req.env)
        stdout = Output(keep=req.stdout_config not in _DEVNULL)
        stderr = (
            stdout
            if req.stderr_config == _STDERR_TO_STDOUT
            else Output(keep=req.stderr_config not in _DEVNULL)
        )
        process = FakeExec(req.exec_id, stdout, stderr)
        sandbox.execs[req.exec_id] = process
        argv = list(req.command_args)
        if req.timeout_secs:
            # coreutils timeout signals the command's whole process group
            argv = ["timeout", "-k", "2", str(req.timeout_secs), *argv]
        loop = asyncio.get_running_loop()

        def on_data(fd: int, data: bytes) -> None:
            target = process.stderr if fd == 2 else process.stdout
            _soon(loop, target.feed, data)

        def on_exit(code: int) -> None:
            _soon(loop, self._exited, process, code)

        try:
            process.process = await blocking(
                ExecProcess,
                self.state.engine.client,
                sandbox.container_id,
                argv,
                env=env,
                workdir=req.workdir or None,
                on_data=on_data,
                on_exit=on_exit,
            )
        except Exception as exc:
            del sandbox.execs[req.exec_id]
            raise GRPCError(Status.NOT_FOUND, f"exec in task {req.task_id} failed: {exc}") from None
        await stream.send_message(sr_pb2.TaskExecStartResponse())

    @staticmethod
    def _exited(process: FakeExec, code: int) -> None:
        process.exit_code = code
        process.stdout.close()
        process.stderr.close()
        process.done.set()

    async def TaskExecStdioRead(self, stream: Any) -> None:
        req = await stream.recv_message()
        process = self._exec(stream, req.task_id, req.exec_id)
        stderr = (
            req.file_descriptor == sr_pb2.TaskExecStdioFileDescriptor.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR
        )
        output = process.stderr if stderr else process.stdout
        if stderr and output is process.stdout:  # stderr goes to stdout: nothing to read here
            return
        offset = req.offset
        while True:
            if offset < len(output.data):
                chunk = bytes(output.data[offset : offset + CHUNK])
                if self.state.stdio_lag:
                    await asyncio.sleep(self.state.stdio_lag)
                await stream.send_message(sr_pb2.TaskExecStdioReadResponse(data=chunk))
                offset += len(chunk)
            elif output.closed:
                return
            else:
                await output.changed()

    async def TaskExecWait(self, stream: Any) -> None:
        req = await stream.recv_message()
        process = self._exec(stream, req.task_id, req.exec_id)
        await process.done.wait()
        code = 137 if process.exit_code is None else process.exit_code
        await stream.send_message(sr_pb2.TaskExecWaitResponse(code=code))

    async def TaskExecPoll(self, stream: Any) -> None:
        req = await stream.recv_message()
        process = self._exec(stream, req.task_id, req.exec_id)
        response = sr_pb2.TaskExecPollResponse()
        if process.done.is_set():
            response.code = process.exit_code or 0
        await stream.send_message(response)

    async def _stdin(self, process: FakeExec, offset: int, data: bytes, eof: bool) -> None:
        """Write stdin from ``offset`` (bytes already written are skipped: retries resend them)."""
        async with process.stdin_lock:
            if process.stdin_closed:
                if data[max(0, process.stdin_offset - offset) :]:
                    raise GRPCError(Status.FAILED_PRECONDITION, f"stdin of exec {process.exec_id} is closed")
                return
            if offset > process.stdin_offset:
                raise GRPCError(
                    Status.OUT_OF_RANGE,
                    f"stdin offset {offset} is past the {process.stdin_offset} bytes written",
                )
            fresh = data[process.stdin_offset - offset :]
            if fresh and process.process is not None:
                await blocking(process.process.write, fresh)
            process.stdin_offset += len(fresh)
            if eof and process.process is not None:
                await blocking(process.process.close_stdin)
                process.stdin_closed = True

    async def TaskExecStdinWrite(self, stream: Any) -> None:
        req = await stream.recv_message()
        process = self._exec(stream, req.task_id, req.exec_id)
        await self._stdin(process, req.offset, req.data, req.eof)
        await stream.send_message(sr_pb2.TaskExecStdinWriteResponse())

    async def TaskExecStdinWriteStream(self, stream: Any) -> None:
        first = await stream.recv_message()
        if first is None or not first.HasField("start"):
            raise GRPCError(
                Status.INVALID_ARGUMENT, "TaskExecStdinWriteStream must begin with a start message"
            )
        process = self._exec(stream, first.start.task_id, first.start.exec_id)
        offset = first.start.offset
        async for message in stream:
            if message.HasField("end"):
                await self._stdin(process, offset, b"", True)
                break
            await self._stdin(process, offset, message.data, False)
            offset += len(message.data)
        await stream.send_message(sr_pb2.TaskExecStdinWriteStreamResponse())

    async def TaskExecStdinStatus(self, stream: Any) -> None:
        req = await stream.recv_message()
        process = self._exec(stream, req.task_id, req.exec_id)
        await stream.send_message(
            sr_pb2.TaskExecStdinStatusResponse(
                num_bytes_written=process.stdin_offset, closed=process.stdin_closed
            )
        )

    # --- the sandbox -----------------------------------------------------------------------
    async def TaskSnapshotFilesystem(self, stream: Any) -> None:
        req = await stream.recv_message()
        sandbox = self._sandbox(stream, req.task_id)
        engine = self.state.engine
        # the entrypoint deletes the environment file as it starts; make sure it is gone
        loop = asyncio.get_running_loop()
        removed = asyncio.Event()
        await blocking(
            ExecProcess,
            engine.client,
            sandbox.container_id,
            ["rm", "-f", ENV_FILE],
            env={},
            workdir=None,
            on_data=lambda fd, data: None,
            on_exit=lambda code: _soon(loop, removed.set),
        )
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(removed.wait(), timeout=10)
        image_id = new_id("im")
        docker_image = await blocking(engine.commit, sandbox.container_id, image_id)
        record = FakeImage(image_id, docker_image)
        record.done.set()
        self.state.images[image_id] = record
        await stream.send_message(sr_pb2.TaskSnapshotFilesystemResponse(image_id=image_id))

    async def TaskReloadVolumes(self, stream: Any) -> None:
        # Docker volumes are shared live between containers: nothing to reload.
        req = await stream.recv_message()
        self._sandbox(stream, req.task_id)
        await stream.send_message(sr_pb2.TaskReloadVolumesResponse())
