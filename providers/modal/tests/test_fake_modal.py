"""The real, unmodified modal SDK against the fake control plane, every sandbox a container.

These tests prove the test kit the seer-modal provider will be tested on: each uses the SDK as a
Modal user would and checks what really happened (in the container, on the engine, in the
fake's records).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import secrets
import socket
import threading
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import modal
import pytest
from modal.exception import NotFoundError, SandboxFilesystemNotFoundError, SandboxTimeoutError
from seer_modal.testing import FakeModal

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_leaked_sandboxes")]


@pytest.fixture(scope="module")
def app(fake_modal: FakeModal) -> modal.App:
    return modal.App.lookup(f"seer-fake-{secrets.token_hex(3)}", create_if_missing=True)


@pytest.fixture
def sandboxes() -> Iterator[list[modal.Sandbox]]:
    """Sandboxes a test makes; each is terminated after it, pass or fail."""
    made: list[modal.Sandbox] = []
    yield made
    for sandbox in made:
        with contextlib.suppress(Exception):
            sandbox.terminate()


def run(sandbox: modal.Sandbox, *argv: str) -> tuple[str, str, int]:
    process = sandbox.exec(*argv)
    return process.stdout.read(), process.stderr.read(), process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- apps and images --------------------------------------------------------------------------
def test_app_lookup_gets_or_creates(fake_modal: FakeModal, app: modal.App) -> None:
    again = modal.App.lookup(app.name, create_if_missing=True)
    assert again.app_id == app.app_id
    with pytest.raises(NotFoundError, match="no-such-app"):
        modal.App.lookup("no-such-app")
    assert "AppGetOrCreate" in fake_modal.calls


def _probe_wheel(folder: Path, value: str) -> None:
    """A one-module wheel (pip installs it from the folder, served on 127.0.0.1: no registry)."""
    dist = "seer_modal_probe-0.1.dist-info"
    files = {
        "seer_modal_probe/__init__.py": f"VALUE = {value!r}\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: seer-modal-probe\nVersion: 0.1\n",
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: seer-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    files[f"{dist}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{dist}/RECORD"])
    with zipfile.ZipFile(folder / "seer_modal_probe-0.1-py3-none-any.whl", "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)


@pytest.fixture
def wheel_index(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(URL of a folder holding the probe wheel, the value the wheel carries)."""
    value = secrets.token_hex(6)
    _probe_wheel(tmp_path, value)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", value
    finally:
        server.shutdown()
        server.server_close()


def test_image_layers_are_built_once(
    fake_modal: FakeModal, app: modal.App, wheel_index: tuple[str, str], sandboxes: list[modal.Sandbox]
) -> None:
    index, value = wheel_index
    token = secrets.token_hex(4)

    def definition() -> modal.Image:
        return (
            modal.Image.debian_slim(python_version="3.11")
            .pip_install("seer-modal-probe", extra_options=f"--no-index --find-links {index}")
            .run_commands(f"echo {token} > /probe-token")
        )

    before = fake_modal.layers_built
    image = definition().build(app)
    assert fake_modal.layers_built - before >= 2  # the pip and run_commands layers at least
    assert "ImageJoinStreaming" in fake_modal.calls

    built = fake_modal.layers_built
    joins = fake_modal.call_counts()["ImageJoinStreaming"]
    again = definition().build(app)
    assert again.object_id == image.object_id
    assert fake_modal.layers_built == built, "an identical definition built layers again"
    assert fake_modal.call_counts()["ImageJoinStreaming"] == joins

    sandbox = modal.Sandbox.create(app=app, image=image, timeout=120)
    sandboxes.append(sandbox)
    out, _, code = run(sandbox, "python", "-c", "import seer_modal_probe; print(seer_modal_probe.VALUE)")
    assert (out.strip(), code) == (value, 0)
    assert run(sandbox, "cat", "/probe-token")[0].strip() == token


