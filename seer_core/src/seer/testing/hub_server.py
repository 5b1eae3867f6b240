"""A small Hugging Face Hub-compatible HTTP server for tests, bound to 127.0.0.1.

seer downloads models with ``huggingface_hub``; tests must exercise that real download path without a
network. :class:`HubServer` serves local directories under repo ids and implements exactly the endpoints
``snapshot_download`` and ``hf_hub_download`` of huggingface_hub 2.x call:

* ``GET /api/models/{repo_id}[/revision/{revision}]``: model info (``sha``, ``siblings``); with
  ``?blobs=true`` the siblings carry sizes, blob ids and LFS metadata.
* ``GET /api/models/{repo_id}/tree/{revision}[/{path}]``: the file listing ``snapshot_download`` caches as
  ``trees/<commit>.json`` (``?recursive=true`` lists the whole tree).
* ``HEAD`` / ``GET /{repo_id}/resolve/{revision}/{filename}``: file metadata and content, with ``ETag``
  (git blob sha1, or sha256 for LFS files), ``X-Repo-Commit``, ``X-Linked-Etag`` / ``X-Linked-Size`` for
  LFS files, ``Content-Length``, and ``Range`` requests (206) so interrupted downloads resume.
* Errors carry the ``X-Error-Code`` header huggingface_hub maps to its exceptions: ``RepoNotFound``
  (404 → ``RepositoryNotFoundError``), ``RevisionNotFound`` (404 → ``RevisionNotFoundError``),
  ``EntryNotFound`` (404 → ``RemoteEntryNotFoundError``) and ``GatedRepo`` (401 without a token, 403 with
  a wrong one → ``GatedRepoError``).

As on the real Hub, a gated repo's model info and file listing are public and only its files need the
token (``Authorization: Bearer <token>``).

The server counts the file bytes it sends (:attr:`HubServer.bytes_served`; API responses are not
counted), so a test can assert that a second fetch downloads nothing, and
:meth:`HubServer.interrupt_next_download` cuts one download short to exercise resume.

Pointing huggingface_hub at the server: a *new* process only needs the environment from
:meth:`HubServer.env` (``HF_ENDPOINT`` and ``HF_HUB_OFFLINE=0``). A process that has already imported
huggingface_hub keeps the endpoint and offline flag it read at import time (``constants.ENDPOINT``,
``constants.HUGGINGFACE_CO_URL_TEMPLATE``, ``constants.HF_HUB_OFFLINE``); :meth:`HubServer.activate`
patches those for the duration of a ``with`` block, which is what in-process tests use.

The server is a test kit: it speaks plain HTTP, keeps no state on disk and serves model repos only.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from seer.testing.loopback import LoopbackServer

__all__ = [
    "HubServer",
    "RepoFile",
    "RepoSnapshot",
    "ServedRequest",
    "git_blob_sha1",
    "is_lfs_path",
    "scan_repo",
]

#: Patterns the Hub's default ``.gitattributes`` stores with git-lfs. Such files are addressed by the
#: sha256 of their content (their ``ETag`` and their blob name in the cache); other files by git blob sha1.
LFS_PATTERNS: tuple[str, ...] = (
    "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gguf", "*.gz", "*.h5", "*.joblib",
    "*.lfs", "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet",
    "*.pb", "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "*.tar", "*.tar.*",
    "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*",
)  # fmt: skip

#: Files bigger than this are stored with git-lfs whatever their name (the Hub refuses larger git blobs).
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024

#: Size of a git-lfs pointer file, reported in LFS metadata as ``pointerSize``.
_LFS_POINTER_SIZE = 134

#: A fixed timestamp: the served metadata is deterministic.
_TIMESTAMP = "2024-01-01T00:00:00.000Z"

_CHUNK = 64 * 1024


def git_blob_sha1(data: bytes) -> str:
    """The git object id of ``data`` stored as a blob: what the Hub reports as a regular file's ETag."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def is_lfs_path(path: str, size: int) -> bool:
    """Whether the Hub would store the file at repo path ``path`` (``size`` bytes) with git-lfs."""
    name = path.rsplit("/", 1)[-1]
    return size > LFS_SIZE_THRESHOLD or any(fnmatch.fnmatchcase(name, pattern) for pattern in LFS_PATTERNS)


