"""The fake's ``modal.client.ModalClient`` service: the calls the SDK makes for apps, images,
volumes, secrets and sandboxes (both the older ``Sandbox*`` calls, which GPU sandboxes use, and
the ``*V2`` ones). Methods not defined here answer ``UNIMPLEMENTED`` naming the call (see
:mod:`seer_modal.testing.fake`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from google.protobuf import empty_pb2, text_format
from grpclib import GRPCError, Status
from modal_proto import api_grpc, api_pb2

from seer_modal.testing.engine import LayerBuildError
from seer_modal.testing.layers import LayerError, layer_key, render_layer
from seer_modal.testing.mounts import MountCalls
from seer_modal.testing.state import FakeApp, FakeImage, FakeSandbox, FakeState, FakeVolume, fake_jwt, new_id

__all__ = ["ControlPlane", "blocking"]

T = TypeVar("T")
_OCT = api_pb2.ObjectCreationType
_RESULT = api_pb2.GenericResult


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking (Docker) call in the loop's worker threads."""
    return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))


def _get_or_create(kind: str, name: str, found: T | None, creation: int, create: Callable[[], T]) -> T:
    """Modal's get-or-create rules for a named object (apps, volumes, secrets)."""
    if found is not None:
        if creation == _OCT.OBJECT_CREATION_TYPE_CREATE_FAIL_IF_EXISTS:
            raise GRPCError(Status.ALREADY_EXISTS, f"{kind} {name!r} already exists")
        return found
    if creation == _OCT.OBJECT_CREATION_TYPE_UNSPECIFIED:
        raise GRPCError(Status.NOT_FOUND, f"{kind} {name!r} not found")
    return create()


def _environment(name: str) -> str:
    return name or "main"


