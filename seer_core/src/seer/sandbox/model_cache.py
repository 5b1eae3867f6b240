"""Models in a sandbox: fetched once into the machine's cache, then found by name, env var or manifest.

:func:`prepare_models` is the ``models`` step of ``Sandbox.start()``. It runs the in-sandbox
fetcher (:mod:`seer.runtime.fetch`) with ``HF_HUB_CACHE`` set to the provider's
:meth:`~seer.providers.base.Machine.model_cache_dir`, then makes the models findable:

* the manifest ``<workdir>/.seer/models.json`` (its path in ``$SEER_MODELS_MANIFEST``), which the
  notebook kernel and :mod:`seer.runtime.models` read; its format is fixed (see docs/models.md)::

      {"models": [{"var_name": "model", "name": "org/x", "display_name": "org/x",
                   "path": "/abs/dir", "revision": "main", "commit": "<sha>", "hidden": false,
                   "is_peft": false, "base_path": null, "env_var": "MODEL_ORG_X_PATH",
                   "name_hmac": null}]}

* ``MODEL_<ID>_PATH`` for every model that is not hidden (``google/gemma-2-9b`` ->
  ``MODEL_GOOGLE_GEMMA_2_9B_PATH``), and ``HF_HUB_CACHE``, for everything run in the sandbox;
* a symlink ``<workdir>/.seer/models/<org>_<name>`` to each model that is not hidden;
* :class:`ModelHandle` objects, recorded with the sandbox (``Sandbox.model_handles``).

A hidden model's name appears in none of these, and nothing in the sandbox lets the agent derive
it: its manifest entry has ``name: null``, ``display_name: "hidden model"``, no env var, no commit,
and ``name_hmac``, an HMAC of the name keyed with a random per-sandbox *models key* that the client
keeps in its record. Only an interface served over RPC (the user's code, which names the model
itself) is given the key, in a file private to the user that its server deletes once read (never in
a process's environment), so that ``get_model_path(name)`` finds it there;
the kernel and shells find it by its ``var_name``. Its files are copies in a directory whose name
and commit marker are keyed with a secret the client keeps in ``$SEER_HOME`` (see
:mod:`seer.runtime.fetch`). What a provider shows the agent beyond this (a model cache shared with
other sandboxes, the user's files) is the provider's: one whose ``Capabilities.hides_models`` is
false gets a warning at start. The client-side handle keeps the name, but its ``repr`` does not
show it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import posixpath
import secrets
import shlex
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from seer.errors import ConfigProblem, ModelFetchError, SandboxError
from seer.runtime.models import MODELS_KEY_ENV, name_hmac

if TYPE_CHECKING:
    from seer.config import ModelConfig
    from seer.progress import Progress
    from seer.providers.base import Machine

__all__ = [
    "HIDDEN_DISPLAY_NAME",
    "MANIFEST_ENV",
    "MODELS_KEY_ENV",
    "ModelHandle",
    "PreparedModels",
    "manifest_path",
    "models_key",
    "name_hmac",
    "prepare_models",
]

log = logging.getLogger("seer")

#: The environment variable holding the manifest's absolute path in the sandbox.
MANIFEST_ENV = "SEER_MODELS_MANIFEST"
#: What a hidden model is called wherever the agent can look.
HIDDEN_DISPLAY_NAME = "hidden model"


#: The sandbox record's service holding the per-sandbox models key (hex).
_KEY_SERVICE = "models_key"


def models_key(services: Mapping[str, Any]) -> str | None:
    """The sandbox's models key (hex), which a process running the user's own code (an interface
    served over RPC) needs to find a hidden model by its name; None without hidden models. Never
    give it to what the agent runs (the kernel, a shell): with the key, the agent could test names
    against the manifest. Hand it over in a file the process deletes once read, never in its
    environment (``/proc/<pid>/environ`` shows that to every process of the user). ``services``:
    the sandbox's recorded services (``Sandbox.services``)."""
    key = services.get(_KEY_SERVICE)
    return str(key) if key else None


def _client_secret() -> bytes:
    """This client's secret for naming hidden models' directories and sealing their commits,
    made once, private to the user (``$SEER_HOME/hidden-models.key``). It never enters a sandbox:
    the directories keep one name across sandboxes (so a hidden model is fetched once per
    machine) that nothing in the sandbox can recompute."""
    from seer.state import seer_home

    path = seer_home() / "hidden-models.key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(100):
            value = path.read_text().strip()
            if value:
                return bytes.fromhex(value)
            time.sleep(0.02)  # another client is writing it
        raise
    value = secrets.token_hex(32)
    with os.fdopen(fd, "w") as fh:
        fh.write(value)
    return bytes.fromhex(value)