@dataclass(frozen=True)
class RepoFile:
    """One file of a repo as the Hub describes it.

    ``etag`` is what huggingface_hub names the blob in its cache: the sha256 for LFS files, the git blob
    sha1 otherwise.
    """

    path: str
    local_path: Path
    size: int
    blob_id: str
    sha256: str
    lfs: bool

    @property
    def etag(self) -> str:
        """The ETag the hub answers for this file: the LFS sha256 for an LFS file, else the git blob id."""
        return self.sha256 if self.lfs else self.blob_id

    def tree_entry(self) -> dict[str, Any]:
        """The entry the tree endpoint returns for this file."""
        entry: dict[str, Any] = {"type": "file", "oid": self.blob_id, "size": self.size, "path": self.path}
        if self.lfs:
            entry["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": _LFS_POINTER_SIZE}
        return entry


@dataclass(frozen=True)
class RepoSnapshot:
    """All files of a directory seen as one commit of a Hub repo.

    The commit hash is derived from the file paths and contents only, so the same directory always gets
    the same commit, both here and in :func:`seer.testing.tiny_model.install_in_hub_cache`.
    """

    commit: str
    files: dict[str, RepoFile]

    def directories(self) -> list[str]:
        """Every directory that holds a file, as repo paths."""
        dirs: set[str] = set()
        for path in self.files:
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        return sorted(dirs)


def scan_repo(directory: str | os.PathLike[str]) -> RepoSnapshot:
    """Describe ``directory`` as one commit of a repo: every regular file below it, hidden entries skipped.

    Hidden entries (``.git``, ``.cache``, ...) are skipped because they are tooling state, not repo files.
    """
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"not a directory: {root}")
    files: dict[str, RepoFile] = {}
    for local in sorted(root.rglob("*")):
        rel = local.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or not local.is_file():
            continue
        data = local.read_bytes()
        path = rel.as_posix()
        files[path] = RepoFile(
            path=path,
            local_path=local,
            size=len(data),
            blob_id=git_blob_sha1(data),
            sha256=hashlib.sha256(data).hexdigest(),
            lfs=is_lfs_path(path, len(data)),
        )
    listing = "".join(f"{f.path}\0{f.blob_id}\0{f.size}\n" for f in files.values())
    commit = hashlib.sha1(listing.encode(), usedforsecurity=False).hexdigest()
    return RepoSnapshot(commit=commit, files=files)


@dataclass(frozen=True)
class ServedRequest:
    """One request the server answered, for tests that check what a client asked for."""

    method: str
    path: str
    status: int
    range: str | None
    authorization: bool
    body_bytes: int


@dataclass
class _Repo:
    repo_id: str
    branches: dict[str, RepoSnapshot]
    token: str | None = None
    by_commit: dict[str, RepoSnapshot] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_commit = {snap.commit: snap for snap in self.branches.values()}

    def resolve(self, revision: str) -> RepoSnapshot | None:
        return self.branches.get(revision) or self.by_commit.get(revision)