class ControlPlane(MountCalls, api_grpc.ModalClientBase):
    """Handlers of the control-plane calls the fake implements, on one :class:`FakeState`."""

    def __init__(self, state: FakeState):
        self.state = state

    # --- auth, apps, environments ------------------------------------------------------------
    def authorize(self, metadata: Any) -> None:
        """Refuse a call without the fake's token (as Modal refuses a bad one)."""
        token = (metadata.get("x-modal-token-id"), metadata.get("x-modal-token-secret"))
        if token != (self.state.token_id, self.state.token_secret):
            raise GRPCError(Status.UNAUTHENTICATED, "the fake Modal control plane does not know this token")

    async def ClientHello(self, stream: Any) -> None:
        await stream.recv_message()
        await stream.send_message(api_pb2.ClientHelloResponse())

    async def AuthTokenGet(self, stream: Any) -> None:
        await stream.recv_message()
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=fake_jwt({"sub": self.state.token_id})))

    async def EnvironmentGetOrCreate(self, stream: Any) -> None:
        req = await stream.recv_message()
        name = _environment(req.deployment_name)
        settings = api_pb2.EnvironmentSettings(
            image_builder_version=self.state.builder_version, webhook_suffix="modal.run"
        )
        await stream.send_message(
            api_pb2.EnvironmentGetOrCreateResponse(
                environment_id=f"en-fake{name}",
                metadata=api_pb2.EnvironmentMetadata(name=name, settings=settings),
            )
        )

    async def AppGetOrCreate(self, stream: Any) -> None:
        req = await stream.recv_message()
        environment = _environment(req.environment_name)

        def create() -> FakeApp:
            app = FakeApp(new_id("ap"), req.app_name, environment)
            self.state.apps[app.app_id] = app
            return app

        found = self.state.app_named(req.app_name, environment) if req.app_name else None
        app = _get_or_create("App", req.app_name, found, req.object_creation_type, create)
        await stream.send_message(
            api_pb2.AppGetOrCreateResponse(
                app_id=app.app_id,
                handle_metadata=api_pb2.AppHandleMetadata(app_id=app.app_id, environment_name=environment),
            )
        )

    # --- secrets and volumes ---------------------------------------------------------------
    async def SecretGetOrCreate(self, stream: Any) -> None:
        req = await stream.recv_message()
        state = self.state

        def create() -> str:
            secret_id = new_id("st")
            state.secrets[secret_id] = dict(req.env_dict)
            if req.deployment_name:
                state.secret_names[req.deployment_name] = secret_id
            return secret_id

        if req.deployment_name:
            secret_id = _get_or_create(
                "Secret",
                req.deployment_name,
                state.secret_names.get(req.deployment_name),
                req.object_creation_type,
                create,
            )
        else:
            secret_id = create()
        missing = sorted(set(req.required_keys) - set(state.secrets[secret_id]))
        if missing:
            raise GRPCError(
                Status.FAILED_PRECONDITION, f"Secret {req.deployment_name!r} is missing the keys {missing}"
            )
        await stream.send_message(
            api_pb2.SecretGetOrCreateResponse(
                secret_id=secret_id,
                metadata=api_pb2.SecretMetadata(
                    name=req.deployment_name, keys=sorted(state.secrets[secret_id])
                ),
            )
        )

    async def VolumeGetOrCreate(self, stream: Any) -> None:
        req = await stream.recv_message()
        state = self.state
        version = req.version or api_pb2.VOLUME_FS_VERSION_V2

        def create() -> FakeVolume:
            volume_id = new_id("vo")
            volume = FakeVolume(volume_id, req.deployment_name, f"seer-modal-fake-{volume_id}")
            state.volumes[volume_id] = volume
            return volume

        if req.deployment_name:
            found = next((v for v in state.volumes.values() if v.name == req.deployment_name), None)
            volume = _get_or_create("Volume", req.deployment_name, found, req.object_creation_type, create)
        else:
            volume = create()
        await blocking(state.engine.ensure_volume, volume.docker_volume)
        await stream.send_message(
            api_pb2.VolumeGetOrCreateResponse(
                volume_id=volume.volume_id,
                version=version,
                metadata=api_pb2.VolumeMetadata(name=volume.name, version=version),
            )
        )

    # --- images ----------------------------------------------------------------------------
    def _image_metadata(self) -> api_pb2.ImageMetadata:
        return api_pb2.ImageMetadata(image_builder_version=self.state.builder_version)

    async def ImageGetOrCreate(self, stream: Any) -> None:
        req = await stream.recv_message()
        state = self.state
        image = req.image
        state.image_definitions.append(text_format.MessageToString(image))
        unsupported = {
            "secrets (Image.*(secrets=..., env=...))": bool(image.secret_ids),
            "build functions (Image.run_function)": bool(image.HasField("build_function")),
            "volumes in image builds": bool(image.volume_mounts),
        }
        for what, present in unsupported.items():
            if present:
                raise GRPCError(
                    Status.UNIMPLEMENTED, f"ImageGetOrCreate: the fake does not build images with {what}"
                )
        parents: dict[str, str] = {}
        for base in image.base_images:
            parent = state.images.get(base.image_id)
            if parent is None or parent.error is not None or not parent.docker_image:
                raise GRPCError(Status.NOT_FOUND, f"base image {base.image_id} is not built")
            parents[base.docker_tag] = parent.docker_image
        try:
            dockerfile = render_layer(list(image.dockerfile_commands), parents, state.engine.base_image_id)
        except LayerError as exc:
            message = f"the fake cannot build this layer: {exc}"
            failed = FakeImage(new_id("im"), "", error=message)
            failed.done.set()
            state.images[failed.image_id] = failed
            result = _RESULT(status=_RESULT.GENERIC_STATUS_FAILURE, exception=message)
            await stream.send_message(
                api_pb2.ImageGetOrCreateResponse(image_id=failed.image_id, result=result)
            )
            return
        context = {f.filename: f.data for f in image.context_files}
        mount: list[tuple[str, str, int]] = []
        if image.context_mount_id:  # Image.add_local_*(copy=True): the mount's files are the context
            if image.context_mount_id not in state.store.mounts:
                raise GRPCError(Status.NOT_FOUND, f"mount {image.context_mount_id} not found")
            mount = state.store.mounts[image.context_mount_id]
        key = layer_key(dockerfile, context, dict(image.build_args), mount)
        force = req.force_build or req.ignore_cache
        record = state.images.get(state.image_keys.get(key, ""))
        if record is None or record.error is not None or force:
            docker_image = None if force else await blocking(state.engine.find_layer, key)
            record = FakeImage(new_id("im"), docker_image or "", key=key)
            state.images[record.image_id] = record
            state.image_keys[key] = record.image_id
            if docker_image:
                record.done.set()
            else:
                asyncio.get_running_loop().create_task(
                    self._build(record, dockerfile, context, dict(image.build_args), mount)
                )
        response = api_pb2.ImageGetOrCreateResponse(image_id=record.image_id)
        if record.done.is_set():
            response.result.CopyFrom(self._image_result(record))
            response.metadata.CopyFrom(self._image_metadata())
        await stream.send_message(response)

    async def _build(
        self,
        record: FakeImage,
        dockerfile: str,
        context: dict[str, bytes],
        args: dict[str, str],
        mount: list[tuple[str, str, int]],
    ) -> None:
        files = [(name, self.state.store.path(sha), mode) for name, sha, mode in mount]
        try:
            built = await blocking(
                self.state.engine.build_layer, record.key, dockerfile, context, args, files
            )
            if built is None:  # another fake on the engine built it while this one waited
                found: str | None = await blocking(self.state.engine.find_layer, record.key)
                record.docker_image = found or ""
            else:
                record.docker_image, record.log = built
                self.state.layers_built += 1
        except LayerBuildError as exc:
            record.error = str(exc)
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
        finally:
            record.done.set()

    @staticmethod
    def _image_result(record: FakeImage) -> api_pb2.GenericResult:
        if record.error is not None:
            return _RESULT(status=_RESULT.GENERIC_STATUS_FAILURE, exception=record.error)
        return _RESULT(status=_RESULT.GENERIC_STATUS_SUCCESS)

    async def ImageJoinStreaming(self, stream: Any) -> None:
        req = await stream.recv_message()
        record = self.state.images.get(req.image_id)
        if record is None:
            raise GRPCError(Status.NOT_FOUND, f"image {req.image_id} not found")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(record.done.wait(), timeout=req.timeout or 55)
        if record.done.is_set():
            await stream.send_message(
                api_pb2.ImageJoinStreamingResponse(
                    result=self._image_result(record), metadata=self._image_metadata(), eof=True
                )
            )

    async def ImageFromId(self, stream: Any) -> None:
        req = await stream.recv_message()
        record = self.state.images.get(req.image_id)
        if record is None or record.error is not None:
            raise GRPCError(Status.NOT_FOUND, f"image {req.image_id} not found")
        await stream.send_message(
            api_pb2.ImageFromIdResponse(image_id=record.image_id, metadata=self._image_metadata())
        )

    # --- sandboxes: create -------------------------------------------------------------------
    def _environment_of(self, definition: api_pb2.Sandbox, sources: Any) -> dict[str, str]:
        env: dict[str, str] = dict(definition.environment_variables.contents)
        for secret_id in definition.secret_ids:
            env.update(self._secret(secret_id))
        for source in sources:
            env.update(self._secret(source.secret_id) if source.secret_id else source.env.contents)
        return env

    def _secret(self, secret_id: str) -> dict[str, str]:
        if secret_id not in self.state.secrets:
            raise GRPCError(Status.NOT_FOUND, f"secret {secret_id} not found")
        return self.state.secrets[secret_id]

    async def _create(
        self, app_id: str, definition: api_pb2.Sandbox, tags: Any, sources: Any, version: int
    ) -> FakeSandbox:
        state = self.state
        if app_id not in state.apps:
            raise GRPCError(Status.NOT_FOUND, f"app {app_id} not found")
        for what, present in {
            "network file systems": bool(definition.nfs_mounts),
            "cloud bucket mounts": bool(definition.cloud_bucket_mounts),
            "mounts (Image.add_local_* without copy=True)": bool(definition.mount_ids),
        }.items():
            if present:
                raise GRPCError(Status.UNIMPLEMENTED, f"the fake does not give sandboxes {what}")
        image = state.images.get(definition.image_id)
        if image is None or image.error is not None or not image.docker_image:
            raise GRPCError(Status.NOT_FOUND, f"image {definition.image_id!r} not found")
        if definition.name and any(
            s.name == definition.name and s.app_id == app_id and not s.finished.is_set()
            for s in state.sandboxes.values()
        ):
            raise GRPCError(Status.ALREADY_EXISTS, f"a sandbox named {definition.name!r} is already running")
        volumes: dict[str, tuple[str, bool]] = {}
        for mount in definition.volume_mounts:
            volume = state.volumes.get(mount.volume_id)
            if volume is None:
                raise GRPCError(Status.NOT_FOUND, f"volume {mount.volume_id} not found")
            volumes[volume.docker_volume] = (mount.mount_path, mount.read_only)
        env = self._environment_of(definition, sources)
        gpu_config = definition.resources.gpu_config
        gpu = None
        if gpu_config.gpu_type:
            gpu = gpu_config.gpu_type + (f":{gpu_config.count}" if gpu_config.count > 1 else "")
        sandbox_id = new_id("sb", 22 if version == 1 else 24)
        task_id = new_id("ta", 22, last="V" if version == 2 else "1")
        tunnels = [
            api_pb2.TunnelData(
                host="127.0.0.1",
                port=spec.port,
                container_port=spec.port,
                unencrypted_host="127.0.0.1" if spec.unencrypted else "",
                unencrypted_port=spec.port if spec.unencrypted else 0,
            )
            for spec in definition.open_ports.ports
        ]
        timeout = definition.timeout_secs or 300
        container_id = await blocking(
            state.engine.run,
            name=f"seer-modal-fake-{sandbox_id}",
            image=image.docker_image,
            args=list(definition.entrypoint_args),
            timeout=timeout,
            env=env,
            workdir=definition.workdir or None,
            volumes=volumes,
            labels={"seer.modal-fake.sandbox": sandbox_id},
        )
        sandbox = FakeSandbox(
            sandbox_id=sandbox_id,
            task_id=task_id,
            app_id=app_id,
            version=version,
            name=definition.name,
            tags={t.tag_name: t.tag_value for t in tags},
            image_id=image.image_id,
            container_id=container_id,
            created_at=state.created_now(),
            timeout=timeout,
            gpu=gpu,
            tunnels=tunnels,
            env=env,
        )
        state.sandboxes[sandbox_id] = sandbox
        state.tasks[task_id] = sandbox_id
        self._watch(sandbox)
        return sandbox

    def _watch(self, sandbox: FakeSandbox) -> None:
        """A thread waits for the container to end, records the result, and removes it."""
        loop = asyncio.get_running_loop()
        engine = self.state.engine

        def watch() -> None:
            code = engine.wait(sandbox.container_id)
            with contextlib.suppress(RuntimeError):  # the loop is closed: the fake is shutting down
                loop.call_soon_threadsafe(self.finish, sandbox, code)
            with contextlib.suppress(Exception):
                engine.remove(sandbox.container_id)

        threading.Thread(target=watch, daemon=True, name=f"fake-modal-{sandbox.sandbox_id}").start()

    @staticmethod
    def finish(sandbox: FakeSandbox, code: int | None) -> None:
        """Record how a sandbox ended (once): terminated, timed out, or its entrypoint's status."""
        if sandbox.result is not None:
            return
        if sandbox.terminated:
            result = _RESULT(status=_RESULT.GENERIC_STATUS_TERMINATED)
        elif time.time() >= sandbox.deadline - 1.0:
            result = _RESULT(status=_RESULT.GENERIC_STATUS_TIMEOUT, exception="the sandbox timed out")
        elif code == 0:
            result = _RESULT(status=_RESULT.GENERIC_STATUS_SUCCESS, exitcode=0)
        else:
            code = 137 if code is None else code
            result = _RESULT(
                status=_RESULT.GENERIC_STATUS_FAILURE, exitcode=code, exception=f"exit status {code}"
            )
        sandbox.result = result
        sandbox.finished.set()
        for process in sandbox.execs.values():
            process.stdout.close()
            process.stderr.close()

    def _router_access(self, sandbox: FakeSandbox) -> api_pb2.CommandRouterAccess:
        jwt = fake_jwt({"task_id": sandbox.task_id})
        sandbox.jwts.add(jwt)
        return api_pb2.CommandRouterAccess(url=self.state.router_url, jwt=jwt)

    async def SandboxCreateV2(self, stream: Any) -> None:
        req = await stream.recv_message()
        sandbox = await self._create(req.app_id, req.definition, req.tags, req.secret_sources, version=2)
        await stream.send_message(
            api_pb2.SandboxCreateV2Response(
                sandbox_id=sandbox.sandbox_id,
                task_id=sandbox.task_id,
                tunnels=sandbox.tunnels,
                metadata=sandbox.metadata(),
                command_router_access=self._router_access(sandbox),
            )
        )

    async def SandboxCreate(self, stream: Any) -> None:
        req = await stream.recv_message()
        sandbox = await self._create(req.app_id, req.definition, req.tags, (), version=1)
        await stream.send_message(
            api_pb2.SandboxCreateResponse(sandbox_id=sandbox.sandbox_id, metadata=sandbox.metadata())
        )

    # --- sandboxes: find -------------------------------------------------------------------
    def _sandbox(self, sandbox_id: str) -> FakeSandbox:
        sandbox = self.state.sandboxes.get(sandbox_id)
        if sandbox is None:
            raise GRPCError(Status.NOT_FOUND, f"sandbox {sandbox_id} not found")
        return sandbox

    async def SandboxGetTaskId(self, stream: Any) -> None:
        req = await stream.recv_message()
        sandbox = self._sandbox(req.sandbox_id)
        response = api_pb2.SandboxGetTaskIdResponse(task_id=sandbox.task_id)
        if sandbox.result is not None:
            response.task_result.CopyFrom(sandbox.result)
        await stream.send_message(response)

    SandboxGetTaskIdV2 = SandboxGetTaskId

    async def _send_router_access(self, stream: Any, reply_type: Any) -> None:
        """Answer a request for a task's router URL and a fresh token (by sandbox or task id)."""
        req = await stream.recv_message()
        sandbox_id = getattr(req, "sandbox_id", "")
        sandbox = self._sandbox(sandbox_id) if sandbox_id else self.state.sandbox_for_task(req.task_id)
        if sandbox is None:
            raise GRPCError(Status.NOT_FOUND, f"task {req.task_id} not found")
        access = self._router_access(sandbox)
        await stream.send_message(reply_type(url=access.url, jwt=access.jwt))

    async def TaskGetCommandRouterAccess(self, stream: Any) -> None:
        await self._send_router_access(stream, api_pb2.TaskGetCommandRouterAccessResponse)

    async def SandboxGetCommandRouterAccess(self, stream: Any) -> None:
        await self._send_router_access(stream, api_pb2.SandboxGetCommandRouterAccessResponse)

    async def SandboxWait(self, stream: Any) -> None:
        req = await stream.recv_message()
        sandbox = self._sandbox(req.sandbox_id)
        if req.timeout > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(sandbox.finished.wait(), timeout=req.timeout)
        response = api_pb2.SandboxWaitResponse(metadata=sandbox.metadata())
        if sandbox.result is not None:
            response.result.CopyFrom(sandbox.result)
        await stream.send_message(response)

    SandboxWaitV2 = SandboxWait

    async def SandboxTerminate(self, stream: Any) -> None:
        req = await stream.recv_message()
        sandbox = self._sandbox(req.sandbox_id)
        if not sandbox.finished.is_set():
            sandbox.terminated = True
            await blocking(self.state.engine.remove, sandbox.container_id)
            self.finish(sandbox, None)
        await stream.send_message(api_pb2.SandboxTerminateResponse(existing_result=sandbox.result))

    SandboxTerminateV2 = SandboxTerminate

    async def SandboxGetFromName(self, stream: Any) -> None:
        req = await stream.recv_message()
        app = self.state.app_named(req.app_name, _environment(req.environment_name))
        candidates = sorted(
            (
                s
                for s in self.state.sandboxes.values()
                if app and s.app_id == app.app_id and s.name == req.sandbox_name
            ),
            key=lambda s: s.created_at,
            reverse=True,
        )
        running = [s for s in candidates if not s.finished.is_set()]
        found = running or (candidates if req.include_terminated else [])
        if not found:
            raise GRPCError(
                Status.NOT_FOUND, f"no running sandbox named {req.sandbox_name!r} in app {req.app_name!r}"
            )
        await stream.send_message(
            api_pb2.SandboxGetFromNameResponse(sandbox_id=found[0].sandbox_id, metadata=found[0].metadata())
        )

    SandboxGetFromNameV2 = SandboxGetFromName

    async def SandboxList(self, stream: Any) -> None:
        req = await stream.recv_message()
        wanted = {t.tag_name: t.tag_value for t in req.tags}
        environment = _environment(req.environment_name)
        picked = []
        for sandbox in self.state.sandboxes.values():
            app = self.state.apps[sandbox.app_id]
            if req.app_id and sandbox.app_id != req.app_id:
                continue
            if not req.app_id and app.environment != environment:
                continue
            if sandbox.finished.is_set() and not req.include_finished:
                continue
            if req.before_timestamp and sandbox.created_at >= req.before_timestamp:
                continue
            if any(sandbox.tags.get(k) != v for k, v in wanted.items()):
                continue
            picked.append(sandbox)
        picked.sort(key=lambda s: s.created_at, reverse=True)
        infos = [
            api_pb2.SandboxInfo(
                id=s.sandbox_id,
                created_at=s.created_at,
                app_id=s.app_id,
                name=s.name,
                image_id=s.image_id,
                timeout_secs=s.timeout,
                tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in s.tags.items()],
                tunnels=s.tunnels,
                task_info=api_pb2.TaskInfo(id=s.task_id, sandbox_id=s.sandbox_id, result=s.result),
                metadata=s.metadata(),
            )
            for s in picked[: self.state.list_page]
        ]
        await stream.send_message(api_pb2.SandboxListResponse(sandboxes=infos))

    SandboxListV2 = SandboxList

    async def SandboxTagsSet(self, stream: Any) -> None:
        req = await stream.recv_message()
        self._sandbox(req.sandbox_id).tags = {t.tag_name: t.tag_value for t in req.tags}
        await stream.send_message(empty_pb2.Empty())

    SandboxTagsSetV2 = SandboxTagsSet

    async def SandboxTagsGet(self, stream: Any) -> None:
        req = await stream.recv_message()
        tags = self._sandbox(req.sandbox_id).tags
        await stream.send_message(
            api_pb2.SandboxTagsGetResponse(
                tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in tags.items()]
            )
        )

    SandboxTagsGetV2 = SandboxTagsGet

    async def SandboxGetTunnels(self, stream: Any) -> None:
        req = await stream.recv_message()
        sandbox = self._sandbox(req.sandbox_id)
        await stream.send_message(
            api_pb2.SandboxGetTunnelsResponse(
                result=_RESULT(status=_RESULT.GENERIC_STATUS_SUCCESS), tunnels=sandbox.tunnels
            )
        )

    SandboxGetTunnelsV2 = SandboxGetTunnels