def _hidden_keys(secret: bytes, repo: str, revision: str) -> dict[str, str]:
    """A hidden repo's directory name and commit seal, for the fetcher (see seer.runtime.fetch)."""

    def mac(purpose: str) -> str:
        return hmac.new(secret, f"{purpose}\0{repo}\0{revision}".encode(), hashlib.sha256).hexdigest()

    return {"dir": f"m-{mac('dir')[:20]}", "seal": mac("seal")[:40]}


def manifest_path(workdir: str) -> str:
    """Where the manifest lives in a sandbox whose working directory is ``workdir``."""
    return posixpath.join(workdir, ".seer", "models.json")


@dataclass(frozen=True)
class ModelHandle:
    """A model fetched into a sandbox.

    ``path`` is the directory ``from_pretrained`` loads (for a PEFT adapter: the adapter's, with
    the base model's in ``base_path``). ``commit`` is the resolved Hub commit (None for a local
    directory). ``env_var`` names the ``MODEL_<ID>_PATH`` variable (None when hidden).
    ``bytes_downloaded`` is what this start added to the machine's cache for the model and its
    base (0 when everything was cached). ``dtype`` and ``device`` are the config's (None: seer
    chooses), carried in the manifest to the kernel that loads it.
    """

    name: str
    var_name: str
    revision: str
    commit: str | None
    path: str
    hidden: bool = False
    is_peft: bool = False
    base_model: str | None = None
    base_path: str | None = None
    base_commit: str | None = None
    env_var: str | None = None
    bytes_downloaded: int = 0
    dtype: str | None = None
    device: str | None = None

    @property
    def display_name(self) -> str:
        """The name the agent may see: the repo id, or ``"hidden model"``."""
        return HIDDEN_DISPLAY_NAME if self.hidden else self.name

    def to_dict(self) -> dict[str, Any]:
        """The handle as JSON-able data, as the sandbox's client record keeps it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelHandle:
        """A handle from :meth:`to_dict`'s data (keys a newer seer added are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def manifest_entry(self, key: str | None = None) -> dict[str, Any]:
        """This model's entry in the sandbox's manifest (nothing in it names a hidden model; its
        ``name_hmac`` needs the sandbox's models ``key``, which a hidden model's entry requires)."""
        if self.hidden and not key:
            raise ValueError("a hidden model's manifest entry needs the sandbox's models key")
        return {
            "var_name": self.var_name,
            "name": None if self.hidden else self.name,
            "display_name": self.display_name,
            "path": self.path,
            "revision": self.revision,
            "commit": None if self.hidden else self.commit,
            "hidden": self.hidden,
            "is_peft": self.is_peft,
            "base_path": self.base_path,
            "env_var": None if self.hidden else self.env_var,
            "name_hmac": name_hmac(key, self.name) if self.hidden and key else None,
            # How the kernel loads it (seer.runtime.loading); None: seer's default.
            "dtype": self.dtype,
            "device": self.device,
        }

    def __repr__(self) -> str:
        if self.hidden:
            kind = ", peft" if self.is_peft else ""
            return f"ModelHandle(var_name={self.var_name!r}, hidden model{kind}, path={self.path!r})"
        base = f", base_model={self.base_model!r}" if self.is_peft else ""
        commit = (self.commit or "local")[:12]
        return (
            f"ModelHandle(name={self.name!r}, var_name={self.var_name!r}, commit={commit!r}{base}, "
            f"path={self.path!r})"
        )


# --- the "models" step -----------------------------------------------------------------------
def _label(index: int, model: ModelConfig) -> str:
    """How progress and errors name a model: never by a hidden model's name."""
    return f"models[{index}] ({HIDDEN_DISPLAY_NAME})" if model.hidden else f"models[{index}] {model.name}"


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"  # pragma: no cover


def _visible_local_dirs(machine: Machine, models: list[ModelConfig], cache_dir: str) -> dict[str, str]:
    """Local model directories, as paths in the machine: uploaded there when it cannot see them."""
    out: dict[str, str] = {}
    for m in models:
        for path in (m.name, m.base_model):
            if not path or not path.startswith("/") or path in out:
                continue
            if machine.exec(["test", "-d", path]).ok:
                out[path] = path
                continue
            digest = hashlib.sha256(path.encode()).hexdigest()[:12]
            dest = posixpath.join(posixpath.dirname(cache_dir.rstrip("/")), "seer-local", f"d-{digest}")
            out[path] = machine.resolve(dest)
            machine.put_dir(path, out[path])
    return out


