"""Fetch the configured models into the machine's Hugging Face cache (runs inside the sandbox).

Core runs ``python -m seer.runtime.fetch`` in the sandbox, over ``exec``, with ``HF_HUB_CACHE``
set to the machine's model cache and a JSON spec on stdin::

    {"cache_dir": "/abs/hub/cache",            # default: huggingface_hub's
     "hidden_dir": "/abs/dir",                 # default: <cache_dir>/../seer-hidden
     "max_workers": 4,                         # repos fetched in parallel
     "models": [{"name": "org/x", "revision": "main", "hidden": false, "base_model": null,
                 # hidden models only, made by the client from a secret it keeps (see below):
                 "dir": "m-<hex>", "seal": "<40 hex>", "base_dir": ..., "base_seal": ...}, ...]}

It writes one JSON object per line on stdout: progress events (``start``, ``progress``, ``done``,
``error``, each with the model's ``index`` and ``role``: ``model`` or ``base_model``), then a final
``{"event": "result", "ok": ..., "models": [...]}`` with, per model, ``path``, ``commit`` and
``bytes_downloaded`` (and the same for its ``base``), or an ``error`` with a ``kind``
(``not_found``, ``gated``, ``revision``, ``not_cached``, ``unreachable``, ``denied``,
``not_a_model``, ``local_missing``, ``missing_dependency``, ``error``). The exit code is 0 when
every model is ready, 1 otherwise, 2 for an unreadable spec.

What it does, per repo (a model, or a PEFT adapter's base model):

* a local directory is used as it is;
* otherwise ``huggingface_hub.snapshot_download`` at the pinned revision, of only the files a
  transformers / PEFT load needs, chosen from the repo listing by :func:`select_files`; resuming an
  interrupted download, and not downloading what the cache already holds, is huggingface_hub's.
  With ``HF_HUB_OFFLINE=1`` (or when the Hub cannot be reached) it resolves from the cache;
* bytes downloaded are measured, as what the fetch added to the blob files on disk;
* a *hidden* model (and its base) is not put in the shared cache under its name: it is
  downloaded with ``local_dir=`` into ``<hidden_dir>/<dir>``, resolved by commit hash (so no
  ``refs/`` entry names it), and the repo ids are replaced with ``hidden-model`` in its small text
  files (configs, tokenizer configs). Nothing left on disk lets the agent derive its name: the
  directory name comes from the client (a keyed hash of repo and revision whose key never enters
  the machine), every file is a copy, never a hard link to a shared-cache blob or the user's
  file, huggingface_hub's download metadata (which holds the commit) is removed, and the commit
  kept for reuse (``.cache/seer-commit``) is sealed: XORed with the client's ``seal``.

Several repos are fetched in parallel (threads); jobs for the same repo run one after the other,
so each one's byte count is its own. Imports huggingface_hub only when run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["HIDDEN_PLACEHOLDER", "FetchFailure", "default_hidden_dir", "fetch_all", "main", "select_files"]

#: What a hidden model's repo id is replaced with, on disk and in loaded objects.
HIDDEN_PLACEHOLDER = "hidden-model"

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
#: Small text files a load reads: configs, tokenizer files, chat templates.
_TEXT_PATTERNS = (".json", ".jinja", ".tiktoken", ".model", ".vocab")
_TEXT_PREFIXES = ("vocab", "merges", "spiece", "sentencepiece")
#: ``*.bin`` files that are not weights (trainer state).
_NOT_WEIGHTS = ("training_args", "optimizer", "scheduler", "rng_state", "trainer_state")
#: Files above this size are never rewritten when scrubbing a hidden model's name.
_SCRUB_MAX_BYTES = 64 * 1024 * 1024


# --- choosing files ----------------------------------------------------------------------------
def select_files(paths: Iterable[str]) -> list[str]:
    """The files of a repo listing that loading it with transformers / PEFT needs.

    Only top-level files (subfolders hold other formats: ``onnx/``, ``original/``, ...): configs
    and tokenizer files (``*.json``, ``*.jinja``, ``*.model``, ``*.tiktoken``, ``vocab*``,
    ``merges*``), and the weights: every ``*.safetensors`` with its ``*.safetensors.index.json``,
    or, only when the repo has no safetensors, the ``*.bin`` weights with their index. Never both
    formats; never ONNX, TensorFlow, Flax, GGUF, READMEs or Mistral's ``consolidated.*`` originals.
    """
    top = sorted({p for p in paths if "/" not in p and not p.startswith(".")})
    safetensors = [p for p in top if p.endswith(".safetensors") and not p.startswith("consolidated")]
    bins = [
        p
        for p in top
        if p.endswith(".bin") and not p.startswith(_NOT_WEIGHTS) and not p.startswith("consolidated")
    ]
    weights = safetensors or bins
    fmt = ".safetensors" if safetensors else ".bin"
    chosen = set(weights)
    for p in top:
        if p.endswith(".index.json"):
            if p.endswith(f"{fmt}.index.json"):
                chosen.add(p)
            continue
        lower = p.lower()
        if lower.endswith(_TEXT_PATTERNS) or (
            lower.startswith(_TEXT_PREFIXES) and lower.endswith((".txt", ".json", ".model"))
        ):
            chosen.add(p)
    return sorted(chosen)


def _pattern(path: str) -> str:
    """An fnmatch pattern matching exactly ``path``."""
    return re.sub(r"([*?\[])", r"[\1]", path)


# --- errors ------------------------------------------------------------------------------------
class FetchFailure(Exception):
    """A repo could not be fetched; ``kind`` says why in one word, the message in a sentence."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def _classify(exc: BaseException, revision: str, offline: bool) -> FetchFailure:
    """Turn a huggingface_hub exception into a :class:`FetchFailure` users can act on."""
    if isinstance(exc, FetchFailure):
        return exc
    from huggingface_hub import errors

    if isinstance(exc, errors.GatedRepoError):
        if _has_token():
            return FetchFailure(
                "gated",
                "the repository is gated and the HF_TOKEN given has no access to it; accept its terms on "
                "the Hub with the token's account",
            )
        return FetchFailure(
            "gated",
            "the repository is gated and no token was given; accept its terms on the Hub, then pass a "
            "token with access: secrets=['HF_TOKEN']",
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        hint = "" if _has_token() else "; a private repository also needs secrets=['HF_TOKEN']"
        return FetchFailure("not_found", f"repository not found on the Hub (check the spelling{hint})")
    if isinstance(exc, errors.RevisionNotFoundError):
        return FetchFailure("revision", f"revision {revision!r} not found (no such branch, tag or commit)")
    if isinstance(exc, errors.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            return FetchFailure("denied", f"the Hub refused access (HTTP {status}); check HF_TOKEN")
        return FetchFailure("error", f"the Hub answered with an error: {_first_line(exc)}")
    if isinstance(exc, errors.LocalEntryNotFoundError | errors.OfflineModeIsEnabled):
        if offline:
            return FetchFailure(
                "not_cached",
                f"revision {revision!r} is not in the model cache, and HF_HUB_OFFLINE=1 forbids "
                "downloading it (unset HF_HUB_OFFLINE, or fetch it once online)",
            )
        return FetchFailure(
            "unreachable",
            f"the Hub could not be reached and revision {revision!r} is not in the model cache "
            f"({_first_line(exc)})",
        )
    if _is_connection_error(exc):
        return FetchFailure("unreachable", f"the Hub could not be reached: {_first_line(exc)}")
    return FetchFailure("error", f"{type(exc).__name__}: {_first_line(exc)}")


def _is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` means the Hub could not be reached (not that it answered with an error)."""
    from huggingface_hub import errors

    if isinstance(exc, errors.HfHubHTTPError):
        return False
    if isinstance(exc, OSError):
        return True
    # huggingface_hub's HTTP client (httpx or its fork) raises TransportError subclasses.
    return any(cls.__name__ in ("TransportError", "NetworkError") for cls in type(exc).__mro__)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _has_token() -> bool:
    try:
        from huggingface_hub import get_token

        return bool(get_token())
    except Exception:
        return bool(os.environ.get("HF_TOKEN"))


# --- measuring -----------------------------------------------------------------------------------
def _dir_bytes(root: Path, *, count: Callable[[Path, os.stat_result], bool] | None = None) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath, name)
            try:
                st = path.lstat()
            except OSError:
                continue
            if path.is_symlink() or (count is not None and not count(path, st)):
                continue
            total += st.st_size
    return total


def _local_dir_counts(local_dir: Path) -> Callable[[Path, os.stat_result], bool]:
    meta = local_dir / ".cache"

    def count(path: Path, st: os.stat_result) -> bool:
        if meta in path.parents:  # metadata, except partial downloads (kept there until complete)
            return path.name.endswith(".incomplete")
        # A hard link to a blob of the shared cache added no bytes to the disk.
        return st.st_nlink == 1

    return count


# --- one repo ----------------------------------------------------------------------------------
@dataclass
class Job:
    """One repo at one revision to fetch, for one or more models of the spec."""

    repo: str
    revision: str
    hidden: bool
    #: (model index, role) of every model this job serves; the first gets the progress events
    users: list[tuple[int, str]] = field(default_factory=list)
    #: every repo id (model and base) that must not appear on disk when hidden
    needles: set[str] = field(default_factory=set)
    #: a hidden model configured as a whole model (no ``is_peft``): an adapter here is refused,
    #: as the base model's id in its ``adapter_config.json`` is scrubbed and could not be loaded
    whole_hidden_model: bool = False
    #: a hidden job's directory name and commit seal, from the client
    dir: str | None = None
    seal: str | None = None
    path: str | None = None
    commit: str | None = None
    bytes_downloaded: int = 0
    failure: FetchFailure | None = None

    @property
    def key(self) -> tuple[str, str, bool]:
        return (self.repo, self.revision, self.hidden)

    @property
    def local(self) -> bool:
        return self.repo.startswith("/")


def default_hidden_dir(cache_dir: str) -> str:
    """Where hidden models go: next to the hub cache (``<cache>/../seer-hidden``)."""
    return os.path.join(os.path.dirname(os.path.abspath(cache_dir.rstrip("/"))), "seer-hidden")


_DIR_NAME = re.compile(r"^m-[0-9a-f]{8,64}$")
_SEAL = re.compile(r"^[0-9a-f]{40}$")


def hidden_local_dir(hidden_dir: str, job: Job) -> Path:
    """The anonymised directory a hidden job is fetched into: the one the client named, else a
    random one (never derived from anything on the machine, so the agent cannot recompute it)."""
    root = Path(hidden_dir)
    root.mkdir(parents=True, exist_ok=True)
    name = job.dir if job.dir and _DIR_NAME.match(job.dir) else f"m-{secrets.token_hex(10)}"
    return root / name


def _xor_hex(a: str, b: str) -> str:
    return bytes(x ^ y for x, y in zip(bytes.fromhex(a), bytes.fromhex(b), strict=True)).hex()


def _write_commit(local_dir: Path, commit: str | None, seal: str | None) -> None:
    """Remember which commit ``local_dir`` holds, sealed with the client's ``seal`` (so the agent
    cannot match it against a cache's ``snapshots/``); without a seal, remember nothing."""
    marker = local_dir / ".cache" / "seer-commit"
    if not (commit and _COMMIT.match(commit) and seal and _SEAL.match(seal)):
        marker.unlink(missing_ok=True)
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(_xor_hex(commit, seal))


def _read_commit(local_dir: Path, seal: str | None) -> str | None:
    """The commit :func:`_write_commit` recorded for ``local_dir`` (None: unknown)."""
    marker = local_dir / ".cache" / "seer-commit"
    if not (seal and _SEAL.match(seal)) or not marker.is_file():
        return None
    sealed = marker.read_text().strip()
    return _xor_hex(sealed, seal) if _COMMIT.match(sealed) else None


def _forget_download_metadata(local_dir: Path) -> None:
    """Remove huggingface_hub's bookkeeping in ``local_dir`` (under ``.cache/huggingface``): each
    file's ``.metadata`` and the ``trees/`` listing name the commit, and an LFS file's etag is the
    name of its blob in a shared cache. Its locks and partial downloads stay, for a fetch of the
    same folder running beside this one."""
    meta = local_dir / ".cache" / "huggingface"
    shutil.rmtree(meta / "trees", ignore_errors=True)
    for path in (meta / "download").rglob("*.metadata") if (meta / "download").is_dir() else ():
        path.unlink(missing_ok=True)


class _Fetcher:
    def __init__(self, cache_dir: str, hidden_dir: str, emit: Callable[[dict[str, Any]], None]):
        self.cache_dir = cache_dir
        self.hidden_dir = hidden_dir
        self.emit = emit

    def run(self, job: Job) -> None:
        index, role = job.users[0]
        self.emit({"event": "start", "index": index, "role": role})
        try:
            if job.local:
                self._local(job)
            else:
                self._hub(job)
        except Exception as exc:
            from huggingface_hub import constants

            job.failure = _classify(exc, job.revision, bool(constants.HF_HUB_OFFLINE))
            self.emit({"event": "error", "index": index, "role": role, "kind": job.failure.kind})
            return
        self.emit(
            {
                "event": "done",
                "index": index,
                "role": role,
                "commit": None if job.hidden else job.commit,
                "bytes": job.bytes_downloaded,
            }
        )

    # -- local directories ------------------------------------------------------------------------
    def _local(self, job: Job) -> None:
        src = Path(job.repo)
        if not src.is_dir():
            raise FetchFailure("local_missing", f"local model directory {job.repo!r} does not exist here")
        if not job.hidden:
            job.path = str(src)
            return
        dest = hidden_local_dir(self.hidden_dir, job)
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".tmp-"))
        try:
            for path in sorted(src.rglob("*")):
                rel = path.relative_to(src)
                if any(part.startswith(".") for part in rel.parts):
                    continue
                target = tmp / rel
                if path.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                # A copy, never a hard link: ``find -samefile`` would name the user's file.
                shutil.copyfile(path, target)
            _scrub(tmp, job.needles)
            old = dest.with_name(f".{dest.name}.old-{secrets.token_hex(4)}")
            with contextlib.suppress(FileNotFoundError):
                dest.rename(old)
            try:
                tmp.rename(dest)
            except OSError:
                if not dest.is_dir():  # else a concurrent fetch has just put the same files there
                    raise
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        job.path = str(dest)

    # -- hub repos ------------------------------------------------------------------------------
    def _storage(self, repo: str) -> Path:
        return Path(self.cache_dir, "models--" + repo.replace("/", "--"))

    def _hub(self, job: Job) -> None:
        from huggingface_hub import constants, snapshot_download

        local_dir = hidden_local_dir(self.hidden_dir, job) if job.hidden else None
        commit, listing, source = self._resolve(job, local_dir, offline=bool(constants.HF_HUB_OFFLINE))
        if local_dir is not None and commit is not None and _read_commit(local_dir, job.seal) == commit:
            source = "cache"  # the directory already holds this commit, complete and scrubbed
        files = select_files(listing)
        if not any(f in ("config.json", "adapter_config.json") for f in files):
            raise FetchFailure(
                "not_a_model",
                "the repository has no config.json or adapter_config.json at its top level, so "
                "transformers cannot load it",
            )
        if job.whole_hidden_model and "adapter_config.json" in files and "config.json" not in files:
            raise FetchFailure(
                "not_a_model",
                "the repository is a PEFT adapter (adapter_config.json, no config.json): a hidden "
                "adapter needs is_peft=True and base_model (the model it applies to) in its config, "
                "since the base model's id is scrubbed from its hidden copy",
            )
        storage = self._storage(job.repo)

        def measure() -> int:
            if local_dir is not None:
                return _dir_bytes(local_dir, count=_local_dir_counts(local_dir)) if local_dir.is_dir() else 0
            blobs = storage / "blobs"
            return _dir_bytes(blobs) if blobs.is_dir() else 0

        before = measure()
        stop = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(job, measure, before, stop), daemon=True)
        watcher.start()
        try:
            if source == "shared-cache":
                assert local_dir is not None and commit is not None
                self._copy_from_cache(storage / "snapshots" / commit, files, local_dir, job.revision)
                path = str(local_dir)
            elif source == "cache" and local_dir is not None:
                path = str(local_dir)
            else:
                path = snapshot_download(
                    job.repo,
                    # A hidden repo is fetched by commit hash: a branch name would be recorded under
                    # the repo's name in the cache's refs/.
                    revision=commit if (job.hidden and commit) else job.revision,
                    cache_dir=self.cache_dir,
                    local_dir=str(local_dir) if local_dir is not None else None,
                    allow_patterns=[_pattern(f) for f in files],
                )
        finally:
            stop.set()
            watcher.join()
        job.bytes_downloaded = max(measure() - before, 0)
        job.path = str(path)
        if local_dir is None:
            job.commit = Path(path).name if _COMMIT.match(Path(path).name) else commit
        else:
            job.commit = commit
            _forget_download_metadata(local_dir)
            _scrub(local_dir, job.needles)
            _write_commit(local_dir, commit, job.seal)

    @staticmethod
    def _copy_from_cache(snapshot: Path, files: list[str], local_dir: Path, revision: str) -> None:
        """Copy cached files into a hidden model's directory: copies, never hard links to the
        blobs, which ``find -samefile`` would trace back to the repo's folder in the cache."""
        missing = [f for f in files if not (snapshot / f).is_file()]
        if missing:
            raise _classify(_not_cached(), revision, True)
        local_dir.mkdir(parents=True, exist_ok=True)
        for f in files:
            src = (snapshot / f).resolve()
            dest = local_dir / f
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dest)

    def _resolve(
        self, job: Job, local_dir: Path | None, *, offline: bool
    ) -> tuple[str | None, list[str], str]:
        """The commit ``job.revision`` points to, the repo's file listing, and where they came from:
        ``hub``; or, offline or when the Hub cannot be reached, ``cache`` (the cache entry the fetch
        will use) or ``shared-cache`` (a hidden model not yet in its own directory, but in the
        shared cache under its name)."""
        from huggingface_hub import HfApi, errors

        if not offline:
            try:
                info = HfApi().model_info(job.repo, revision=job.revision)
                return info.sha, [s.rfilename for s in (info.siblings or [])], "hub"
            except errors.OfflineModeIsEnabled:
                pass
            except errors.HfHubHTTPError:
                raise
            except Exception as exc:  # connection refused, timeout, DNS: fall back to the cache
                if not _is_connection_error(exc):
                    raise
        if local_dir is not None:
            commit = _read_commit(local_dir, job.seal)
            if commit and (not _COMMIT.match(job.revision) or commit == job.revision):
                return commit, self._cached_files(job.repo, commit, local_dir), "cache"
            commit, listing = self._shared_cache_listing(job, offline=offline)
            return commit, listing, "shared-cache"
        commit, listing = self._shared_cache_listing(job, offline=offline)
        return commit, listing, "cache"

    def _shared_cache_listing(self, job: Job, *, offline: bool) -> tuple[str, list[str]]:
        storage = self._storage(job.repo)
        commit: str | None = None
        if _COMMIT.match(job.revision):
            commit = job.revision
        else:
            ref = storage / "refs" / job.revision
            commit = ref.read_text().strip() if ref.is_file() else None
        if not commit or not (storage / "snapshots" / commit).is_dir():
            raise _classify(_not_cached(), job.revision, offline)
        return commit, self._cached_files(job.repo, commit, None)

    def _cached_files(self, repo: str, commit: str, local_dir: Path | None) -> list[str]:
        """The repo's listing at ``commit`` from the tree cache, else the files on disk."""
        try:
            from huggingface_hub import get_cached_repo_tree

            tree = get_cached_repo_tree(
                repo,
                revision=commit,
                cache_dir=self.cache_dir,
                local_dir=str(local_dir) if local_dir is not None else None,
            )
            return [f.path for f in tree]
        except Exception:  # no tree listing cached (or an older huggingface_hub)
            base = local_dir if local_dir is not None else self._storage(repo) / "snapshots" / commit
            return [
                p.relative_to(base).as_posix()
                for p in base.rglob("*")
                if (p.is_file() or p.is_symlink()) and ".cache" not in p.relative_to(base).parts
            ]

    def _watch(self, job: Job, measure: Callable[[], int], before: int, stop: threading.Event) -> None:
        index, role = job.users[0]
        last = 0
        while not stop.wait(0.5):
            now = max(measure() - before, 0)
            if now != last:
                last = now
                self.emit({"event": "progress", "index": index, "role": role, "bytes": now})


def _not_cached() -> Exception:
    from huggingface_hub import errors

    return errors.LocalEntryNotFoundError("not in the cache")


def _scrub(root: Path, needles: Iterable[str]) -> None:
    """Replace the repo ids in ``needles`` with :data:`HIDDEN_PLACEHOLDER` in the small text files
    under ``root`` (written anew, never in place: a file may be a hard link to the user's copy).

    An adapter's ``base_model_name_or_path`` is replaced too, whatever base it names. Elsewhere
    only ids with an ``org/`` part (or paths) are replaced: a bare name like ``gpt2`` could be a
    legitimate value in a config (``model_type``)."""
    needles = set(needles)
    adapter_config = root / "adapter_config.json"
    with contextlib.suppress(OSError, ValueError, AttributeError):
        data = json.loads(adapter_config.read_text())
        declared = data.get("base_model_name_or_path")
        if isinstance(declared, str) and declared and declared != HIDDEN_PLACEHOLDER:
            needles.add(declared)
            data["base_model_name_or_path"] = HIDDEN_PLACEHOLDER
            _write_new(adapter_config, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())
    patterns = []
    for needle in sorted(needles, key=len, reverse=True):
        if "/" not in needle:
            continue
        for form in (needle, needle.replace("/", "\\/")):
            patterns.append(form.encode())
    if not patterns:
        return
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            path = Path(dirpath, name)
            if path.is_symlink() or not name.lower().endswith((*_TEXT_PATTERNS, ".txt", ".py", ".md")):
                continue
            try:
                if path.stat().st_size > _SCRUB_MAX_BYTES:
                    continue
                data_bytes = path.read_bytes()
            except OSError:
                continue
            new = data_bytes
            for pat in patterns:
                new = new.replace(pat, HIDDEN_PLACEHOLDER.encode())
            if new != data_bytes:
                _write_new(path, new)


def _write_new(path: Path, data: bytes) -> None:
    """Replace ``path`` with a new file holding ``data`` (atomically; never writing through a hard link)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".scrub-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


# --- the whole spec ----------------------------------------------------------------------------
def _plan(models: Sequence[dict[str, Any]]) -> tuple[list[Job], list[dict[str, Job | None]]]:
    jobs: dict[tuple[str, str, bool], Job] = {}
    per_model: list[dict[str, Job | None]] = []

    def job_for(
        repo: str, revision: str, hidden: bool, index: int, role: str, needles: set[str], keys: dict[str, Any]
    ) -> Job:
        key = (repo, "local" if repo.startswith("/") else revision, hidden)
        job = jobs.get(key)
        if job is None:
            job = jobs[key] = Job(repo=repo, revision=key[1], hidden=hidden)
        if hidden and job.dir is None:
            job.dir, job.seal = keys.get("dir"), keys.get("seal")
        job.users.append((index, role))
        job.whole_hidden_model |= hidden and role == "model" and not keys.get("peft")
        job.needles |= needles
        return job

    for i, m in enumerate(models):
        hidden = bool(m.get("hidden"))
        base = m.get("base_model")
        needles = {m["name"], *([base] if base else [])} if hidden else set()
        own = {"dir": m.get("dir"), "seal": m.get("seal"), "peft": bool(base)}
        base_keys = {"dir": m.get("base_dir"), "seal": m.get("base_seal")}
        entry: dict[str, Job | None] = {
            "model": job_for(m["name"], m.get("revision") or "main", hidden, i, "model", needles, own),
            "base": job_for(base, "main", hidden, i, "base_model", needles, base_keys) if base else None,
        }
        per_model.append(entry)
    return list(jobs.values()), per_model


def fetch_all(spec: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Fetch every model of ``spec`` (see the module docstring); return the result object."""
    from huggingface_hub import constants
    from huggingface_hub.utils import disable_progress_bars
    from huggingface_hub.utils import logging as hf_logging

    disable_progress_bars()
    hf_logging.set_verbosity_error()  # its warnings quote repo ids, hidden ones included
    cache_dir = str(spec.get("cache_dir") or constants.HF_HUB_CACHE)
    hidden_dir = str(spec.get("hidden_dir") or default_hidden_dir(cache_dir))
    models = spec.get("models") or []
    jobs, per_model = _plan(models)
    fetcher = _Fetcher(cache_dir, hidden_dir, emit)
    # Jobs for one repo run in order (non-hidden first: a hidden copy can then come from the
    # cache); different repos run in parallel.
    groups: dict[str, list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.repo, []).append(job)

    def run_group(group: list[Job]) -> None:
        for job in sorted(group, key=lambda j: j.hidden):
            fetcher.run(job)

    workers = max(1, min(int(spec.get("max_workers") or 4), len(groups) or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="seer-fetch") as pool:
        list(pool.map(run_group, groups.values()))

    counted: set[int] = set()
    results = []
    for i, parts in enumerate(per_model):
        out: dict[str, Any] = {"index": i, "ok": True}
        for role, part in (("model", parts["model"]), ("base_model", parts["base"])):
            if part is None:
                continue
            if part.failure is not None:
                out["ok"] = False
                error = {"kind": part.failure.kind, "message": part.failure.message}
                out.setdefault("error", {**error, "role": role, "repo": part.repo})
                continue
            first = id(part) not in counted
            counted.add(id(part))
            out["model" if role == "model" else "base"] = {
                "path": part.path,
                "commit": part.commit,
                # A job serving several models is counted once, on the first.
                "bytes_downloaded": part.bytes_downloaded if first else 0,
                "local": part.local,
            }
        results.append(out)
    return {"event": "result", "ok": all(r["ok"] for r in results), "models": results}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m seer.runtime.fetch``: read the spec on stdin, fetch, print JSON lines."""
    lock = threading.Lock()

    def emit(event: dict[str, Any]) -> None:
        with lock:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()

    try:
        spec = json.loads(sys.stdin.read() or "{}")
        if not isinstance(spec, dict) or not isinstance(spec.get("models", []), list):
            raise ValueError("the spec must be a JSON object with a 'models' list")
    except ValueError as exc:
        emit({"event": "result", "ok": False, "error": f"bad spec: {exc}", "models": []})
        return 2
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        message = (
            "huggingface_hub is not installed in the sandbox; add it to python_packages "
            "(or install seer-core[models] there)"
        )
        failures = [
            {
                "index": i,
                "ok": False,
                "error": {"kind": "missing_dependency", "message": message, "role": "model"},
            }
            for i, m in enumerate(spec.get("models", []))
        ]
        emit({"event": "result", "ok": False, "models": failures})
        return 1
    result = fetch_all(spec, emit)
    emit(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
