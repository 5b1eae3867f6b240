"""Core bootstrap on the local provider: secrets, env, files, repos, packages, failure, hooks."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from seer import RepoConfig, Sandbox, SandboxConfig, hookimpl, plugins
from seer.errors import MissingSecretError, SandboxStartError
from seer.providers.base import MachineStatus
from seer.providers.local.provider import LocalProvider, sandbox_dir

pytestmark = pytest.mark.e2e


@pytest.fixture
def sandboxes():
    """Start sandboxes through this; all are terminated at the end."""
    started: list[Sandbox] = []

    def start(config: SandboxConfig, name: str | None = None) -> Sandbox:
        sb = Sandbox(config).start(name=name)
        started.append(sb)
        return sb

    yield start
    for sb in started:
        sb.terminate()


def _running_ids() -> set[str]:
    return {m.id for m in LocalProvider().list() if m.status.alive}


# --- secrets and environment ------------------------------------------------------------------
def test_secrets_reach_the_sandbox_but_are_never_written_in_clear(sandboxes, monkeypatch, seer_home):
    monkeypatch.setenv("SEER_TEST_TOKEN", "s3cr3t-value-123")
    sb = sandboxes(SandboxConfig(secrets=["SEER_TEST_TOKEN"], timeout=300))
    assert sb.exec("echo $SEER_TEST_TOKEN").stdout == "s3cr3t-value-123\n"
    # Not in the sandbox record, nor the provider's metadata, nor any log.
    readable = [p for p in seer_home.rglob("*") if p.is_file() and p.name != "secrets.json"]
    leaks = [p for p in readable if b"s3cr3t-value-123" in p.read_bytes()]
    assert not leaks, f"secret value written to {leaks}"
    secrets_file = sandbox_dir(sb.sandbox_id) / "secrets.json"
    assert secrets_file.stat().st_mode & 0o077 == 0, "secrets file must be private to its owner"
    assert "s3cr3t" not in repr(sb) and "s3cr3t" not in repr(sb.config)


def test_secret_from_dotenv_file(sandboxes, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEER_DOTENV_SECRET", raising=False)
    (tmp_path / ".env").write_text("# comment\nexport SEER_DOTENV_SECRET='from dotenv'\n")
    sb = sandboxes(SandboxConfig(secrets=["SEER_DOTENV_SECRET"], timeout=300))
    assert sb.exec("echo $SEER_DOTENV_SECRET").stdout == "from dotenv\n"


@pytest.mark.unit
def test_missing_secret_fails_before_anything_is_made(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEER_ABSENT_SECRET", raising=False)
    before = {m.id for m in LocalProvider().list()}
    with pytest.raises(MissingSecretError) as err:
        Sandbox(SandboxConfig(secrets=["SEER_ABSENT_SECRET"])).start()
    assert err.value.fields == ["secrets[0]"]
    assert "SEER_ABSENT_SECRET" in str(err.value)
    assert {m.id for m in LocalProvider().list()} == before


def test_client_environment_does_not_leak_into_the_sandbox(sandboxes, monkeypatch):
    monkeypatch.setenv("SEER_CLIENT_ONLY_TOKEN", "not-for-the-sandbox")
    sb = sandboxes(SandboxConfig(env={"VISIBLE": "yes"}, timeout=300))
    env = sb.exec("env").stdout
    assert "VISIBLE=yes" in env
    assert "not-for-the-sandbox" not in env
    assert f"SEER_WORKDIR={sb.workdir}" in env


# --- files and repos -----------------------------------------------------------------------------
def test_local_files_and_dirs_are_copied_in(sandboxes, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("A")
    (tmp_path / "data" / "sub").mkdir()
    (tmp_path / "data" / "sub" / "b.bin").write_bytes(bytes(range(256)))
    (tmp_path / "cfg.json").write_text('{"k": 1}')
    sb = sandboxes(
        SandboxConfig(
            local_files=[(str(tmp_path / "cfg.json"), "conf/config.json")],
            local_dirs=[(str(tmp_path / "data"), "inputs")],
            timeout=300,
        )
    )
    assert sb.read_file("conf/config.json") == '{"k": 1}'
    assert sb.read_file("inputs/a.txt") == "A"
    assert sb.read_bytes("inputs/sub/b.bin") == bytes(range(256))


def _git_repo(path: Path, files: dict[str, str]) -> str:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    run = lambda *a: subprocess.run(["git", "-C", str(path), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "main")
    run("add", "-A")
    run("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-qm", "first")
    return subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_repos_cloned_from_local_path_and_file_url_and_installed(sandboxes, tmp_path):
    tool_commit = _git_repo(
        tmp_path / "seertool",
        {
            "pyproject.toml": '[project]\nname = "seertool"\nversion = "0.1"\n'
            '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n',
            "src/seertool/__init__.py": "ANSWER = 42\n",
        },
    )
    _git_repo(tmp_path / "notes", {"README.md": "notes\n"})
    sb = sandboxes(
        SandboxConfig(
            repos=[
                RepoConfig(url=str(tmp_path / "seertool"), install="echo installed > marker.txt"),
                RepoConfig(url=f"file://{tmp_path / 'notes'}"),
            ],
            timeout=300,
        )
    )
    tool, notes = sb.repo_handles
    assert (tool.name, tool.commit, tool.installed) == ("seertool", tool_commit, True)
    assert sb.read_file(f"{tool.path}/marker.txt") == "installed\n"
    assert sb.read_file("notes/README.md") == "notes\n"
    assert notes.path == sb.machine.resolve("notes")
    # The handles survive attach from elsewhere.
    assert Sandbox.attach(sb.sandbox_id).repo_handles == sb.repo_handles


def test_repo_install_true_makes_it_importable(sandboxes, tmp_path):
    _git_repo(
        tmp_path / "research-code",
        {
            "setup.py": "from setuptools import setup\nsetup(name='seerpkg', version='0.1', "
            "packages=['seerpkg'])\n",
            "seerpkg/__init__.py": "VALUE = 'from the repo'\n",
        },
    )
    sb = sandboxes(
        SandboxConfig(repos=[RepoConfig(url=str(tmp_path / "research-code"), install=True)], timeout=300)
    )
    out = sb.exec_python("import seerpkg; print(seerpkg.VALUE)", check=True, cwd="/")
    assert out.stdout == "from the repo\n"
    probe = subprocess.run([sys.executable, "-c", "import seerpkg"], capture_output=True)
    assert probe.returncode != 0, "the repo was installed into the client's environment"


def test_failure_half_way_tears_down_and_names_the_step(tmp_path):
    (tmp_path / "not-a-repo").mkdir()
    before = _running_ids()
    with pytest.raises(SandboxStartError) as err:
        Sandbox(SandboxConfig(repos=[RepoConfig(url=str(tmp_path / "not-a-repo"))], timeout=300)).start()
    assert err.value.step == "repos"
    assert "not-a-repo" in str(err.value)
    assert err.value.sandbox_id
    assert _running_ids() == before
    info = {m.id: m for m in LocalProvider().list()}.get(err.value.sandbox_id)
    assert info is None or info.status is MachineStatus.TERMINATED


# --- python packages -----------------------------------------------------------------------------
def _make_wheel(dest: Path, name: str, version: str, body: str) -> Path:
    """A minimal pure-Python wheel, made by hand so the test needs no index."""
    whl = dest / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": body,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: seer-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    with zipfile.ZipFile(whl, "w") as zf:
        for path, text in files.items():
            data = text.encode()
            zf.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        zf.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return whl


def test_packages_the_client_has_are_reused_without_an_env_build(sandboxes, seer_home):
    envs_before = set((seer_home / "envs").glob("*")) if (seer_home / "envs").exists() else set()
    sb = sandboxes(SandboxConfig(python_packages=["numpy", "pytest>=7"], timeout=300))
    out = sb.exec_python("import numpy, pytest; print(numpy.__file__)", check=True).stdout
    assert out.startswith(sys.prefix)
    envs_after = set((seer_home / "envs").glob("*")) if (seer_home / "envs").exists() else set()
    assert envs_after == envs_before, "no layer should be built for packages the client has"


def test_pip_in_the_sandbox_never_touches_the_client_env(sandboxes, tmp_path):
    whl = _make_wheel(tmp_path, "seerisolatedpkg", "1.0", "X = 1\n")
    sb = sandboxes(SandboxConfig(timeout=300))
    assert sb.machine.python != sys.executable
    sb.exec(f"pip install --no-index --no-deps {whl}", check=True)
    assert sb.exec_python("import seerisolatedpkg; print(seerisolatedpkg.X)", check=True).stdout == "1\n"
    probe = subprocess.run([sys.executable, "-c", "import seerisolatedpkg"], capture_output=True)
    assert probe.returncode != 0, "pip in the sandbox installed into the client's environment"
    other = sandboxes(SandboxConfig(timeout=300))
    assert not other.exec_python("import seerisolatedpkg").ok, "sandboxes must not share installs"


def test_missing_packages_go_into_a_cached_layer(sandboxes, tmp_path, seer_home):
    whl = _make_wheel(tmp_path, "seeroverlaypkg", "1.0", "WHERE = 'layer'\n")
    config = SandboxConfig(python_packages=[str(whl), "numpy"], timeout=300)

    def layers():
        return {p.parent: p.stat().st_mtime_ns for p in (seer_home / "envs").glob("*/.seer-env-complete")}

    before = layers() if (seer_home / "envs").exists() else {}
    first = sandboxes(config)
    built = {k: v for k, v in layers().items() if k not in before}
    assert len(built) == 1, "one layer for the one missing package"
    assert (
        first.exec_python("import seeroverlaypkg; print(seeroverlaypkg.WHERE)", check=True).stdout
        == "layer\n"
    )
    # numpy came from the client's site-packages, not a second copy.
    numpy_path = first.exec_python("import numpy; print(numpy.__file__)", check=True).stdout.strip()
    assert numpy_path.startswith(sys.prefix)
    (layer,) = built
    assert not list(layer.rglob("numpy/__init__.py"))
    # The client environment was not changed.
    probe = subprocess.run([sys.executable, "-c", "import seeroverlaypkg"], capture_output=True)
    assert probe.returncode != 0
    # A second sandbox with the same package set reuses the layer: nothing built or installed.
    second = sandboxes(config)
    assert layers() == {**before, **built}
    assert not (sandbox_dir(second.sandbox_id) / "logs" / "setup.log").exists()
    assert (
        second.exec_python("import seeroverlaypkg; print(seeroverlaypkg.WHERE)", check=True).stdout
        == "layer\n"
    )


# --- lifecycle hooks -----------------------------------------------------------------------------
class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    @hookimpl
    def seer_sandbox_provisioned(self, sandbox: Any) -> None:
        self.events.append(("provisioned", sandbox.sandbox_id))

    @hookimpl
    def seer_sandbox_started(self, sandbox: Any) -> None:
        self.events.append(("started", sandbox.sandbox_id))

    @hookimpl
    def seer_sandbox_terminating(self, sandbox: Any) -> None:
        self.events.append(("terminating", sandbox.sandbox_id))


def test_lifecycle_hooks_fire_in_order(fresh_plugins):
    recorder = _Recorder()
    plugins.get_plugin_manager().register(recorder, name="recorder")
    sb = Sandbox(SandboxConfig(timeout=300)).start()
    sb.terminate()
    sb.terminate()
    assert recorder.events == [
        ("provisioned", sb.sandbox_id),
        ("started", sb.sandbox_id),
        ("terminating", sb.sandbox_id),
    ]


def test_snapshot_on_terminate_and_restore(sandboxes):
    sb = sandboxes(SandboxConfig(timeout=300))
    sb.write_file("results/run1.json", json.dumps({"loss": 0.5}))
    snap = sb.terminate(save_snapshot=True, snapshot_description="after run 1")
    assert snap is not None and snap.description == "after run 1"
    restored = Sandbox.from_snapshot(snap.to_dict(), SandboxConfig(timeout=300))
    try:
        assert json.loads(restored.read_file("results/run1.json")) == {"loss": 0.5}
        assert restored.sandbox_id != sb.sandbox_id
    finally:
        restored.terminate()
        LocalProvider().delete_snapshot(snap)


def test_core_env_reaches_every_command_and_survives_attach(sandboxes):
    sb = sandboxes(SandboxConfig(env={"FROM_CONFIG": "c"}, timeout=300))
    sb.add_env({"MODEL_ORG_TINY_PATH": "/models/tiny"})
    assert sb.exec("echo $FROM_CONFIG $MODEL_ORG_TINY_PATH").stdout == "c /models/tiny\n"
    assert sb.exec_python("import os; print(os.environ['MODEL_ORG_TINY_PATH'])").stdout == "/models/tiny\n"
    again = Sandbox.attach(sb.sandbox_id)
    again.start_process("echo $MODEL_ORG_TINY_PATH > seen.txt", name="echoer")
    deadline = time.monotonic() + 10
    while again.machine.process_running("echoer") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert again.read_file("seen.txt") == "/models/tiny\n"


@pytest.mark.unit
def test_mode_requirements_join_python_packages_unless_named():
    from seer.sandbox.bootstrap import with_required

    assert with_required(["numpy", "ipykernel>=6"], ["ipykernel", "jupyter_server>=2"]) == [
        "numpy",
        "ipykernel>=6",
        "jupyter_server>=2",
    ]
    assert with_required(["./local/pkg"], ["Jupyter-Server"]) == ["./local/pkg", "Jupyter-Server"]
