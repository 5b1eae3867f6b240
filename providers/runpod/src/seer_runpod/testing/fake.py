"""``FakeRunPod``: RunPod's GraphQL API on 127.0.0.1, each pod a real SSH-able container.

The runpod SDK reads ``RUNPOD_API_BASE_URL`` on every call and POSTs ``{"query": ...}`` to
``<base>/graphql`` with ``Authorization: Bearer <key>``, so pointing that variable here makes the
real, unmodified SDK talk to this server. Queries are parsed, validated and executed by
graphql-core against :data:`seer_runpod.testing.schema.SDL`: any operation, field or argument the
fake does not serve fails validation with an error naming it, and is recorded like every call.

Each pod is a :class:`seer_ssh.testing.SshHost` logged into as root, as RunPod's are, with the
pod's environment in its SSH sessions and the key in its ``PUBLIC_KEY`` authorised. The container
uses host networking, so processes in a pod reach this server at :attr:`FakeRunPod.url`, the
127.0.0.1 address, as a pod's watchdog reaches the real API.

As on RunPod, a deploy call answers at once: the pod is ``RUNNING`` with ``runtime`` null, a
thread of the fake starts its container, and ``runtime`` (with its ``22/tcp`` port) appears once
sshd answers. A client waits for ``runtime`` as it must with the real API; a container start never
holds an HTTP request (the runpod SDK gives each call 30 s).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import string
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from seer_ssh.testing import SshHost, SshHostError, docker_client, engine_problem, free_port, host_image

from seer_runpod.testing.schema import CPU_INSTANCES, DEFAULT_CPU_INSTANCE, GPU_TYPES, SDL, GpuType

#: Label on every container and volume a fake makes; its value is the fake's instance id.
FAKE_LABEL = "seer.runpod-fake"
#: RunPod's answer when no machine has the GPUs asked for.
NO_CAPACITY = (
    "There are no longer any instances available with the requested specifications. "
    "Please refresh and try again."
)
_ID_CHARS = string.ascii_lowercase + string.digits


class GraphQLFailure(Exception):
    """A resolver's refusal; its message becomes the GraphQL error the SDK raises."""


@dataclass(frozen=True)
class Call:
    """One request the fake received.

    ``fields``: the root fields it asked for (``("podTerminate",)``), whatever they were;
    ``caller``: ``"user"`` (the account's key), ``"pod:<id>"`` (a pod's own key) or None (refused);
    ``error``: the first error message, None when it succeeded.
    """

    fields: tuple[str, ...]
    caller: str | None
    error: str | None
    at: float


@dataclass
class Pod:
    """The fake's record of one pod."""

    id: str
    name: str
    image_name: str
    env: dict[str, str]
    gpu: GpuType | None
    gpu_count: int
    cloud_type: str
    instance_id: str | None
    cost_per_hr: float
    ports: str
    volume_in_gb: int
    volume_mount_path: str
    network_volume_id: str | None
    container_disk_in_gb: int
    docker_args: str
    request: dict[str, Any]
    api_key: str
    machine_id: str = field(default_factory=lambda: _new_id(12))
    host_id: str = field(default_factory=lambda: _new_id(8))
    created: float = field(default_factory=time.time)
    desired_status: str = "RUNNING"
    status_changed: float = field(default_factory=time.time)
    running_since: float | None = field(default_factory=time.time)
    ran_seconds: float = 0.0
    host: SshHost | None = None
    terminated_by: str | None = None
    #: the thread starting the pod's container (``runtime`` is null until it has)
    starter: threading.Thread | None = None
    #: why the container did not start (then ``runtime`` stays null, as for a pod whose image
    #: RunPod cannot run); None while it starts or once it has
    start_error: str | None = None

    def uptime(self) -> float:
        return time.time() - self.running_since if self.running_since is not None else 0.0

    def cost_so_far(self) -> float:
        """What the pod has cost: its hourly price times the time it has run."""
        return self.cost_per_hr * (self.ran_seconds + self.uptime()) / 3600


@dataclass
class NetworkVolume:
    id: str
    name: str
    size: int
    data_center_id: str
    docker_volume: str


def _new_id(length: int = 14) -> str:
    return "".join(secrets.choice(_ID_CHARS) for _ in range(length))


