"""Local files in images (``Image.add_local_dir(..., copy=True)``): the fake's mounts and blobs.

The SDK sends a folder as a *mount*: it hashes every file, asks which contents the server lacks
(``MountBatchedCheckExistence``), sends each missing one (``MountPutFile``: inline under 4 MiB,
else as a blob it PUTs to the URL ``BlobCreate`` hands out, as to S3), then names the mount's files
(``MountGetOrCreate``). A layer built from it (``COPY . /``, its ``context_mount_id``) has those
files as its build context.

Here contents are kept by sha256 in a folder of the fake's own (:class:`ContentStore`, removed
when the fake closes), and blobs arrive over HTTP at :class:`BlobServer` on 127.0.0.1, which
answers with the content's MD5 as ETag, as S3 does (the SDK checks it). Contents are checked
against the sha256 the SDK names; a wrong one is refused. Every content a fake received stays,
so a later mount with the same files sends nothing (as Modal's store keeps them).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from grpclib import GRPCError, Status
from modal_proto import api_pb2

__all__ = ["BlobServer", "ContentStore", "MountCalls"]

_CHUNK = 1024 * 1024


class ContentStore:
    """File contents by sha256 (and blobs not yet claimed by a file), in a temporary folder."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="seer-modal-fake-store-"))
        (self.root / "blobs").mkdir()
        (self.root / "sha256").mkdir()
        #: mount id -> its files: (path in the image, sha256, mode)
        self.mounts: dict[str, list[tuple[str, str, int]]] = {}
        self._lock = threading.Lock()

    def path(self, sha256_hex: str) -> Path:
        return self.root / "sha256" / sha256_hex

    def has(self, sha256_hex: str) -> bool:
        return self.path(sha256_hex).is_file()

    def blob_path(self, blob_id: str) -> Path:
        if not blob_id.startswith("bl-") or not blob_id[3:].isalnum():
            raise ValueError(f"not a blob id: {blob_id!r}")
        return self.root / "blobs" / blob_id

    def put(self, sha256_hex: str, data: bytes | None = None, blob_id: str | None = None) -> None:
        """Keep ``data`` (or the uploaded blob ``blob_id``) as the content ``sha256_hex``."""
        if data is not None:
            source = self.root / "blobs" / f"in-{secrets.token_hex(8)}"
            source.write_bytes(data)
        elif blob_id is not None:
            source = self.blob_path(blob_id)
            if not source.is_file():
                raise FileNotFoundError(f"blob {blob_id} was never uploaded")
        else:
            raise ValueError("no data and no blob")
        digest = hashlib.sha256()
        with open(source, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
        if digest.hexdigest() != sha256_hex:
            source.unlink(missing_ok=True)
            raise ValueError(f"the content sent is not {sha256_hex} (its sha256 is {digest.hexdigest()})")
        with self._lock:
            os.replace(source, self.path(sha256_hex))

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class BlobServer:
    """S3's part of blob uploads: ``PUT /<blob id>`` on 127.0.0.1 into the store."""

    def __init__(self, store: ContentStore):
        self.store = store
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                try:
                    target = owner.store.blob_path(self.path.lstrip("/"))
                except ValueError as exc:
                    self.send_error(404, str(exc))
                    return
                length = int(self.headers.get("Content-Length") or 0)
                md5 = hashlib.md5()
                with open(target, "wb") as fh:
                    left = length
                    while left:
                        chunk = self.rfile.read(min(_CHUNK, left))
                        if not chunk:
                            break
                        fh.write(chunk)
                        md5.update(chunk)
                        left -= len(chunk)
                if left:
                    target.unlink(missing_ok=True)
                    self.send_error(400, "the upload ended early")
                    return
                self.send_response(200)
                self.send_header("ETag", f'"{md5.hexdigest()}"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, daemon=True, name="fake-modal-blobs"
        )
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


class MountCalls:
    """The mount and blob calls of the control plane (mixed into it; ``self.state`` holds the
    :class:`ContentStore` as ``store`` and the :class:`BlobServer` as ``blobs``)."""

    state: Any

    async def MountBatchedCheckExistence(self, stream: Any) -> None:
        req = await stream.recv_message()
        store: ContentStore = self.state.store
        missing = [h for h in req.sha256_hex_hashes if not store.has(h)]
        await stream.send_message(
            api_pb2.MountBatchedCheckExistenceResponse(missing_sha256_hex_hashes=missing)
        )

    async def BlobCreate(self, stream: Any) -> None:
        await stream.recv_message()
        blob_id = f"bl-{secrets.token_hex(12)}"
        await stream.send_message(
            api_pb2.BlobCreateResponse(
                blob_ids=[blob_id],
                upload_urls=api_pb2.UploadUrlList(items=[f"{self.state.blobs.url}/{blob_id}"]),
            )
        )

    async def MountPutFile(self, stream: Any) -> None:
        from seer_modal.testing.control_plane import blocking

        req = await stream.recv_message()
        store: ContentStore = self.state.store
        which = req.WhichOneof("data_oneof")
        data = req.data if which == "data" else None
        blob_id = req.data_blob_id if which == "data_blob_id" else None
        if data is not None or blob_id is not None:
            try:
                await blocking(store.put, req.sha256_hex, data, blob_id)
            except (ValueError, FileNotFoundError) as exc:
                raise GRPCError(Status.INVALID_ARGUMENT, f"MountPutFile: {exc}") from None
        await stream.send_message(api_pb2.MountPutFileResponse(exists=store.has(req.sha256_hex)))

    async def MountGetOrCreate(self, stream: Any) -> None:
        req = await stream.recv_message()
        store: ContentStore = self.state.store
        if req.deployment_name:
            raise GRPCError(Status.UNIMPLEMENTED, "MountGetOrCreate: the fake has no named (deployed) mounts")
        files = [(f.filename, f.sha256_hex, f.mode) for f in req.files]
        absent = [name for name, sha, _ in files if not store.has(sha)]
        if absent:
            raise GRPCError(
                Status.FAILED_PRECONDITION, f"MountGetOrCreate: contents never sent for {absent[:3]}"
            )
        listing = hashlib.sha256(repr(sorted(files)).encode()).hexdigest()
        mount_id = f"mo-{secrets.token_hex(11)}"
        store.mounts[mount_id] = files
        await stream.send_message(
            api_pb2.MountGetOrCreateResponse(
                mount_id=mount_id,
                handle_metadata=api_pb2.MountHandleMetadata(content_checksum_sha256_hex=listing),
            )
        )
