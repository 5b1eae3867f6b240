"""The real huggingface_hub download path, against seer.testing.hub_server on 127.0.0.1.

Every other test runs with ``HF_HUB_OFFLINE=1``; these switch huggingface_hub to the local server with
``HubServer.activate()`` (which patches the endpoint and offline flag huggingface_hub read at import).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from seer.testing.hub_server import HubServer, ServedRequest, git_blob_sha1, is_lfs_path, scan_repo

pytestmark = pytest.mark.e2e

hf = pytest.importorskip("huggingface_hub")
errors = pytest.importorskip("huggingface_hub.errors")
constants = pytest.importorskip("huggingface_hub.constants")

TOKEN = "hf_test_token"
WEIGHTS_SIZE = 200_000


@pytest.fixture(scope="module")
def repo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small repo: a text config, an LFS-tracked weights file and a nested text file."""
    root = tmp_path_factory.mktemp("repo")
    (root / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
    (root / "model.safetensors").write_bytes(bytes(i * 7 % 251 for i in range(WEIGHTS_SIZE)))
    (root / "sub").mkdir()
    (root / "sub" / "notes.txt").write_text("hello\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


@pytest.fixture(scope="module")
def other_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("other")
    (root / "config.json").write_text('{"version": 2}')
    return root


@pytest.fixture
def hub(repo_dir: Path, other_dir: Path) -> Iterator[HubServer]:
    repos = {
        "org/model": repo_dir,
        "org/gated": repo_dir,
        "org/branches": {"main": repo_dir, "v2": other_dir},
        "single": other_dir,
    }
    with HubServer(repos, gated={"org/gated": TOKEN}) as server:
        yield server


@pytest.fixture
def online(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    """huggingface_hub pointed at the server, with no ambient token."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with hub.activate():
        yield hub


def resolve_requests(requests: list[ServedRequest]) -> list[ServedRequest]:
    return [r for r in requests if "/resolve/" in r.path]


def repo_files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


# -- the pieces ------------------------------------------------------------------------------------


@pytest.mark.unit
def test_git_blob_sha1_matches_git() -> None:
    # `git hash-object` of an empty file and of "hello\n".
    assert git_blob_sha1(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert git_blob_sha1(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


@pytest.mark.unit
def test_lfs_rules() -> None:
    assert is_lfs_path("model.safetensors", 10)
    assert is_lfs_path("sub/pytorch_model.bin", 10)
    assert not is_lfs_path("config.json", 10)
    assert is_lfs_path("huge.json", 11 * 1024 * 1024)


@pytest.mark.unit
def test_scan_repo_skips_hidden_and_is_deterministic(repo_dir: Path) -> None:
    first, second = scan_repo(repo_dir), scan_repo(repo_dir)
    assert first.commit == second.commit
    assert len(first.commit) == 40
    assert sorted(first.files) == ["config.json", "model.safetensors", "sub/notes.txt"]
    weights = first.files["model.safetensors"]
    assert weights.lfs
    assert weights.etag == hashlib.sha256((repo_dir / "model.safetensors").read_bytes()).hexdigest()
    assert first.files["config.json"].etag == git_blob_sha1((repo_dir / "config.json").read_bytes())


@pytest.mark.unit
def test_scan_repo_commit_follows_content(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one")
    before = scan_repo(tmp_path).commit
    (tmp_path / "a.txt").write_text("two")
    assert scan_repo(tmp_path).commit != before


@pytest.mark.unit
def test_gated_repo_must_be_served(repo_dir: Path) -> None:
    with pytest.raises(ValueError, match="org/missing"):
        HubServer({"org/model": repo_dir}, gated={"org/missing": "tok"})


def test_server_listens_on_loopback_and_stops_cleanly(repo_dir: Path) -> None:
    server = HubServer({"org/model": repo_dir})
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.url
    with server:
        assert server.url.startswith("http://127.0.0.1:")
        url = server.url
    server.stop()  # a second stop is harmless
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/api/models/org/model", timeout=2)


# -- the raw protocol ------------------------------------------------------------------------------


def test_head_carries_hub_metadata_and_no_body(hub: HubServer, repo_dir: Path) -> None:
    commit = hub.commit("org/model")
    url = f"{hub.url}/org/model/resolve/main/model.safetensors"
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5) as response:
        headers = response.headers
        assert response.read() == b""
    sha256 = hashlib.sha256((repo_dir / "model.safetensors").read_bytes()).hexdigest()
    assert headers["X-Repo-Commit"] == commit
    assert headers["ETag"] == f'"{sha256}"'
    assert headers["X-Linked-Etag"] == f'"{sha256}"'
    assert headers["X-Linked-Size"] == str(WEIGHTS_SIZE)
    assert headers["Content-Length"] == str(WEIGHTS_SIZE)
    assert hub.bytes_served == 0

    url = f"{hub.url}/org/model/resolve/{commit}/config.json"
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5) as response:
        assert response.headers["ETag"] == f'"{git_blob_sha1((repo_dir / "config.json").read_bytes())}"'
        assert "X-Linked-Etag" not in response.headers


@pytest.mark.parametrize(
    ("range_header", "expected"),
    [("bytes=10-19", slice(10, 20)), ("bytes=199990-", slice(199990, None)), ("bytes=-5", slice(-5, None))],
)
def test_range_requests(hub: HubServer, repo_dir: Path, range_header: str, expected: slice) -> None:
    data = (repo_dir / "model.safetensors").read_bytes()
    request = urllib.request.Request(
        f"{hub.url}/org/model/resolve/main/model.safetensors", headers={"Range": range_header}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 206
        body = response.read()
        start = expected.start % len(data)
        assert response.headers["Content-Range"] == f"bytes {start}-{start + len(body) - 1}/{len(data)}"
    assert body == data[expected]
    assert hub.bytes_served == len(body)


def test_unsatisfiable_range(hub: HubServer) -> None:
    request = urllib.request.Request(
        f"{hub.url}/org/model/resolve/main/config.json", headers={"Range": "bytes=100000-"}
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 416


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/api/models/org/nope/revision/main", 404, "RepoNotFound"),
        ("/api/models/org/model/revision/nope", 404, "RevisionNotFound"),
        ("/org/model/resolve/main/nope.txt", 404, "EntryNotFound"),
        ("/org/gated/resolve/main/config.json", 401, "GatedRepo"),
    ],
)
def test_error_codes(hub: HubServer, path: str, status: int, code: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(hub.url + path, timeout=5)
    assert info.value.code == status
    assert info.value.headers["X-Error-Code"] == code


# -- huggingface_hub against the server ------------------------------------------------------------


def test_offline_mode_blocks_the_server_unless_activated(hub: HubServer, tmp_path: Path) -> None:
    """The test session is offline: without activate(), nothing reaches even a local server."""
    assert constants.HF_HUB_OFFLINE
    with pytest.raises(errors.LocalEntryNotFoundError):
        hf.snapshot_download("org/model", cache_dir=tmp_path, endpoint=hub.url)
    assert hub.requests == []


def test_activate_patches_and_restores(hub: HubServer) -> None:
    before = (constants.ENDPOINT, constants.HUGGINGFACE_CO_URL_TEMPLATE, constants.HF_HUB_OFFLINE)
    env_before = (os.environ.get("HF_ENDPOINT"), os.environ.get("HF_HUB_OFFLINE"))
    with hub.activate():
        assert hf.hf_hub_url("org/model", "config.json") == f"{hub.url}/org/model/resolve/main/config.json"
        assert not constants.is_offline_mode()
        assert os.environ["HF_ENDPOINT"] == hub.url
    assert before == (constants.ENDPOINT, constants.HUGGINGFACE_CO_URL_TEMPLATE, constants.HF_HUB_OFFLINE)
    assert (os.environ.get("HF_ENDPOINT"), os.environ.get("HF_HUB_OFFLINE")) == env_before


def test_snapshot_download_then_second_call_downloads_nothing(
    online: HubServer, repo_dir: Path, tmp_path: Path
) -> None:
    path = Path(hf.snapshot_download("org/model", cache_dir=tmp_path))
    expected = repo_files(repo_dir)
    assert repo_files(path) == expected
    assert path.name == online.commit("org/model")
    assert online.bytes_served == sum(len(data) for data in expected.values())

    served, seen = online.bytes_served, len(online.requests)
    again = Path(hf.snapshot_download("org/model", cache_dir=tmp_path))
    assert again == path
    assert online.bytes_served == served
    assert resolve_requests(online.requests[seen:]) == []


def test_download_fills_the_cache_layout(online: HubServer, repo_dir: Path, tmp_path: Path) -> None:
    hf.snapshot_download("org/model", cache_dir=tmp_path)
    storage = tmp_path / "models--org--model"
    commit = online.commit("org/model")
    assert (storage / "refs" / "main").read_text() == commit
    weights_sha256 = hashlib.sha256((repo_dir / "model.safetensors").read_bytes()).hexdigest()
    config_sha1 = git_blob_sha1((repo_dir / "config.json").read_bytes())
    assert {p.name for p in (storage / "blobs").iterdir()} >= {weights_sha256, config_sha1}
    pointer = storage / "snapshots" / commit / "model.safetensors"
    assert pointer.is_symlink()
    assert pointer.resolve() == (storage / "blobs" / weights_sha256).resolve()
    tree = json.loads((storage / "trees" / f"{commit}.json").read_text())
    assert tree["files"]["model.safetensors"]["lfs_sha256"] == weights_sha256


def test_hf_hub_download_by_commit_and_subfolder(online: HubServer, repo_dir: Path, tmp_path: Path) -> None:
    commit = online.commit("org/model")
    path = hf.hf_hub_download("org/model", "notes.txt", subfolder="sub", revision=commit, cache_dir=tmp_path)
    assert Path(path).read_text() == "hello\n"
    assert online.bytes_served == len("hello\n")


def test_branches_and_single_segment_ids(online: HubServer, other_dir: Path, tmp_path: Path) -> None:
    v2 = Path(hf.snapshot_download("org/branches", revision="v2", cache_dir=tmp_path))
    assert (v2 / "config.json").read_text() == '{"version": 2}'
    assert (tmp_path / "models--org--branches" / "refs" / "v2").read_text() == online.commit(
        "org/branches", "v2"
    )
    main = Path(hf.snapshot_download("org/branches", cache_dir=tmp_path))
    assert main != v2 and (main / "model.safetensors").is_file()
    single = Path(hf.snapshot_download("single", cache_dir=tmp_path))
    assert (single / "config.json").read_text() == '{"version": 2}'


def test_api_model_info_and_tree(online: HubServer, repo_dir: Path) -> None:
    api = hf.HfApi(endpoint=online.url)
    info = api.model_info("org/model", files_metadata=True)
    assert info.sha == online.commit("org/model")
    siblings = {s.rfilename: s for s in info.siblings or []}
    assert set(siblings) == {"config.json", "model.safetensors", "sub/notes.txt"}
    assert siblings["model.safetensors"].size == WEIGHTS_SIZE
    assert siblings["model.safetensors"].lfs is not None
    assert siblings["config.json"].lfs is None

    top = {entry.path for entry in api.list_repo_tree("org/model")}
    assert top == {"config.json", "model.safetensors", "sub"}
    everything = {entry.path for entry in api.list_repo_tree("org/model", recursive=True)}
    assert everything == {"config.json", "model.safetensors", "sub", "sub/notes.txt"}
    assert {entry.path for entry in api.list_repo_tree("org/model", path_in_repo="sub")} == {"sub/notes.txt"}


def test_unknown_repo(online: HubServer, tmp_path: Path) -> None:
    with pytest.raises(errors.RepositoryNotFoundError) as info:
        hf.snapshot_download("org/nope", cache_dir=tmp_path)
    assert not isinstance(info.value, errors.GatedRepoError)


def test_unknown_revision(online: HubServer, tmp_path: Path) -> None:
    with pytest.raises(errors.RevisionNotFoundError):
        hf.snapshot_download("org/model", revision="no-such-branch", cache_dir=tmp_path)


def test_unknown_file(online: HubServer, tmp_path: Path) -> None:
    with pytest.raises(errors.EntryNotFoundError):
        hf.hf_hub_download("org/model", "missing.bin", cache_dir=tmp_path)


def test_gated_repo_needs_the_token(online: HubServer, repo_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(errors.GatedRepoError) as info:
        hf.snapshot_download("org/gated", cache_dir=tmp_path, token=False)
    assert info.value.response.status_code == 401
    with pytest.raises(errors.GatedRepoError) as info:
        hf.snapshot_download("org/gated", cache_dir=tmp_path, token="wrong")
    assert info.value.response.status_code == 403
    assert online.bytes_served == 0

    path = Path(hf.snapshot_download("org/gated", cache_dir=tmp_path, token=TOKEN))
    assert repo_files(path) == repo_files(repo_dir)
    assert all(r.authorization for r in resolve_requests(online.requests) if r.status == 200)


def test_interrupted_download_resumes_with_range(
    online: HubServer, repo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # huggingface_hub only keeps whole DOWNLOAD_CHUNK_SIZE chunks (10 MiB) of an interrupted stream: shrink
    # the chunk so that a 200 kB file has something to resume from.
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 16 * 1024)
    online.interrupt_next_download("org/model", "model.safetensors", after_bytes=70_000)

    path = hf.hf_hub_download("org/model", "model.safetensors", cache_dir=tmp_path)

    assert Path(path).read_bytes() == (repo_dir / "model.safetensors").read_bytes()
    gets = [r for r in resolve_requests(online.requests) if r.method == "GET"]
    assert [r.status for r in gets] == [200, 206]
    assert gets[0].body_bytes == 70_000
    resumed_at = int(gets[1].range.removeprefix("bytes=").rstrip("-"))  # type: ignore[union-attr]
    assert 0 < resumed_at <= 70_000
    assert gets[1].body_bytes == WEIGHTS_SIZE - resumed_at
    assert online.bytes_served == 70_000 + WEIGHTS_SIZE - resumed_at


def test_a_new_process_needs_only_the_environment(hub: HubServer, repo_dir: Path, tmp_path: Path) -> None:
    """What a sandbox gets: HF_ENDPOINT in the environment, read by huggingface_hub at import."""
    script = (
        "import sys; from huggingface_hub import snapshot_download; "
        "print(snapshot_download('org/model', cache_dir=sys.argv[1], token=False))"
    )
    env = {**os.environ, **hub.env()}
    env.pop("HF_TOKEN", None)
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip().splitlines()[-1]).name == hub.commit("org/model")
    assert hub.bytes_served == sum(len(data) for data in repo_files(repo_dir).values())