def _fetch_spec(configs: list[ModelConfig], cache_dir: str, local_dirs: dict[str, str]) -> dict[str, Any]:
    models = []
    secret = _client_secret() if any(m.hidden for m in configs) else b""
    for m in configs:
        name = local_dirs.get(m.name, m.name)
        base = local_dirs.get(m.base_model, m.base_model) if m.base_model else None
        entry: dict[str, Any] = {"name": name, "revision": m.revision, "hidden": m.hidden, "base_model": base}
        if m.hidden:
            # Keyed by the repo and revision the fetcher plans its job by.
            entry.update(_hidden_keys(secret, name, "local" if name.startswith("/") else m.revision))
            if base:
                keys = _hidden_keys(secret, base, "local" if base.startswith("/") else "main")
                entry.update({"base_dir": keys["dir"], "base_seal": keys["seal"]})
        models.append(entry)
    return {"cache_dir": cache_dir, "models": models}


def _run_fetcher(
    machine: Machine, models: list[ModelConfig], spec: dict[str, Any], cache_dir: str, progress: Progress
) -> dict[str, Any]:
    pending = ""
    result: dict[str, Any] | None = None

    def on_event(event: dict[str, Any]) -> None:
        nonlocal result
        kind = event.get("event")
        if kind == "result":
            result = event
            return
        index = event.get("index")
        if not isinstance(index, int) or not 0 <= index < len(models):
            return
        label = _label(index, models[index])
        if event.get("role") == "base_model":
            label += " base model"
        if kind == "start":
            progress.update(f"{label}: fetching")
        elif kind == "progress":
            progress.update(f"{label}: {_human_bytes(int(event.get('bytes', 0)))} downloaded")
        elif kind == "done":
            text = f"{label}: ready ({_human_bytes(int(event.get('bytes', 0)))} downloaded)"
            progress.update(text)
            log.info(text)
        elif kind == "error":
            progress.update(f"{label}: failed ({event.get('kind')})")

    def on_output(stream: str, text: str) -> None:
        nonlocal pending
        if stream != "stdout":
            return
        pending += text
        *lines, pending = pending.split("\n")
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                on_event(event)

    res = machine.exec(
        [machine.python, "-m", "seer.runtime.fetch"],
        stdin=json.dumps(spec).encode(),
        env={"HF_HUB_CACHE": cache_dir},
        on_output=on_output,
    )
    if pending.strip():
        on_output("stdout", "\n")
    if result is None:
        tail = (res.stderr or res.stdout).strip()[-2000:]
        for m in models:
            if m.hidden:
                for name in filter(None, (m.name, m.base_model)):
                    tail = tail.replace(name, HIDDEN_DISPLAY_NAME)
        raise SandboxError(
            f"the model fetcher left no result: it {_how_it_ended(machine, res.exit_code)}\n{tail}"
        )
    return result


def _how_it_ended(machine: Machine, exit_code: int) -> str:
    """How a fetcher that left no result ended: its exit status, the signal that killed it
    (shells report 128 + its number), and the sandbox's state: a fetcher killed with its machine
    (removed, lost, expired) reads differently from one killed in a machine that still runs."""
    import signal

    text = f"exited {exit_code}"
    with contextlib.suppress(ValueError):
        if exit_code > 128:
            text += f" ({signal.Signals(exit_code - 128).name})"
    try:
        status = machine.status()
    except Exception as exc:  # the error being raised matters more than this detail
        return f"{text}; the sandbox's state is unknown ({type(exc).__name__})"
    return f"{text}; the sandbox is {status.value}"


def _problems(result: dict[str, Any], models: list[ModelConfig]) -> list[ConfigProblem]:
    problems = []
    for item in result.get("models", []):
        if item.get("ok"):
            continue
        i = item["index"]
        m = models[i]
        error = item.get("error") or {}
        role = error.get("role", "model")
        field = f"models[{i}].base_model" if role == "base_model" else f"models[{i}].name"
        repo = m.base_model if role == "base_model" else m.name
        what = f"hidden model (models[{i}])" if m.hidden else repr(repo)
        if role == "base_model" and m.hidden:
            what = f"the base model of the hidden model models[{i}]"
        message = str(error.get("message", "could not be fetched"))
        if m.hidden:  # the Hub's own messages could quote the name
            for name in filter(None, (m.name, m.base_model)):
                message = message.replace(name, HIDDEN_DISPLAY_NAME)
        if role == "model" and error.get("kind") == "revision":
            field = f"models[{i}].revision"
        problems.append(ConfigProblem(field, f"{what}: {message}"))
    if not problems and result.get("error"):
        problems.append(ConfigProblem("models", str(result["error"])))
    return problems