def test_a_failing_build_step_fails_the_build_with_its_log(app: modal.App) -> None:
    image = modal.Image.debian_slim().run_commands(f"echo broken-{secrets.token_hex(3)} >&2; exit 3")
    with pytest.raises(modal.exception.ImageBuildError, match=r"(?s)non-zero code: 3.*broken-"):
        image.build(app)


def test_a_layer_the_fake_cannot_build_fails_naming_it(app: modal.App) -> None:
    image = modal.Image.debian_slim().dockerfile_commands("COPY --from=example.com/tool:1 /tool /tool")
    with pytest.raises(modal.exception.ImageBuildError, match=r"cannot pull 'example.com/tool:1'"):
        image.build(app)


def test_local_files_copied_into_a_layer_are_uploaded_once(
    fake_modal: FakeModal, app: modal.App, tmp_path: Path, sandboxes: list[modal.Sandbox]
) -> None:
    """``add_local_dir(copy=True)``: the SDK uploads the files (a big one as a blob over HTTP), the
    fake builds the layer from them with their modes; the same files again upload nothing."""
    token = secrets.token_hex(4)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "small.txt").write_text(token)
    (tmp_path / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (tmp_path / "run.sh").chmod(0o755)
    big = secrets.token_bytes(5 * 1024 * 1024)  # over the SDK's 4 MiB: sent as a blob
    (tmp_path / "big.bin").write_bytes(big)

    def definition() -> modal.Image:
        return modal.Image.debian_slim().add_local_dir(tmp_path, "/data", copy=True).run_commands("ls /data")

    before = fake_modal.call_counts()
    image = definition().build(app)
    sent = fake_modal.call_counts()
    assert sent["BlobCreate"] - before["BlobCreate"] == 1
    assert sent["MountPutFile"] - before["MountPutFile"] == 3
    again = definition().build(app)
    assert again.object_id == image.object_id
    after = fake_modal.call_counts()
    assert (after["MountPutFile"], after["BlobCreate"]) == (sent["MountPutFile"], sent["BlobCreate"])

    sandbox = modal.Sandbox.create(app=app, image=image, timeout=120)
    sandboxes.append(sandbox)
    assert run(sandbox, "cat", "/data/sub/small.txt")[0] == token
    assert run(sandbox, "/data/run.sh")[0] == "ran\n"
    out, _, code = run(sandbox, "sha256sum", "/data/big.bin")
    assert code == 0 and out.split()[0] == hashlib.sha256(big).hexdigest()
    assert run(sandbox, "test", "-e", "/Dockerfile")[2] != 0  # the layer's own Dockerfile is not copied


def test_a_file_whose_content_is_not_its_hash_is_refused(fake_modal: FakeModal) -> None:
    store = fake_modal.state.store
    with pytest.raises(ValueError, match="is not"):
        store.put(hashlib.sha256(b"one").hexdigest(), b"two")
    assert not store.has(hashlib.sha256(b"one").hexdigest())


# --- volumes, GPUs, secrets ---------------------------------------------------------------
def test_volume_written_by_one_sandbox_is_read_by_another(
    fake_modal: FakeModal, app: modal.App, sandboxes: list[modal.Sandbox]
) -> None:
    volume = modal.Volume.from_name(f"seer-fake-vol-{secrets.token_hex(3)}", create_if_missing=True)
    writer = modal.Sandbox.create(app=app, volumes={"/data": volume}, timeout=120)
    sandboxes.append(writer)
    assert run(writer, "bash", "-c", "echo shared > /data/note")[2] == 0
    reader = modal.Sandbox.create(app=app, volumes={"/mnt/v": volume}, timeout=120)
    sandboxes.append(reader)
    assert run(reader, "cat", "/mnt/v/note")[0] == "shared\n"


def _container_env(fake: FakeModal, sandbox: modal.Sandbox) -> str:
    record = fake.state.sandboxes[sandbox.object_id]
    return repr(fake.state.engine.client.containers.get(record.container_id).attrs["Config"]["Env"])


def test_gpu_sandbox_takes_the_older_path_and_runs_on_cpu(
    fake_modal: FakeModal, app: modal.App, sandboxes: list[modal.Sandbox]
) -> None:
    value = f"s3cret-{secrets.token_hex(6)}"
    start = len(fake_modal.calls)
    sandbox = modal.Sandbox.create(
        app=app, gpu="A10G", secrets=[modal.Secret.from_dict({"SEER_FAKE_SECRET": value})], timeout=120
    )
    sandboxes.append(sandbox)
    record = fake_modal.state.sandboxes[sandbox.object_id]
    assert (record.version, record.gpu) == (1, "A10G")
    out, _, code = run(sandbox, "bash", "-c", 'echo "$SEER_FAKE_SECRET"; nproc')
    assert code == 0 and out.splitlines()[0] == value
    calls = fake_modal.calls[start:]
    for name in ("SecretGetOrCreate", "SandboxCreate", "SandboxGetTaskId", "TaskGetCommandRouterAccess"):
        assert name in calls
    assert "SandboxCreateV2" not in calls
    # the secret reaches the sandbox's processes only
    assert value not in "".join(fake_modal.state.image_definitions)
    assert value not in _container_env(fake_modal, sandbox)


def test_secrets_reach_the_sandbox_env_only(
    fake_modal: FakeModal, app: modal.App, sandboxes: list[modal.Sandbox]
) -> None:
    value = f"s3cret-{secrets.token_hex(6)}"
    sandbox = modal.Sandbox.create(
        "bash",
        "-c",
        'echo "$SEER_FAKE_SECRET" > /tmp/seen-by-entrypoint; sleep 600',
        app=app,
        secrets=[modal.Secret.from_dict({"SEER_FAKE_SECRET": value})],
        timeout=120,
    )
    sandboxes.append(sandbox)
    assert fake_modal.state.sandboxes[sandbox.object_id].version == 2
    assert run(sandbox, "printenv", "SEER_FAKE_SECRET")[0].strip() == value
    deadline = time.monotonic() + 10
    while run(sandbox, "cat", "/tmp/seen-by-entrypoint")[0].strip() != value:
        assert time.monotonic() < deadline, "the entrypoint never saw the secret"
        time.sleep(0.2)
    assert value not in "".join(fake_modal.state.image_definitions)
    assert value not in _container_env(fake_modal, sandbox)
    assert run(sandbox, "ls", "-a", "/__modal")[0].split() == [".", "..", ".bin"]  # the env file is gone


# --- exec and the filesystem ------------------------------------------------------------
@pytest.fixture(scope="module")
def sandbox(fake_modal: FakeModal, app: modal.App) -> Iterator[modal.Sandbox]:
    """One plain sandbox the exec and filesystem tests share."""
    sandbox = modal.Sandbox.create(app=app, timeout=300)
    yield sandbox
    sandbox.terminate()


def test_exec_output_and_exit_code(sandbox: modal.Sandbox) -> None:
    assert run(sandbox, "bash", "-c", "echo out; echo err >&2; exit 7") == ("out\n", "err\n", 7)
    assert run(sandbox, "no-such-program")[2] != 0


def test_exec_stdin(sandbox: modal.Sandbox) -> None:
    process = sandbox.exec("bash", "-c", "tr a-z A-Z; echo done")
    process.stdin.write(b"hello ")
    process.stdin.write(b"fake modal\n")
    process.stdin.write_eof()
    process.stdin.drain()
    assert process.stdout.read() == "HELLO FAKE MODAL\ndone\n"
    assert process.wait() == 0


def test_exec_streams_output_as_it_comes(sandbox: modal.Sandbox) -> None:
    started = time.monotonic()
    process = sandbox.exec("bash", "-c", "for i in 1 2 3 4; do echo line$i; sleep 0.5; done")
    arrivals = []
    for line in process.stdout:
        arrivals.append((line, time.monotonic() - started))
    assert [line for line, _ in arrivals] == [f"line{i}\n" for i in range(1, 5)]
    assert arrivals[-1][1] - arrivals[0][1] > 1.0, "the lines came all at once, at the end"
    assert process.wait() == 0


def test_exec_timeout_ends_the_command(sandbox: modal.Sandbox) -> None:
    started = time.monotonic()
    process = sandbox.exec("sleep", "60", timeout=2)
    process.wait()
    assert time.monotonic() - started < 20
    assert run(sandbox, "bash", "-c", "pgrep -x sleep || true")[0].strip() == ""


def test_filesystem_write_read_list(sandbox: modal.Sandbox) -> None:
    fs = sandbox.filesystem
    fs.write_text("hello\n", "/tmp/fs-test/a/note.txt")
    fs.write_bytes(bytes(range(256)) * 1000, "/tmp/fs-test/blob.bin")
    assert fs.read_text("/tmp/fs-test/a/note.txt") == "hello\n"
    assert fs.read_bytes("/tmp/fs-test/blob.bin") == bytes(range(256)) * 1000
    assert {entry.name for entry in fs.list_files("/tmp/fs-test")} == {"a", "blob.bin"}
    assert fs.stat("/tmp/fs-test/blob.bin").size == 256_000
    fs.remove("/tmp/fs-test", recursive=True)
    with pytest.raises(SandboxFilesystemNotFoundError):
        fs.read_text("/tmp/fs-test/a/note.txt")
    assert run(sandbox, "cat", "/tmp/fs-test/a/note.txt")[2] != 0


# --- tunnels, names, tags, listing ----------------------------------------------------------
def test_tunnel_reaches_a_server_in_the_sandbox(app: modal.App, sandboxes: list[modal.Sandbox]) -> None:
    port = free_port()
    sandbox = modal.Sandbox.create(
        "python3",
        "-m",
        "http.server",
        str(port),
        "--directory",
        "/etc",
        app=app,
        encrypted_ports=[port],
        timeout=120,
    )
    sandboxes.append(sandbox)
    tunnel = sandbox.tunnels()[port]
    host, tunnel_port = tunnel.tls_socket
    url = f"http://{host}:{tunnel_port}/os-release"  # the fake's tunnels speak plain HTTP
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                body = response.read().decode()
            break
        except OSError:
            assert time.monotonic() < deadline, f"nothing answered at {url}"
            time.sleep(0.2)
    assert "debian" in body.lower()


def test_tags_list_from_id_and_from_name(
    fake_modal: FakeModal, app: modal.App, sandboxes: list[modal.Sandbox]
) -> None:
    suite = secrets.token_hex(4)
    first = modal.Sandbox.create(app=app, name=f"first-{suite}", tags={"suite": suite}, timeout=120)
    second = modal.Sandbox.create(app=app, timeout=120)
    sandboxes.extend([first, second])
    second.set_tags({"suite": suite, "role": "second"})
    assert second.get_tags() == {"suite": suite, "role": "second"}
    fake_modal.state.list_page = 1  # one sandbox a page: the SDK pages by creation time
    try:
        start = len(fake_modal.calls)
        listed = {sb.object_id for sb in modal.Sandbox.list(app_id=app.app_id, tags={"suite": suite})}
        pages = fake_modal.calls[start:].count("SandboxListV2")
    finally:
        fake_modal.state.list_page = 20
    assert listed == {first.object_id, second.object_id}
    assert pages == 3  # two pages of one, then the empty page that ends the listing
    assert {sb.object_id for sb in modal.Sandbox.list(app_id=app.app_id, tags={"role": "second"})} == {
        second.object_id
    }

    found = modal.Sandbox.from_id(first.object_id)
    assert run(found, "echo", "from-id")[0] == "from-id\n"
    named = modal.Sandbox.from_name(app.name, f"first-{suite}")
    assert named.object_id == first.object_id
    with pytest.raises(NotFoundError):
        modal.Sandbox.from_name(app.name, "no-such-sandbox")
    with pytest.raises(modal.exception.AlreadyExistsError):
        sandboxes.append(modal.Sandbox.create(app=app, name=f"first-{suite}", timeout=60))


def test_from_id_of_a_gpu_sandbox_uses_the_older_calls(
    fake_modal: FakeModal, app: modal.App, sandboxes: list[modal.Sandbox]
) -> None:
    sandbox = modal.Sandbox.create(app=app, gpu="H100:2", timeout=120)
    sandboxes.append(sandbox)
    assert fake_modal.state.sandboxes[sandbox.object_id].gpu == "H100:2"
    start = len(fake_modal.calls)
    found = modal.Sandbox.from_id(sandbox.object_id)
    assert run(found, "true")[2] == 0
    assert "SandboxWait" in fake_modal.calls[start:]


# --- lifetime and snapshots ---------------------------------------------------------------
def test_terminate_ends_the_container(fake_modal: FakeModal, app: modal.App) -> None:
    before = len(fake_modal.containers())
    sandbox = modal.Sandbox.create(app=app, timeout=120)
    assert len(fake_modal.containers()) == before + 1
    sandbox.terminate()
    assert len(fake_modal.containers()) == before
    sandbox.wait(raise_on_termination=False)
    assert sandbox.returncode == 137
    sandbox.terminate()  # idempotent


def test_a_sandbox_left_alone_ends_at_its_timeout(fake_modal: FakeModal, app: modal.App) -> None:
    sandbox = modal.Sandbox.create(app=app, timeout=2)
    container_id = fake_modal.state.sandboxes[sandbox.object_id].container_id
    started = time.monotonic()
    with pytest.raises(SandboxTimeoutError):
        sandbox.wait()
    assert time.monotonic() - started < 15
    assert sandbox.returncode == 124
    deadline = time.monotonic() + 10
    while any(c.id == container_id for c in fake_modal.containers()):
        assert time.monotonic() < deadline, "the timed-out container is still there"
        time.sleep(0.2)


def test_entrypoint_exit_status_is_the_result(app: modal.App) -> None:
    sandbox = modal.Sandbox.create("bash", "-c", "exit 3", app=app, timeout=60)
    sandbox.wait()
    assert sandbox.returncode == 3


def test_snapshot_then_a_new_sandbox_from_it(app: modal.App, sandboxes: list[modal.Sandbox]) -> None:
    original = modal.Sandbox.create(app=app, timeout=120)
    sandboxes.append(original)
    original.filesystem.write_text("kept\n", "/root/state.txt")
    image = original.snapshot_filesystem()
    restored = modal.Sandbox.create(app=app, image=image, timeout=120)
    sandboxes.append(restored)
    assert restored.filesystem.read_text("/root/state.txt") == "kept\n"


# --- the fake itself ----------------------------------------------------------------------
def test_an_unimplemented_call_fails_naming_it(fake_modal: FakeModal) -> None:
    with pytest.raises(Exception, match="DictGetOrCreate") as failure:
        modal.Dict.from_name(f"seer-fake-{secrets.token_hex(3)}", create_if_missing=True).put("k", 1)
    assert "does not implement" in str(failure.value)
    assert fake_modal.calls[-1] == "DictGetOrCreate"


def test_a_wrong_token_is_refused(fake_modal: FakeModal) -> None:
    client = modal.Client.from_credentials("ak-wrong", "as-wrong")
    try:
        with pytest.raises(modal.exception.AuthError):
            modal.App.lookup("anything", create_if_missing=True, client=client)
    finally:
        client.close()


def test_rpc_delay_adds_latency(fake_modal: FakeModal, app: modal.App) -> None:
    def lookup_seconds() -> float:
        started = time.monotonic()
        modal.App.lookup(app.name, create_if_missing=True)
        return time.monotonic() - started

    fake_modal.rpc_delay = 0.3
    try:
        slow = lookup_seconds()
    finally:
        fake_modal.rpc_delay = 0.0
    assert slow >= 0.3
    assert lookup_seconds() < slow


def test_fake_env_is_what_an_sdk_client_needs(fake_modal: FakeModal) -> None:
    env = fake_modal.env
    assert env["MODAL_SERVER_URL"] == f"http://127.0.0.1:{fake_modal.port}"
    assert env["MODAL_TOKEN_ID"] and env["MODAL_TOKEN_SECRET"]
    assert env["MODAL_DISABLE_API_PROXY"] == "1"