class _HttpError(Exception):
    def __init__(self, status: int, code: str | None, message: str, commit: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.commit = commit


_REPO = r"(?P<repo>[^/]+(?:/[^/]+)?)"
_API_RE = re.compile(rf"^/api/models/{_REPO}(?:/(?P<kind>revision|tree)/(?P<rev>[^/]+)(?:/(?P<path>.*))?)?$")
_RESOLVE_RE = re.compile(rf"^/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


class HubServer(LoopbackServer):
    """Serve local directories as Hub model repos on ``http://127.0.0.1:<free port>``.

    ``repos`` maps a repo id to a directory (served as branch ``main``) or to a mapping of branch name to
    directory. Every served directory is one commit (see :func:`scan_repo`); a revision is a branch name
    or a commit hash. ``gated`` maps repo ids (which must also be in ``repos``) to the token their files
    require.

    Example::

        with HubServer({"org/name": model_dir}, gated={"org/secret": "tok"}) as hub, hub.activate():
            snapshot_download("org/name", cache_dir=tmp)
            assert hub.bytes_served > 0
    """

    handler_attribute = "hub"
    thread_name = "seer-hub-server"
    what = "HubServer"

    def request_handler(self) -> type[BaseHTTPRequestHandler]:
        """The handler answering each connection (this module's)."""
        return _Handler

    def __init__(
        self,
        repos: Mapping[str, str | os.PathLike[str] | Mapping[str, str | os.PathLike[str]]],
        *,
        gated: Mapping[str, str] | None = None,
    ) -> None:
        gated = dict(gated or {})
        unknown = sorted(set(gated) - set(repos))
        if unknown:
            raise ValueError(f"gated repos must also be served: {unknown}")
        self._repos: dict[str, _Repo] = {}
        for repo_id, source in repos.items():
            if repo_id.count("/") > 1 or not all(repo_id.split("/")):
                raise ValueError(f"invalid repo id {repo_id!r}: expected 'name' or 'org/name'")
            branches = {"main": source} if isinstance(source, (str, os.PathLike)) else dict(source)
            self._repos[repo_id] = _Repo(
                repo_id=repo_id,
                branches={name: scan_repo(path) for name, path in branches.items()},
                token=gated.get(repo_id),
            )
        self._lock = threading.Lock()
        self._bytes_served = 0
        self._requests: list[ServedRequest] = []
        self._interrupts: dict[tuple[str, str], int] = {}

    # -- lifecycle -----------------------------------------------------------------------------------

    # -- what tests look at --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The endpoint to give huggingface_hub (``HF_ENDPOINT`` or ``endpoint=``)."""
        return self.origin

    @property
    def bytes_served(self) -> int:
        """File content bytes sent by the resolve endpoint so far (API responses not counted)."""
        with self._lock:
            return self._bytes_served

    @property
    def requests(self) -> list[ServedRequest]:
        """Every request answered so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def commit(self, repo_id: str, revision: str = "main") -> str:
        """The commit hash the server reports for ``repo_id`` at ``revision``."""
        snapshot = self._repos[repo_id].resolve(revision)
        if snapshot is None:
            raise KeyError(f"{repo_id}@{revision}")
        return snapshot.commit

    def interrupt_next_download(self, repo_id: str, filename: str, after_bytes: int) -> None:
        """Make the next GET of ``filename`` send ``after_bytes`` bytes of its body, then drop the connection.

        huggingface_hub then retries with a ``Range`` header, which shows up in :attr:`requests`.
        """
        with self._lock:
            self._interrupts[(repo_id, filename)] = after_bytes

    def env(self) -> dict[str, str]:
        """Environment variables that point a *new* process's huggingface_hub at this server."""
        return {"HF_ENDPOINT": self.url, "HF_HUB_OFFLINE": "0"}

    @contextlib.contextmanager
    def activate(self) -> Iterator[HubServer]:
        """Point this process's huggingface_hub at the server for the ``with`` block, then restore.

        Sets ``HF_ENDPOINT`` and ``HF_HUB_OFFLINE=0`` in ``os.environ`` (for code that reads them late
        and for subprocesses) and patches the values huggingface_hub read at import time.
        """
        from huggingface_hub import constants

        saved_env = {name: os.environ.get(name) for name in ("HF_ENDPOINT", "HF_HUB_OFFLINE")}
        saved_attrs = {
            name: getattr(constants, name)
            for name in ("ENDPOINT", "HUGGINGFACE_CO_URL_TEMPLATE", "HF_HUB_OFFLINE")
        }
        os.environ.update(self.env())
        constants.ENDPOINT = self.url
        constants.HUGGINGFACE_CO_URL_TEMPLATE = self.url + "/{repo_id}/resolve/{revision}/{filename}"
        constants.HF_HUB_OFFLINE = False
        try:
            yield self
        finally:
            for name, value in saved_attrs.items():
                setattr(constants, name, value)
            for name, env_value in saved_env.items():
                if env_value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = env_value

    # -- request handling (called from handler threads) ----------------------------------------------

    def _record(self, request: ServedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _count_file_bytes(self, n: int) -> None:
        # Counted before the bytes are written, so a client that has read them sees them counted.
        with self._lock:
            self._bytes_served += n

    def _take_interrupt(self, repo_id: str, filename: str) -> int | None:
        with self._lock:
            return self._interrupts.pop((repo_id, filename), None)

    def _repo(self, repo_id: str) -> _Repo:
        repo = self._repos.get(repo_id)
        if repo is None:
            raise _HttpError(404, "RepoNotFound", "Repository not found")
        return repo

    @staticmethod
    def _snapshot(repo: _Repo, revision: str) -> RepoSnapshot:
        snapshot = repo.resolve(revision)
        if snapshot is None:
            raise _HttpError(404, "RevisionNotFound", "Invalid rev id: " + revision)
        return snapshot

    @staticmethod
    def _check_token(repo: _Repo, authorization: str | None) -> None:
        if repo.token is None:
            return
        message = (
            f"Access to model {repo.repo_id} is restricted. You must have access to it and be authenticated."
        )
        if not authorization:
            raise _HttpError(401, "GatedRepo", message)
        if authorization != f"Bearer {repo.token}":
            raise _HttpError(403, "GatedRepo", message)

    def _model_info(self, repo: _Repo, snapshot: RepoSnapshot, blobs: bool) -> dict[str, Any]:
        siblings: list[dict[str, Any]] = []
        for f in snapshot.files.values():
            sibling: dict[str, Any] = {"rfilename": f.path}
            if blobs:
                sibling.update(size=f.size, blobId=f.blob_id)
                if f.lfs:
                    sibling["lfs"] = {"sha256": f.sha256, "size": f.size, "pointerSize": _LFS_POINTER_SIZE}
            siblings.append(sibling)
        author = repo.repo_id.split("/")[0] if "/" in repo.repo_id else None
        return {
            "_id": hashlib.sha1(repo.repo_id.encode(), usedforsecurity=False).hexdigest()[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "author": author,
            "sha": snapshot.commit,
            "lastModified": _TIMESTAMP,
            "createdAt": _TIMESTAMP,
            "private": False,
            "gated": "manual" if repo.token is not None else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "library_name": "transformers",
            "siblings": siblings,
        }

    @staticmethod
    def _tree(snapshot: RepoSnapshot, path: str, recursive: bool) -> list[dict[str, Any]]:
        prefix = path.strip("/")
        if prefix and prefix not in snapshot.directories():
            if prefix in snapshot.files:
                raise _HttpError(400, None, f"{prefix} is a file, not a directory")
            raise _HttpError(404, "EntryNotFound", f"{prefix} does not exist", commit=snapshot.commit)
        base = prefix + "/" if prefix else ""
        entries: list[dict[str, Any]] = []
        for directory in snapshot.directories():
            rest = directory[len(base) :] if directory.startswith(base) else None
            if rest and (recursive or "/" not in rest):
                oid = hashlib.sha1(f"tree {directory}".encode(), usedforsecurity=False).hexdigest()
                entries.append({"type": "directory", "oid": oid, "size": 0, "path": directory})
        for f in snapshot.files.values():
            rest = f.path[len(base) :] if f.path.startswith(base) else None
            if rest and (recursive or "/" not in rest):
                entries.append(f.tree_entry())
        return entries


class _Handler(BaseHTTPRequestHandler):
    """Answers one connection's requests for the :class:`HubServer` set as the class attribute ``hub``."""

    hub: HubServer
    protocol_version = "HTTP/1.1"  # keep-alive, as the Hub; every response carries a Content-Length
    server_version = "seer-hub-server"

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests read :attr:`HubServer.requests` instead."""

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def _dispatch(self, *, head: bool) -> None:
        split = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(split.query).items()}
        status = 500
        body_bytes = 0
        try:
            if match := _API_RE.match(split.path):
                status, body_bytes = self._api(match, query, head=head)
            elif match := _RESOLVE_RE.match(split.path):
                status, body_bytes = self._resolve(match, head=head)
            else:
                raise _HttpError(404, None, "Not found")
        except _HttpError as error:
            status = error.status
            body_bytes = self._send_error(error, head=head)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            self.hub._record(
                ServedRequest(
                    method=self.command,
                    path=self.path,
                    status=status,
                    range=self.headers.get("Range"),
                    authorization=bool(self.headers.get("Authorization")),
                    body_bytes=body_bytes,
                ),
            )

    def _send_error(self, error: _HttpError, *, head: bool) -> int:
        body = json.dumps({"error": error.message}).encode()
        self.send_response(error.status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        if error.code is not None:
            self.send_header("X-Error-Code", error.code)
        self.send_header("X-Error-Message", error.message)
        if error.commit is not None:
            self.send_header("X-Repo-Commit", error.commit)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if head:
            return 0
        self.wfile.write(body)
        return len(body)

    def _api(self, match: re.Match[str], query: dict[str, str], *, head: bool) -> tuple[int, int]:
        hub = self.hub
        repo = hub._repo(unquote(match["repo"]))
        revision = unquote(match["rev"]) if match["rev"] else "main"
        snapshot = hub._snapshot(repo, revision)
        payload: Any
        if match["kind"] == "tree":
            recursive = query.get("recursive", "false").lower() in ("1", "true")
            payload = hub._tree(snapshot, unquote(match["path"] or ""), recursive)
        elif match["path"]:
            raise _HttpError(404, None, "Not found")
        else:
            payload = hub._model_info(repo, snapshot, blobs=query.get("blobs", "").lower() in ("1", "true"))
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if head:
            return 200, 0
        self.wfile.write(body)
        return 200, len(body)

    def _resolve(self, match: re.Match[str], *, head: bool) -> tuple[int, int]:
        hub = self.hub
        repo_id = unquote(match["repo"])
        repo = hub._repo(repo_id)
        snapshot = hub._snapshot(repo, unquote(match["rev"]))
        hub._check_token(repo, self.headers.get("Authorization"))
        filename = unquote(match["path"])
        info = snapshot.files.get(filename)
        if info is None:
            raise _HttpError(404, "EntryNotFound", f"{filename} does not exist", commit=snapshot.commit)

        start, end = 0, info.size - 1
        status = 200
        range_header = self.headers.get("Range")
        if range_header and not head:
            parsed = _parse_range(range_header, info.size)
            if parsed is None:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{info.size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return 416, 0
            start, end = parsed
            status = 206
        length = max(end - start + 1, 0)

        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{info.etag}"')
        self.send_header("X-Repo-Commit", snapshot.commit)
        if info.lfs:
            self.send_header("X-Linked-Etag", f'"{info.sha256}"')
            self.send_header("X-Linked-Size", str(info.size))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{info.size}")
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if head:
            return status, 0

        limit = hub._take_interrupt(repo_id, filename)
        to_send = length if limit is None else min(limit, length)
        sent = 0
        with info.local_path.open("rb") as fh:
            fh.seek(start)
            while sent < to_send:
                chunk = fh.read(min(_CHUNK, to_send - sent))
                if not chunk:
                    break
                hub._count_file_bytes(len(chunk))
                self.wfile.write(chunk)
                sent += len(chunk)
        if limit is not None:
            # Drop the connection mid-body: the client sees a short read and resumes with a Range request.
            self.wfile.flush()
            self.close_connection = True
        return status, sent


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """``(start, end)`` (inclusive) for a single-range ``Range`` header, or ``None`` if unsatisfiable."""
    match = _RANGE_RE.match(header.strip())
    if match is None or size == 0:
        return None
    first, last = match.groups()
    if first == "" and last == "":
        return None
    if first == "":
        suffix = int(last)
        if suffix == 0:
            return None
        return max(size - suffix, 0), size - 1
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start > end:
        return None
    return start, end