def _stems(models: list[ModelConfig]) -> list[str]:
    """The symlink name under ``.seer/models`` of each model: ``org_name`` (plus the var_name if
    two models share a name)."""
    stems = []
    for m in models:
        base = posixpath.basename(m.name) if m.name.startswith("/") else m.name.replace("/", "_")
        stems.append(base)
    return [s if stems.count(s) == 1 else f"{s}-{m.var_name}" for s, m in zip(stems, models, strict=True)]


@dataclass(frozen=True)
class PreparedModels:
    """What the ``models`` step made: the handles, the variables everything run in the sandbox
    gets from now on (``MODEL_<ID>_PATH``, the manifest, ``HF_HUB_CACHE``) and the services to
    record with the sandbox (the handles; the models key when a model is hidden)."""

    handles: list[ModelHandle]
    env: dict[str, str]
    services: dict[str, Any]


def prepare_models(
    machine: Machine, models: list[ModelConfig], progress: Progress, *, provider: str, hides_models: bool
) -> PreparedModels:
    """Fetch ``models`` into ``machine`` and make them findable there (the ``models`` step of
    ``Sandbox.start()``). Returns what it made; the sandbox records it. ``hides_models``: whether
    the ``provider`` (its name) keeps a hidden model's identity from the agent
    (``Capabilities.hides_models``); without it, a hidden model gets a warning.

    Raises :class:`~seer.errors.ModelFetchError` (a :class:`~seer.errors.ConfigError`) naming
    ``models[i]`` and the model id when a repo does not exist, is gated and no token with access
    was given, the revision does not exist, or it is neither cached nor downloadable.
    """
    models = list(models)
    if not models:
        return PreparedModels([], {}, {})
    if any(m.hidden for m in models) and not hides_models:
        log.warning(
            "hidden models: the %r provider cannot hide a model's identity from the agent "
            "(it can read your files and the shared model cache); use a provider that isolates "
            "the sandbox, such as docker",
            provider,
        )
    cache_dir = machine.model_cache_dir()
    local_dirs = _visible_local_dirs(machine, models, cache_dir)
    spec = _fetch_spec(models, cache_dir, local_dirs)
    result = _run_fetcher(machine, models, spec, cache_dir, progress)
    problems = _problems(result, models)
    if problems:
        raise ModelFetchError(problems)

    by_index = {item["index"]: item for item in result["models"]}
    handles: list[ModelHandle] = []
    env: dict[str, str] = {}
    for i, m in enumerate(models):
        item = by_index[i]
        fetched, base = item["model"], item.get("base")
        env_var = None
        if not m.hidden:
            env_var = f"MODEL_{m.env_id}_PATH"
            env.setdefault(env_var, fetched["path"])
        handles.append(
            ModelHandle(
                name=m.name,
                var_name=m.var_name,
                revision=m.revision,
                commit=fetched.get("commit"),
                path=fetched["path"],
                hidden=m.hidden,
                is_peft=m.is_peft,
                base_model=m.base_model,
                base_path=base["path"] if base else None,
                base_commit=base.get("commit") if base else None,
                env_var=env_var,
                bytes_downloaded=int(fetched.get("bytes_downloaded", 0))
                + int(base.get("bytes_downloaded", 0) if base else 0),
                dtype=m.dtype,
                device=m.device,
            )
        )
    # A PEFT adapter's (non-hidden) base model is findable too, unless a configured model has its id.
    for h in handles:
        if h.is_peft and not h.hidden and h.base_model and h.base_path:
            base_id = _env_id(h.base_model)
            env.setdefault(f"MODEL_{base_id}_PATH", h.base_path)

    services: dict[str, Any] = {}
    key = secrets.token_hex(32) if any(h.hidden for h in handles) else None
    if key:  # kept by the client (the sandbox's record), handed only to served interfaces
        services[_KEY_SERVICE] = key
    manifest = manifest_path(machine.workdir)
    entries = [h.manifest_entry(key) for h in handles]
    machine.write_bytes(manifest, json.dumps({"models": entries}, indent=2).encode())
    links_dir = posixpath.join(machine.workdir, ".seer", "models")
    script = [f"mkdir -p {shlex.quote(links_dir)}"]
    for h, stem in zip(handles, _stems(models), strict=True):
        if not h.hidden:
            link = posixpath.join(links_dir, stem)
            script.append(f"ln -sfn {shlex.quote(h.path)} {shlex.quote(link)}")
    machine.exec(" && ".join(script)).check()
    services["models"] = [h.to_dict() for h in handles]
    return PreparedModels(handles, {**env, MANIFEST_ENV: manifest, "HF_HUB_CACHE": cache_dir}, services)


def _env_id(name: str) -> str:
    """``ModelConfig.env_id`` for any id: ``google/gemma-2-9b`` -> ``GOOGLE_GEMMA_2_9B``."""
    import re

    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper()