def _rented_line(at: float, what: str) -> str:
    """RunPod's ``lastStatusChange`` text: ``"Rented by User: Tue Nov 24 2026 06:36:00 GMT+0000 ..."``."""
    stamp = datetime.fromtimestamp(at, UTC).strftime("%a %b %d %Y %H:%M:%S GMT+0000")
    return f"{what}: {stamp} (Coordinated Universal Time)"


class FakeRunPod:
    """A fake RunPod API server. Start it with ``with FakeRunPod() as fake:`` (or :meth:`start`).

    ``api_key``: the account's key (default: a random one); ``public_key``: the account's SSH
    public key (``myself.pubKey``), given to pods whose env has no ``PUBLIC_KEY``, as RunPod does.
    ``python_packages``: pip requirements every pod's system Python has (its container's image is
    built with them once), as RunPod's pytorch images ship torch.

    What tests read and set: :attr:`calls`, :meth:`operations`, :attr:`errors`, :attr:`pods`,
    :attr:`delay` (seconds each call waits), :attr:`boot_delay` (seconds a new pod's ``runtime``
    stays null, as while RunPod pulls the image, on top of its container's start),
    :meth:`wait_started`, :meth:`host` (a pod's :class:`SshHost`, once started),
    :meth:`add_network_volume`, :meth:`set_stock`, :meth:`containers`.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        public_key: str = "",
        data_center_id: str = "EU-RO-1",
        python_packages: Sequence[str] = (),
    ):
        self.python_packages = tuple(python_packages)
        self.api_key = api_key or f"rpa_{secrets.token_hex(16).upper()}"
        self.public_key = public_key
        self.data_center_id = data_center_id
        self.instance = secrets.token_hex(4)
        self.gpu_types = {gpu.id: GpuType(**vars(gpu)) for gpu in GPU_TYPES}
        self.pods: dict[str, Pod] = {}
        self.network_volumes: dict[str, NetworkVolume] = {}
        self.calls: list[Call] = []
        self.delay = 0.0
        self.boot_delay = 0.0
        #: guards pods, volumes and calls (the server answers from several threads)
        self.lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._schema: Any = None

    # --- lifecycle --------------------------------------------------------------------------
    @staticmethod
    def problem() -> str | None:
        """Why pods cannot be realised here (no Docker engine, no base image), or None."""
        return engine_problem()

    @property
    def url(self) -> str:
        """The API's base URL (what ``RUNPOD_API_BASE_URL`` is set to); it serves ``/graphql``."""
        assert self._server is not None, "the fake is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def env(self) -> dict[str, str]:
        """What a client process needs: the API's URL and the account's key."""
        return {"RUNPOD_API_BASE_URL": self.url, "RUNPOD_API_KEY": self.api_key}

    def start(self) -> FakeRunPod:
        """Serve the API. The pods' image is found (or built) first: a pod's container starts after
        its deploy call has answered, so a build failure here is a clear error, not pods whose
        ``runtime`` stays null."""
        from graphql import build_schema

        host_image(python_packages=self.python_packages)
        self._schema = build_schema(SDL)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                fake.handle_request(self)

            def do_GET(self) -> None:
                fake.handle_request(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True, name="fake-runpod").start()
        return self

    def close(self) -> None:
        """Stop serving and remove every container and volume the fake made (waiting for the
        containers still starting, so none is left behind)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self.lock:
            pods = list(self.pods.values())
        for pod in pods:
            self._end(pod)
        with contextlib.closing(docker_client()) as client:
            for volume in client.volumes.list(filters={"label": f"{FAKE_LABEL}={self.instance}"}):
                with contextlib.suppress(Exception):
                    volume.remove(force=True)

    def __enter__(self) -> FakeRunPod:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def activate(self) -> Iterator[FakeRunPod]:
        """Point this process's runpod SDK at the fake (``RUNPOD_API_BASE_URL``, ``RUNPOD_API_KEY``
        and ``runpod.api_key``), and restore what was there after."""
        import runpod

        saved = {key: os.environ.get(key) for key in self.env}
        saved_key = runpod.api_key
        os.environ.update(self.env)
        runpod.api_key = self.api_key
        try:
            yield self
        finally:
            runpod.api_key = saved_key
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    # --- what tests read and set ----------------------------------------------------------
    def operations(self) -> list[str]:
        """The root field of every call, in order (``["gpuTypes", "podFindAndDeployOnDemand"]``)."""
        with self.lock:
            return [name for call in self.calls for name in call.fields]

    @property
    def errors(self) -> list[Call]:
        """The calls that failed (refused, invalid or unknown)."""
        with self.lock:
            return [call for call in self.calls if call.error is not None]

    def wait_started(self, pod_id: str, timeout: float = 600) -> Pod:
        """The pod, once the thread starting its container has ended (started, failed, or the
        pod terminated meanwhile); :class:`TimeoutError` after ``timeout`` seconds."""
        pod = self.pods[pod_id]
        if pod.starter is not None:
            pod.starter.join(timeout)
            if pod.starter.is_alive():
                raise TimeoutError(f"pod {pod_id}'s container did not start in {timeout:g} s")
        return pod

    def host(self, pod_id: str) -> SshHost:
        """The SSH host realising a live pod (waiting for its container to start)."""
        pod = self.wait_started(pod_id)
        if pod.host is None:
            why = pod.start_error or "terminated"
            raise KeyError(f"pod {pod_id} has no container ({why})")
        return pod.host

    def set_stock(self, gpu_type_id: str, count: int) -> None:
        """How many GPUs of a type pods may hold at once (0: unavailable)."""
        self.gpu_types[gpu_type_id].stock = count

    def add_network_volume(self, name: str, size: int = 50, data_center_id: str | None = None) -> str:
        """A network volume of the account (a Docker named volume, kept across pods); its id."""
        volume_id = _new_id(10)
        docker_volume = f"seer-runpod-fake-{self.instance}-{volume_id}"
        with self.lock:
            self.network_volumes[volume_id] = NetworkVolume(
                volume_id, name, size, data_center_id or self.data_center_id, docker_volume
            )
        return volume_id

    def containers(self) -> list[Any]:
        """This fake's pod containers that still exist on the engine."""
        with contextlib.closing(docker_client()) as client:
            return list(
                client.containers.list(
                    all=True, ignore_removed=True, filters={"label": f"{FAKE_LABEL}={self.instance}"}
                )
            )

    # --- HTTP -------------------------------------------------------------------------------
    def _caller(self, handler: BaseHTTPRequestHandler) -> str | None:
        auth = handler.headers.get("Authorization", "")
        key = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        key = key or parse_qs(urlsplit(handler.path).query).get("api_key", [""])[0]
        if not key:
            return None
        if secrets.compare_digest(key, self.api_key):
            return "user"
        with self.lock:
            for pod in self.pods.values():
                if pod.terminated_by is None and secrets.compare_digest(key, pod.api_key):
                    return f"pod:{pod.id}"
        return None

    def handle_request(self, handler: BaseHTTPRequestHandler) -> None:
        if self.delay:
            time.sleep(self.delay)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        path = urlsplit(handler.path).path
        if handler.command != "POST" or path.rstrip("/") != "/graphql":
            self._reply(handler, 404, f"{handler.command} {path}: the fake serves only POST /graphql", None)
            return
        try:
            body = json.loads(raw or b"{}")
            query = body["query"]
        except (ValueError, KeyError, TypeError):
            self._reply(handler, 400, "the body is not JSON with a 'query'", None, ("<unparsable>",))
            return
        fields = self._root_fields(query, body.get("operationName"))
        caller = self._caller(handler)
        if caller is None:
            self._reply(handler, 401, "Unauthorized: a missing or unknown API key", None, fields)
            return
        status, payload = self._execute(query, body, caller)
        error = payload["errors"][0]["message"] if payload.get("errors") else None
        self._record(fields, caller, error)
        self._send(handler, status, payload)

    def _reply(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        message: str,
        caller: str | None,
        fields: tuple[str, ...] | None = None,
    ) -> None:
        self._record(fields or (f"{handler.command} {urlsplit(handler.path).path}",), caller, message)
        self._send(handler, status, {"errors": [{"message": message}]})

    def _record(self, fields: tuple[str, ...], caller: str | None, error: str | None) -> None:
        with self.lock:
            self.calls.append(Call(fields, caller, error, time.time()))

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _root_fields(query: str, operation_name: str | None) -> tuple[str, ...]:
        """The root fields a query asks for, valid or not (what :attr:`calls` records)."""
        from graphql import GraphQLError, OperationDefinitionNode, parse

        try:
            document = parse(query)
        except GraphQLError:
            return ("<unparsable>",)
        names = []
        for node in document.definitions:
            if isinstance(node, OperationDefinitionNode) and (
                operation_name is None or (node.name and node.name.value == operation_name)
            ):
                names += [sel.name.value for sel in node.selection_set.selections if hasattr(sel, "name")]
        return tuple(names)

    def _execute(self, query: str, body: dict[str, Any], caller: str) -> tuple[int, dict[str, Any]]:
        from graphql import execute, parse, validate
        from graphql.error import GraphQLError

        try:
            document = parse(query)
        except GraphQLError as exc:
            return 400, {"errors": [exc.formatted]}
        problems = validate(self._schema, document)
        if problems:
            return 400, {"errors": [p.formatted for p in problems]}
        result = execute(
            self._schema,
            document,
            root_value=_Root(self),
            context_value={"caller": caller},
            variable_values=body.get("variables"),
            operation_name=body.get("operationName"),
        )
        payload: dict[str, Any] = {"data": result.data}  # type: ignore[union-attr]
        if result.errors:  # type: ignore[union-attr]
            payload["errors"] = [e.formatted for e in result.errors]  # type: ignore[union-attr]
        return 200, payload

    # --- pods -------------------------------------------------------------------------------
    def deploy(self, data: dict[str, Any], *, gpu: bool, caller: str) -> Pod:
        """Create and realise a pod from a deploy mutation's ``input``."""
        if caller != "user":
            raise GraphQLFailure("a pod's API key cannot deploy pods")
        env = {item["key"]: item.get("value") or "" for item in data.get("env") or []}
        cloud_type = data.get("cloudType") or "ALL"
        gpu_type: GpuType | None = None
        count = 0
        if gpu:
            gpu_type = self.gpu_types.get(data.get("gpuTypeId") or "")
            if gpu_type is None:
                raise GraphQLFailure(f"no GPU type {data.get('gpuTypeId')!r}")
            count = data.get("gpuCount") or 1
            if count > gpu_type.max_gpu_count:
                raise GraphQLFailure(
                    f"gpuCount {count} is over {gpu_type.id}'s maximum {gpu_type.max_gpu_count}"
                )
            price = gpu_type.price(cloud_type)
            if price is None:
                raise GraphQLFailure(f"{gpu_type.id} is not offered in the {cloud_type} cloud")
            cost = round(price * count, 4)
            instance = None
        else:
            instance = data.get("instanceId") or DEFAULT_CPU_INSTANCE
            if instance not in CPU_INSTANCES:
                raise GraphQLFailure(f"no CPU instance {instance!r}; there are {sorted(CPU_INSTANCES)}")
            cost = CPU_INSTANCES[instance]
        volume_id = data.get("networkVolumeId")
        if volume_id is not None:
            volume = self.network_volumes.get(volume_id)
            if volume is None:
                raise GraphQLFailure(f"no network volume {volume_id!r}")
            if data.get("dataCenterId") not in (None, volume.data_center_id):
                raise GraphQLFailure(
                    f"network volume {volume_id} is in {volume.data_center_id}, not {data['dataCenterId']}"
                )
        pod = Pod(
            id=_new_id(),
            name=data.get("name") or "",
            image_name=data.get("imageName") or "",
            env=env,
            gpu=gpu_type,
            gpu_count=count,
            cloud_type=cloud_type,
            instance_id=instance,
            cost_per_hr=cost,
            ports=data.get("ports") or "",
            volume_in_gb=data.get("volumeInGb") or 0,
            volume_mount_path=data.get("volumeMountPath") or "/workspace",
            network_volume_id=volume_id,
            container_disk_in_gb=data.get("containerDiskInGb") or 0,
            docker_args=data.get("dockerArgs") or "",
            request=dict(data),
            api_key=f"rpa_pod_{secrets.token_hex(16)}",
        )
        pod.starter = threading.Thread(target=self._boot, args=(pod,), daemon=True, name=f"pod-{pod.id}")
        with self.lock:  # reserve the GPUs; the container starts after this call has answered
            if gpu_type is not None and self._gpus_in_use(gpu_type.id) + count > gpu_type.stock:
                raise GraphQLFailure(NO_CAPACITY)
            self.pods[pod.id] = pod
            pod.starter.start()
        return pod

    def _boot(self, pod: Pod) -> None:
        """The starter thread: realise the pod; if it was terminated meanwhile, remove what started."""
        try:
            host = self._realise(pod)
        except Exception as exc:
            pod.start_error = str(exc)
            return
        with self.lock:
            ended = pod.terminated_by is not None or self._server is None
            if not ended:
                pod.host = host
        if ended:
            host.stop()

    def _gpus_in_use(self, gpu_type_id: str) -> int:
        return sum(
            p.gpu_count
            for p in self.pods.values()
            if p.gpu is not None and p.gpu.id == gpu_type_id and p.terminated_by is None
        )

    def _realise(self, pod: Pod) -> SshHost:
        """Start the pod's container: root's SSH sessions get the pod's environment and RunPod's
        own variables, its ``PUBLIC_KEY`` (or the account's key) may log in, its volume mounted."""
        keys = pod.env.get("PUBLIC_KEY") or self.public_key
        labels = {FAKE_LABEL: self.instance, f"{FAKE_LABEL}.pod": pod.id}
        volumes = {}
        if pod.network_volume_id is not None:
            volumes[self.network_volumes[pod.network_volume_id].docker_volume] = pod.volume_mount_path
        elif pod.volume_in_gb:
            volumes[f"seer-runpod-fake-{self.instance}-{pod.id}"] = pod.volume_mount_path
        self._ensure_volumes(volumes)
        last: Exception | None = None
        for _ in range(3):  # the chosen port can be taken before sshd binds it
            port = free_port()
            env = {
                **pod.env,
                "RUNPOD_POD_ID": pod.id,
                "RUNPOD_API_KEY": pod.api_key,
                "RUNPOD_POD_HOSTNAME": f"{pod.id}-{pod.host_id}",
                "RUNPOD_PUBLIC_IP": "127.0.0.1",
                "RUNPOD_TCP_PORT_22": str(port),
                "RUNPOD_GPU_COUNT": str(pod.gpu_count),
                "RUNPOD_DC_ID": self.data_center_id,
            }
            host = SshHost(
                user="root",
                authorized_keys=keys.replace("\\n", "\n").splitlines(),
                env=env,
                volumes=volumes,
                labels=labels,
                name=f"seer-runpod-fake-{pod.id}",
                port=port,
                python_packages=self.python_packages,
            )
            try:
                return host.start()
            except SshHostError as exc:
                last = exc
        raise GraphQLFailure(f"the fake could not start pod {pod.id}'s container: {last}")

    def _ensure_volumes(self, volumes: dict[str, str]) -> None:
        from docker.errors import NotFound

        with contextlib.closing(docker_client()) as client:
            for name in volumes:
                try:
                    client.volumes.get(name)
                except NotFound:
                    client.volumes.create(name, labels={FAKE_LABEL: self.instance})

    def _end(self, pod: Pod) -> None:
        """Wait for the pod's container start, then remove what it made."""
        if pod.starter is not None:
            pod.starter.join()
        self._remove(pod)

    def _remove(self, pod: Pod) -> None:
        """Remove a pod's container, and its own volume (a network volume stays)."""
        with self.lock:
            host, pod.host = pod.host, None
        if host is not None:
            host.stop()
        if pod.volume_in_gb and pod.network_volume_id is None:
            from docker.errors import APIError, NotFound

            with contextlib.closing(docker_client()) as client, contextlib.suppress(NotFound, APIError):
                client.volumes.get(f"seer-runpod-fake-{self.instance}-{pod.id}").remove(force=True)

    def terminate(self, pod_id: str, caller: str) -> None:
        with self.lock:
            pod = self._live_pod(pod_id, caller)
            pod.ran_seconds += pod.uptime()
            pod.running_since = None
            pod.terminated_by = caller
            pod.desired_status = "TERMINATED"
            pod.status_changed = time.time()
        # a container still starting is removed by its starter thread, which sees the pod ended
        self._remove(pod)

    def stop(self, pod_id: str, caller: str) -> Pod:
        host = self._started_host(pod_id, caller)
        with self.lock:
            pod = self._live_pod(pod_id, caller)
            if pod.desired_status == "EXITED":
                return pod
            pod.ran_seconds += pod.uptime()
            pod.running_since = None
            pod.desired_status = "EXITED"
            pod.status_changed = time.time()
        host.halt()
        return pod

    def resume(self, pod_id: str, caller: str) -> Pod:
        host = self._started_host(pod_id, caller)
        with self.lock:
            pod = self._live_pod(pod_id, caller)
            if pod.desired_status == "RUNNING":
                return pod
        host.restart()
        with self.lock:
            pod.desired_status = "RUNNING"
            pod.running_since = pod.status_changed = time.time()
        return pod

    def _started_host(self, pod_id: str, caller: str) -> SshHost:
        """The container of a live pod ``caller`` may act on, once its start has ended."""
        with self.lock:
            pod = self._live_pod(pod_id, caller)
        self.wait_started(pod_id)
        host = pod.host
        if host is None:
            raise GraphQLFailure(f"pod {pod_id} has no container: {pod.start_error or 'terminated'}")
        return host

    def _live_pod(self, pod_id: str, caller: str) -> Pod:
        """The pod ``pod_id`` if ``caller`` may act on it and it is not terminated."""
        if caller not in ("user", f"pod:{pod_id}"):
            raise GraphQLFailure(f"this API key may not act on pod {pod_id}")
        pod = self.pods.get(pod_id)
        if pod is None or pod.terminated_by is not None:
            raise GraphQLFailure(f"pod {pod_id} not found")
        return pod

    def view(self, pod: Pod) -> dict[str, Any]:
        """A pod as the API's ``Pod`` type shows it."""
        booted = time.time() - pod.status_changed >= self.boot_delay
        runtime = None
        host = pod.host
        if pod.desired_status == "RUNNING" and booted and host is not None:
            runtime = {
                "uptimeInSeconds": int(pod.uptime()),
                "ports": self._runtime_ports(pod, host),
                "gpus": [
                    {"id": f"GPU-{i}", "gpuUtilPercent": 0, "memoryUtilPercent": 0}
                    for i in range(pod.gpu_count)
                ],
                "container": {"cpuPercent": 0, "memoryPercent": 0},
            }
        what = {"RUNNING": "Rented by User", "EXITED": "Exited by User"}.get(pod.desired_status, "Terminated")
        return {
            "id": pod.id,
            "name": pod.name,
            "imageName": pod.image_name,
            "env": [f"{key}={value}" for key, value in pod.env.items()],
            "machineId": pod.machine_id,
            "machine": {
                "podHostId": f"{pod.id}-{pod.host_id}",
                "gpuDisplayName": pod.gpu.display_name if pod.gpu else None,
                "gpuTypeId": pod.gpu.id if pod.gpu else None,
            },
            "desiredStatus": pod.desired_status,
            "lastStatusChange": _rented_line(pod.status_changed, what),
            "costPerHr": pod.cost_per_hr,
            "adjustedCostPerHr": pod.cost_per_hr,
            "gpuCount": pod.gpu_count,
            "vcpuCount": 2.0 if pod.gpu is None else 8.0 * pod.gpu_count,
            "memoryInGb": 4.0 if pod.gpu is None else 62.0 * pod.gpu_count,
            "containerDiskInGb": pod.container_disk_in_gb,
            "volumeInGb": float(pod.volume_in_gb),
            "volumeMountPath": pod.volume_mount_path,
            "networkVolumeId": pod.network_volume_id,
            "dockerArgs": pod.docker_args,
            "dockerId": None,
            "podType": "RESERVED" if pod.gpu else "CPU",
            "port": None,
            "ports": pod.ports,
            "uptimeSeconds": int(pod.uptime()),
            "runtime": runtime,
        }

    @staticmethod
    def _runtime_ports(pod: Pod, host: SshHost) -> list[dict[str, Any]]:
        """``runtime.ports``: each port the pod asked for. ``22/tcp`` maps to sshd's public port on
        127.0.0.1; other ports keep their number (host networking), ``http`` ones as RunPod's
        proxy shows them (not public)."""
        mapped = []
        for spec in filter(None, (part.strip() for part in pod.ports.split(","))):
            number, _, kind = spec.partition("/")
            private = int(number)
            public = host.port if (private, kind) == (22, "tcp") else private
            mapped.append(
                {
                    "ip": "127.0.0.1",
                    "isIpPublic": kind == "tcp",
                    "privatePort": private,
                    "publicPort": public,
                    "type": kind or "tcp",
                }
            )
        return mapped


class _Root:
    """The root value: one method per Query and Mutation field, graphql-core calls them."""

    def __init__(self, fake: FakeRunPod):
        self.fake = fake

    @staticmethod
    def _caller(info: Any) -> str:
        return str(info.context["caller"])

    def _user_only(self, info: Any, what: str) -> None:
        if self._caller(info) != "user":
            raise GraphQLFailure(f"a pod's API key cannot read {what}")

    def myself(self, info: Any) -> dict[str, Any]:
        self._user_only(info, "myself")
        fake = self.fake
        with fake.lock:
            live = [p for p in fake.pods.values() if p.terminated_by is None]
            volumes = list(fake.network_volumes.values())
        return {
            "id": "user_fake",
            "email": "researcher@example.org",
            "pubKey": fake.public_key,
            "clientBalance": 100.0,
            "currentSpendPerHr": round(sum(p.cost_per_hr for p in live if p.desired_status == "RUNNING"), 4),
            "pods": [fake.view(p) for p in live],
            "networkVolumes": [
                {"id": v.id, "name": v.name, "size": v.size, "dataCenterId": v.data_center_id}
                for v in volumes
            ],
        }

    def gpuTypes(self, info: Any, input: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        self._user_only(info, "gpuTypes")
        wanted = (input or {}).get("id")
        with self.fake.lock:
            return [self._gpu(g) for g in self.fake.gpu_types.values() if wanted in (None, g.id)]

    def _gpu(self, gpu: GpuType) -> dict[str, Any]:
        free = max(gpu.stock - self.fake._gpus_in_use(gpu.id), 0)

        def lowest_price(info: Any, input: dict[str, Any] | None = None) -> dict[str, Any]:
            secure = (input or {}).get("secureCloud")
            price = gpu.price("ALL" if secure is None else "SECURE" if secure else "COMMUNITY")
            status = "High" if free >= 8 else "Medium" if free >= 3 else "Low" if free >= 1 else None
            return {
                "gpuName": gpu.display_name,
                "gpuTypeId": gpu.id,
                "minimumBidPrice": round(price * 0.6, 3) if price else None,
                "uninterruptablePrice": price,
                "stockStatus": status,
                "maxUnreservedGpuCount": min(free, gpu.max_gpu_count),
                "availableGpuCounts": [n for n in (1, 2, 4, 8) if n <= min(free, gpu.max_gpu_count)],
            }

        return {
            "id": gpu.id,
            "displayName": gpu.display_name,
            "manufacturer": gpu.manufacturer,
            "memoryInGb": gpu.memory_in_gb,
            "cudaCores": 0,
            "maxGpuCount": gpu.max_gpu_count,
            "secureCloud": gpu.secure_price is not None,
            "communityCloud": gpu.community_price is not None,
            "securePrice": gpu.secure_price,
            "communityPrice": gpu.community_price,
            "secureSpotPrice": round(gpu.secure_price * 0.6, 3) if gpu.secure_price else None,
            "communitySpotPrice": round(gpu.community_price * 0.6, 3) if gpu.community_price else None,
            "oneWeekPrice": gpu.price(),
            "oneMonthPrice": gpu.price(),
            "threeMonthPrice": gpu.price(),
            "lowestPrice": lowest_price,
        }

    def pod(self, info: Any, input: dict[str, Any]) -> dict[str, Any] | None:
        pod_id = input["podId"]
        if self._caller(info) not in ("user", f"pod:{pod_id}"):
            raise GraphQLFailure(f"this API key may not read pod {pod_id}")
        pod = self.fake.pods.get(pod_id)
        if pod is None or pod.terminated_by is not None:
            return None
        return self.fake.view(pod)

    def podFindAndDeployOnDemand(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        return self.fake.view(self.fake.deploy(input, gpu=True, caller=self._caller(info)))

    def deployCpuPod(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        return self.fake.view(self.fake.deploy(input, gpu=False, caller=self._caller(info)))

    def podTerminate(self, info: Any, input: dict[str, Any]) -> None:
        self.fake.terminate(input["podId"], self._caller(info))

    def podStop(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        return self.fake.view(self.fake.stop(input["podId"], self._caller(info)))

    def podResume(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        return self.fake.view(self.fake.resume(input["podId"], self._caller(info)))

    def updateUserSettings(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        self._user_only(info, "updateUserSettings")
        if input.get("pubKey") is not None:
            self.fake.public_key = input["pubKey"]
        return self.myself(info)
