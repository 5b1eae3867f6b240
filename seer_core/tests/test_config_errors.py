"""Bad configs fail early and clearly: a table of malformed configs, each of which must

* raise :class:`seer.errors.ConfigError` at the stage it names: ``build`` (constructing the
  ``SandboxConfig`` or loading the YAML file: shape and values, no plugin loaded) or ``start``
  (``Sandbox(config).start()``'s preflight, for what only the installed plugins, the provider or
  this machine can tell: provider, execution mode and GPU names, options, secrets);
* name the field at fault by its full path (``models[1].base_model``, ``secrets[0]``, ...), in
  ``.fields`` and in the message, with a message that says what is wrong;
* never show a secret's value;
* create nothing: no local sandbox directory, no sandbox record, no new ``LocalProvider().list()``
  entry.
"""

from __future__ import annotations

import textwrap
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from seer import ConfigError, Sandbox, SandboxConfig, load_config, plugins
from seer.config import GPU_CATALOGUE, ModelConfig
from seer.errors import MissingSecretError
from seer.preflight import preflight
from seer.providers.local import provider as local_provider
from seer.providers.local.provider import LocalProvider

# Unit, though one case (system-package-not-installed-locally) has the local provider ask
# dpkg-query whether a package is installed: a read-only local query, no sandbox is made.
pytestmark = pytest.mark.unit

#: Value of $SEER_TEST_SECRET (set in the environment) and of SEER_TEST_DOTENV_SECRET (in .env).
SECRET_VALUE = "s3cr3t-env-value-5d1c0e"
DOTENV_SECRET_VALUE = "s3cr3t-dotenv-value-a8f2"


@dataclass(frozen=True)
class Case:
    id: str
    source: dict[str, Any] | str  # SandboxConfig kwargs, or the text of a YAML config file
    field: str  # a path that must be among ConfigError.fields
    message: str  # a substring of the error text
    stage: str = "build"  # "build" or "start"
    environ: dict[str, str] = field(default_factory=dict)


CASES = [
    # --- wrong types ----------------------------------------------------------------------
    Case("timeout-string", {"timeout": "soon"}, "timeout", "whole number of seconds"),
    Case("timeout-bool", {"timeout": True}, "timeout", "whole number of seconds"),
    Case("timeout-float", {"timeout": 10.5}, "timeout", "valid integer"),
    Case("gpu-count-float", {"gpu": "A100", "gpu_count": 1.5}, "gpu_count", "valid integer"),
    Case("gpu-count-bool", {"gpu": "A100", "gpu_count": True}, "gpu_count", "whole number"),
    Case("models-a-string", {"models": "gpt2"}, "models", "write ['gpt2']"),
    Case("models-item-a-number", {"models": [1]}, "models[0]", "valid dictionary"),
    Case("repos-a-string", {"repos": "org/repo"}, "repos", "write ['org/repo']"),
    Case("python-packages-a-string", {"python_packages": "torch"}, "python_packages", "write ['torch']"),
    Case("system-packages-a-string", {"system_packages": "git"}, "system_packages", "write ['git']"),
    Case("secrets-a-string", {"secrets": "HF_TOKEN"}, "secrets", "write ['HF_TOKEN']"),
    Case("env-value-a-number", {"env": {"A": 1}}, "env.A", "valid string"),
    Case("env-a-list", {"env": ["A=1"]}, "env", "valid dictionary"),
    Case("debug-maybe", {"debug": "maybe"}, "debug", "valid boolean"),
    Case("hidden-maybe", {"models": [{"name": "gpt2", "hidden": "maybe"}]}, "models[0].hidden", "boolean"),
    Case("install-a-number", {"repos": [{"url": "org/r", "install": 3}]}, "repos[0].install", "true/false"),
    Case("local-files-not-a-pair", {"local_files": ["./data.txt"]}, "local_files[0]", "valid tuple"),
    Case("provider-options-a-list", {"provider_options": ["x"]}, "provider_options", "valid dictionary"),
    Case(
        "execution-mode-unknown",
        {"execution_mode": "jupyter"},
        "execution_mode",
        "registered modes: 'notebook', 'cli'",
        stage="start",
    ),
    Case("execution-mode-blank", {"execution_mode": " "}, "execution_mode", "'notebook', 'cli'"),
    # --- unknown fields -------------------------------------------------------------------
    Case("unknown-top-level", {"gpu_type": "A100"}, "gpu_type", "did you mean 'gpu'?"),
    Case("unknown-top-level-typo", {"python_packges": ["torch"]}, "python_packges", "'python_packages'"),
    Case("name-is-not-a-sandboxconfig-field", {"name": "exp"}, "name", "unknown field"),
    Case("model-dtype", {"models": [{"name": "gpt2", "dtype": "bf16"}]}, "models[0].dtype", "'bfloat16'?"),
    Case(
        "model-load-kwargs",
        {"models": ["gpt2", {"name": "distilgpt2", "var_name": "m2", "load_kwargs": {}}]},
        "models[1].load_kwargs",
        "seer loads models itself",
    ),
    Case("repo-branch", {"repos": [{"url": "org/r", "branch": "dev"}]}, "repos[0].branch", "'ref'"),
    # The Stage-1 format (github_repos, a gpu block, an image block) loads; what it cannot mean
    # is refused, named as written, on its line.
    Case(
        "yaml-stage1-github-repos-and-repos",
        "github_repos:\n  - myorg/code\nrepos: [myorg/other]\n",
        "github_repos",
        "given twice: as github_repos (the Stage-1 format) and as repos",
    ),
    Case(
        "yaml-stage1-gpu-block-unknown-key",
        "gpu:\n  gpu_type: A100\n  memory_gb: 80\n",
        "gpu.memory_gb",
        "unknown field in the Stage-1 'gpu' block; it may hold gpu.gpu_type, gpu.gpu_count",
    ),
    Case(
        "yaml-stage1-gpu-type-unknown",
        "gpu:\n  gpu_type: V100\n",
        "gpu.gpu_type",
        "seer.yaml:2: gpu.gpu_type: unknown GPU 'V100'",
        stage="start",
    ),
    Case(
        "yaml-stage1-image-base-image",
        "image:\n  python_packages: [numpy]\n  base_image: python:3.11\n",
        "image.base_image",
        "a base image is a provider option",
    ),
    Case(
        "yaml-model-device",
        """
        models:
          - name: google/gemma-2-9b-it
            device: gpu
        """,
        "models[0].device",
        "unknown device 'gpu'; valid: auto",
    ),
    Case("model-dtype-fp8", {"models": [{"name": "m/x", "dtype": "fp8"}]}, "models[0].dtype", "float16"),
    Case(
        "model-device-cuda-without-gpu",
        {"models": [{"name": "gpt2", "device": "cuda:0"}]},
        "models[0].device",
        "needs a GPU, and this config asks for none",
    ),
    # --- PEFT -----------------------------------------------------------------------------
    Case(
        "peft-without-base-model",
        {"models": [{"name": "user/adapter", "is_peft": True}]},
        "models[0].base_model",
        "is_peft=True needs base_model",
    ),
    Case(
        "base-model-without-peft",
        {"models": ["gpt2", {"name": "user/adapter", "var_name": "a", "base_model": "gpt2"}]},
        "models[1].base_model",
        "only used with is_peft=True",
    ),
    Case(
        "base-model-not-a-hub-id",
        {"models": [{"name": "user/adapter", "is_peft": True, "base_model": "not valid!"}]},
        "models[0].base_model",
        "neither a Hugging Face repo id",
    ),
    # --- GPUs -----------------------------------------------------------------------------
    Case("gpu-wrong-case", {"gpu": "a100-80gb"}, "gpu", "did you mean 'A100-80GB'?", stage="start"),
    Case("gpu-with-space", {"gpu": "a100 80GB"}, "gpu", "did you mean 'A100-80GB'?", stage="start"),
    Case("gpu-unknown", {"gpu": "V100"}, "gpu", "unknown GPU 'V100'; valid: A100, ", stage="start"),
    Case("yaml-gpu-none-string", "gpu: none\n", "gpu", "write null in YAML"),
    Case(
        "yaml-provider-unknown-names-its-line",
        "timeout: 60\nprovider: nope\n",
        "provider",
        "seer.yaml:2: provider: no provider named 'nope'",
        stage="start",
    ),
    Case("gpu-count-without-gpu", {"gpu_count": 2}, "gpu_count", "needs a GPU type"),
    Case("gpu-count-zero", {"gpu": "A100", "gpu_count": 0}, "gpu_count", "greater than or equal to 1"),
    Case("gpu-count-too-many", {"gpu": "A100", "gpu_count": 17}, "gpu_count", "less than or equal to 16"),
    Case("gpu-on-a-machine-without-gpu", {"gpu": "A100"}, "gpu", "no NVIDIA GPU", stage="start"),
    Case(
        "gpu-without-gpu-and-secrets-set",
        {"gpu": "H100", "secrets": ["SEER_TEST_SECRET", "SEER_TEST_DOTENV_SECRET"]},
        "gpu",
        "no NVIDIA GPU",
        stage="start",
    ),
    # --- secrets --------------------------------------------------------------------------
    Case(
        "secret-missing",
        {"secrets": ["SEER_TEST_SECRET", "SEER_TEST_MISSING"]},
        "secrets[1]",
        "'SEER_TEST_MISSING' is not set",
        stage="start",
    ),
    Case(
        "secret-missing-from-env-and-dotenv",
        {"secrets": ["SEER_TEST_DOTENV_SECRET", "SEER_TEST_MISSING"]},
        "secrets[1]",
        ".env",
        stage="start",
    ),
    Case(
        "secret-missing-and-gpu-missing",
        {"gpu": "T4", "secrets": ["SEER_TEST_MISSING"]},
        "secrets[0]",
        "SEER_TEST_MISSING",
        stage="start",
    ),
    Case("secret-name-starts-with-digit", {"secrets": ["HF_TOKEN", "1TOKEN"]}, "secrets[1]", "'1TOKEN'"),
    Case("secret-name-with-dash", {"secrets": ["MY-TOKEN"]}, "secrets[0]", "environment variable name"),
    Case("secret-name-empty", {"secrets": [""]}, "secrets[0]", "environment variable name"),
    Case(
        "secret-listed-twice",
        {"secrets": ["SEER_TEST_SECRET", "HF_TOKEN", "SEER_TEST_SECRET"]},
        "secrets[2]",
        "listed twice (also secrets[0])",
    ),
    Case(
        "secret-also-in-env",
        {"env": {"SEER_TEST_SECRET": "x"}, "secrets": ["SEER_TEST_SECRET"]},
        "secrets[0]",
        "both env and secrets",
    ),
    Case("env-bad-name", {"env": {"MY-VAR": "1"}}, "env.MY-VAR", "environment variable name"),
    # NUL bytes: no argv or environment can carry one; refused for every string field.
    Case("env-value-nul", {"env": {"A": "x\x00y"}}, "env.A", "NUL byte"),
    Case("env-name-nul", {"env": {"A\x00B": "1"}}, "env", "the name 'A\\x00B' contains a NUL byte"),
    Case("secret-name-nul", {"secrets": ["HF\x00TOKEN"]}, "secrets[0]", "NUL byte"),
    Case("yaml-env-value-nul", 'env:\n  A: "x\\0y"\n', "env.A", "NUL byte"),
    Case("requirement-nul", {"python_packages": ["numpy", "to\x00rch"]}, "python_packages[1]", "NUL byte"),
    Case("system-package-nul", {"system_packages": ["git\x00"]}, "system_packages[0]", "NUL byte"),
    Case("repo-url-nul", {"repos": ["org/r\x00"]}, "repos[0].url", "NUL byte"),
    Case("repo-install-nul", {"repos": [{"url": "org/r", "install": "make\x00"}]}, "repos[0].install", "NUL"),
    Case("local-file-path-nul", {"local_files": [("./data\x00.txt", "d")]}, "local_files[0][0]", "NUL"),
    Case("local-dir-target-nul", {"local_dirs": [("./data_dir", "d\x00")]}, "local_dirs[0][1]", "NUL"),
    Case("model-name-nul", {"models": ["./weights\x00"]}, "models[0].name", "NUL byte"),
    Case("provider-option-nul", {"provider_options": {"image": "x\x00"}}, "provider_options.image", "NUL"),
    # --- local files and dirs -------------------------------------------------------------
    Case(
        "local-file-missing",
        {"local_files": [("./nope.txt", "w/nope.txt")]},
        "local_files[0]",
        "does not exist",
    ),
    Case(
        "local-file-second-missing",
        {"local_files": [("./data.txt", "w/a"), ("./nope.txt", "w/b")]},
        "local_files[1]",
        "'./nope.txt' does not exist",
    ),
    Case("local-file-is-a-dir", {"local_files": [("./data_dir", "w/d")]}, "local_files[0]", "use local_dirs"),
    Case("local-dir-is-a-file", {"local_dirs": [("./data.txt", "w/x")]}, "local_dirs[0]", "use local_files"),
    Case("local-dir-missing", {"local_dirs": [("./no_dir", "w/x")]}, "local_dirs[0]", "does not exist"),
    Case(
        "local-file-empty-sandbox-path", {"local_files": [("./data.txt", " ")]}, "local_files[0]", "is empty"
    ),
    Case(
        "local-dir-empty-sandbox-path",
        {"local_dirs": [{"local": "./data_dir", "remote": ""}]},
        "local_dirs[0]",
        "is empty",
    ),
    Case(
        "yaml-local-file-relative-to-the-file",
        "local_files:\n  - [missing.txt, missing.txt]\n",
        "local_files[0]",
        "missing.txt' does not exist",
    ),
    Case(
        "local-file-target-dotdot",
        {"local_files": [("./data.txt", "../outside.txt")]},
        "local_files[0]",
        "leads out of the sandbox's working directory",
    ),
    Case(
        "local-file-target-dotdot-after-normalising",
        {"local_files": [("./data.txt", "inputs/../../../outside.txt")]},
        "local_files[0]",
        "leads out of the sandbox's working directory",
    ),
    Case("local-dir-target-dotdot", {"local_dirs": [("./data_dir", "..")]}, "local_dirs[0]", "leads out"),
    Case(
        "local-file-target-absolute",
        {"local_files": [("./data.txt", "/tmp/seer-outside.txt")]},
        "local_files[0]",
        "must be relative to the sandbox's working directory",
    ),
    Case("local-dir-target-home", {"local_dirs": [("./data_dir", "~/x")]}, "local_dirs[0]", "not absolute"),
    Case(
        "yaml-local-file-target-dotdot",
        "local_files:\n  - {local: data.txt, remote: ../../etc/seer.txt}\n",
        "local_files[0]",
        "leads out",
    ),
    # --- models ---------------------------------------------------------------------------
    Case(
        "var-name-keyword",
        {"models": [{"name": "gpt2", "var_name": "class"}]},
        "models[0].var_name",
        "keyword",
    ),
    Case(
        "var-name-not-identifier",
        {"models": [{"name": "gpt2", "var_name": "my-model"}]},
        "models[0].var_name",
        "not a valid Python variable name",
    ),
    Case(
        "var-name-duplicate",
        {"models": ["gpt2", "distilgpt2"]},
        "models[1].var_name",
        "already used by models[0]",
    ),
    Case(
        "model-path-variable-clash",
        {"models": ["org/a-b", {"name": "org/a_b", "var_name": "m2"}]},
        "models[1].name",
        "MODEL_ORG_A_B_PATH is also models[0]'s ('org/a-b')",
    ),
    Case(
        "var-name-is-another-models-tokenizer",
        {"models": ["gpt2", {"name": "distilgpt2", "var_name": "tokenizer"}]},
        "models[1].var_name",
        "'tokenizer' is where models[0]'s tokenizer goes",
    ),
    Case(
        "var-name-model-after-a-model-called-tokenizer",
        {"models": [{"name": "distilgpt2", "var_name": "tokenizer"}, "gpt2"]},
        "models[1].var_name",
        "tokenizer would be bound to 'tokenizer', which is models[0]'s var_name",
    ),
    Case(
        "var-name-next-to-its-tokenizer-name",
        {"models": [{"name": "gpt2", "var_name": "m"}, {"name": "distilgpt2", "var_name": "m_tokenizer"}]},
        "models[1].var_name",
        "'m_tokenizer' is where models[0]'s tokenizer goes",
    ),
    Case(
        "var-name-dunder-builtins",
        {"models": [{"name": "gpt2", "var_name": "__builtins__"}]},
        "models[0].var_name",
        "starts with '__'",
    ),
    Case(
        "var-name-seer-kernel-name",
        {"models": [{"name": "gpt2", "var_name": "__seer_model_info__"}]},
        "models[0].var_name",
        "seer's own names",
    ),
    Case(
        "var-name-builtin",
        {"models": [{"name": "gpt2", "var_name": "print"}]},
        "models[0].var_name",
        "builtin",
    ),
    Case(
        "var-name-ipython", {"models": [{"name": "gpt2", "var_name": "In"}]}, "models[0].var_name", "IPython"
    ),
    Case(
        "var-name-ipython-output",
        {"models": [{"name": "gpt2", "var_name": "_1"}]},
        "models[0].var_name",
        "IPython",
    ),
    Case(
        "hub-id-with-space",
        {"models": ["google/gemma 2"]},
        "models[0].name",
        "neither a Hugging Face repo id",
    ),
    Case("hub-id-two-slashes", {"models": ["a/b/c"]}, "models[0].name", "more than one '/'"),
    Case("hub-id-double-dash", {"models": ["org/name--x"]}, "models[0].name", "'--'"),
    Case("hub-id-empty", {"models": [{"name": "  "}]}, "models[0].name", "must not be empty"),
    Case("local-model-dir-missing", {"models": ["./no-such-model"]}, "models[0].name", "does not exist"),
    Case(
        "revision-with-space",
        {"models": [{"name": "gpt2", "revision": "my branch"}]},
        "models[0].revision",
        "spaces",
    ),
    Case(
        "revision-dotdot",
        {"models": [{"name": "gpt2", "revision": "main..dev"}]},
        "models[0].revision",
        "'..'",
    ),
    Case("revision-empty", {"models": [{"name": "gpt2", "revision": ""}]}, "models[0].revision", "empty"),
    # --- repos ----------------------------------------------------------------------------
    Case("repo-url-junk", {"repos": ["not a url!"]}, "repos[0].url", "is not owner/repo"),
    Case("repo-url-ftp", {"repos": ["ftp://example.com/r.git"]}, "repos[0].url", "a git URL"),
    Case(
        "repo-url-git-option",
        {"repos": ["--upload-pack=touch /tmp/seer-pwned"]},
        "repos[0].url",
        "read as an option",
    ),
    Case("repo-url-short-option", {"repos": ["-uevil"]}, "repos[0].url", "read as an option"),
    Case(
        "repo-url-ssh-host-option",
        {"repos": ["ssh://-oProxyCommand=touch/repo.git"]},
        "repos[0].url",
        "read as an option",
    ),
    Case("repo-url-scp-host-option", {"repos": ["git@-oProxyCommand=x:r"]}, "repos[0].url", "option"),
    Case("repo-local-path-missing", {"repos": ["./no-such-repo"]}, "repos[0].url", "does not exist"),
    Case("repo-ref-tilde", {"repos": [{"url": "org/r", "ref": "main~1"}]}, "repos[0].ref", "'~'"),
    Case(
        "dockerfile-escapes-repo",
        {"repos": [{"url": "org/r", "dockerfile": "../Dockerfile"}]},
        "repos[0].dockerfile",
        "inside the repository",
    ),
    Case(
        "dockerfile-absolute",
        {"repos": [{"url": "org/r", "dockerfile": "/Dockerfile"}]},
        "repos[0].dockerfile",
        "relative path",
    ),
    Case(
        "install-empty",
        {"repos": [{"url": "org/r", "install": "  "}]},
        "repos[0].install",
        "must not be empty",
    ),
    Case(
        "repos-same-dir-name",
        {"repos": ["org/tools", "https://github.com/other/tools.git"]},
        "repos[1]",
        "cloned into 'tools', like repos[0]",
    ),
    # --- packages -------------------------------------------------------------------------
    Case(
        "requirement-invalid",
        {"python_packages": ["torch", "numpy>>1"]},
        "python_packages[1]",
        "not a valid requirement",
    ),
    Case(
        "requirement-pip-option",
        {"python_packages": ["--index-url https://x"]},
        "python_packages[0]",
        "pip option",
    ),
    Case("requirement-editable-flag", {"python_packages": ["-e ."]}, "python_packages[0]", "pip option"),
    Case("requirement-empty", {"python_packages": [""]}, "python_packages[0]", "must not be empty"),
    Case(
        "system-package-upper-case", {"system_packages": ["Git"]}, "system_packages[0]", "system package name"
    ),
    Case(
        "system-package-injection",
        {"system_packages": ["git; rm -rf /"]},
        "system_packages[0]",
        "system package name",
    ),
    Case(
        "system-package-not-installed-locally",
        {"system_packages": ["seer-no-such-package"]},
        "system_packages[0]",
        "not installed on this machine",
        stage="start",
    ),
    # --- provider -------------------------------------------------------------------------
    Case("provider-unknown", {"provider": "nope"}, "provider", "'nope'; installed: ", stage="start"),
    # Whatever is installed here: the test disables seer-modal's plugin for this case.
    Case(
        "provider-modal-not-installed",
        {"provider": "modal"},
        "provider",
        'pip install "seer[modal]>=0.2"',
        stage="start",
        environ={"SEER_DISABLE_PLUGINS": "modal"},
    ),
    Case("provider-blank", {"provider": " "}, "provider", "not a provider name"),
    Case(
        "provider-from-env-unknown",
        {},
        "provider",
        "$SEER_PROVIDER",
        stage="start",
        environ={"SEER_PROVIDER": "nope"},
    ),
    Case(
        "provider-options-for-local",
        {"provider_options": {"image": "x"}},
        "provider_options.image",
        "unknown field",
        stage="start",
    ),
    Case(
        "provider-options-local-python",
        {"provider_options": {"python": "python3"}},
        "provider_options.python",
        "'auto', 'system' or the absolute path of a Python interpreter",
        stage="start",
    ),
    Case(
        "python-packages-offline",
        {"python_packages": ["no-such-package-seer-test"]},
        "python_packages",
        "no package index can be reached to install them ($SEER_OFFLINE is set)",
        stage="start",
        environ={"SEER_OFFLINE": "1", "PIP_FIND_LINKS": ""},
    ),
    # --- timeout --------------------------------------------------------------------------
    Case("timeout-zero", {"timeout": 0}, "timeout", "positive"),
    Case("timeout-negative", {"timeout": -5}, "timeout", "positive"),
    Case("timeout-over-7-days", {"timeout": 7 * 24 * 3600 + 1}, "timeout", "7 days"),
    # --- YAML-only ------------------------------------------------------------------------
    Case("yaml-experiment-name", "name: my experiment\n", "name", "use letters, digits"),
    Case(
        "yaml-key-given-twice", "gpu: A100\ntimeout: 60\ngpu: H100\n", "gpu", "given twice (also on line 1)"
    ),
    Case("yaml-env-number", "env:\n  SEED: 42\n", "env.SEED", "valid string"),
    Case(
        "yaml-self-referencing-anchor", "python_packages: &x [*x]\n", "python_packages[0]", "refers to itself"
    ),
    Case(
        "yaml-alias-bomb",
        "env:\n  A: &a [x,x,x,x,x,x,x,x,x,x]\n  B: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "  C: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n  D: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        "  E: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n",
        "env.E",
        "expands to more than",
    ),
]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with a file, a directory and a .env; secrets set; a machine with no GPU."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.txt").write_text("data")
    (tmp_path / "data_dir").mkdir()
    (tmp_path / ".env").write_text(f"SEER_TEST_DOTENV_SECRET={DOTENV_SECRET_VALUE}\n")
    monkeypatch.setenv("SEER_TEST_SECRET", SECRET_VALUE)
    for name in ("SEER_TEST_MISSING", "SEER_TEST_DOTENV_SECRET", "SEER_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(local_provider, "detect_gpus", lambda: [])
    return tmp_path


def _state(home: Path) -> dict[str, list[str]]:
    """What exists of local sandboxes: their directories, their records, what the provider lists."""
    out = {}
    for sub in ("local", "sandboxes"):
        d = home / sub
        out[sub] = sorted(p.name for p in d.iterdir()) if d.is_dir() else []
    out["listed"] = sorted(m.id for m in LocalProvider().list())
    return out


def _attempt(case: Case, workdir: Path) -> tuple[str, ConfigError]:
    """Build the config (and start it, if it builds); return the stage that failed and the error."""
    try:
        if isinstance(case.source, str):
            path = workdir / "seer.yaml"
            path.write_text(textwrap.dedent(case.source))
            config: SandboxConfig = load_config(path)
        else:
            config = SandboxConfig(**case.source)
    except ConfigError as exc:
        return "build", exc
    sandbox = Sandbox(config)
    try:
        sandbox.start()
    except ConfigError as exc:
        return "start", exc
    finally:
        sandbox.terminate()
    pytest.fail(f"{case.id}: the config was accepted and the sandbox started")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_config_fails_early_naming_the_field(
    case: Case, workdir: Path, seer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in case.environ.items():
        monkeypatch.setenv(name, value)
    before = _state(seer_home)

    reload = any(name.startswith("SEER_") and "PLUGINS" in name for name in case.environ)
    if reload:  # the plugins this case runs with
        plugins.reset()
    try:
        stage, err = _attempt(case, workdir)
    finally:
        if reload:
            for name in case.environ:
                monkeypatch.delenv(name, raising=False)
            plugins.reset()

    assert _state(seer_home) == before, "a failed config must not create anything"
    assert stage == case.stage, f"failed at {stage}, expected at {case.stage}: {err}"
    assert isinstance(err, ConfigError)
    assert case.field in err.fields, f"{case.field!r} not in {err.fields}: {err}"
    text = str(err)
    assert case.field in text
    assert case.message in text
    everything = "".join(traceback.format_exception(err)) + repr(err.problems)
    assert SECRET_VALUE not in everything
    assert DOTENV_SECRET_VALUE not in everything


def test_table_is_big_enough_and_ids_unique() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) >= 40
    assert len(set(ids)) == len(ids)


def test_every_problem_is_reported_at_once(workdir: Path) -> None:
    with pytest.raises(ConfigError) as info:
        SandboxConfig(
            timeout=0,
            gpu="cpu",
            secrets=["OK", "1BAD"],
            models=[{"name": "a/b", "is_peft": True}],
            python_packages=["torch", "--pre"],
        )
    assert set(info.value.fields) == {
        "timeout",
        "gpu",
        "secrets[1]",
        "models[0].base_model",
        "python_packages[1]",
    }
    # One line per problem, each starting with its field.
    lines = str(info.value).splitlines()[1:]
    assert sorted(line.strip().split(":")[0] for line in lines) == sorted(info.value.fields)


def test_unknown_gpu_lists_every_valid_name(workdir: Path) -> None:
    with pytest.raises(ConfigError) as info:
        preflight(SandboxConfig(gpu="Z100"))  # no installed provider offers it (Modal offers B200)
    for name in GPU_CATALOGUE:
        assert name in str(info.value)
    assert "did you mean" not in str(info.value)


def test_local_gpu_of_the_wrong_kind_names_what_the_machine_has(
    workdir: Path, seer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_provider, "detect_gpus", lambda: ["Tesla T4"])
    before = _state(seer_home)
    case = Case("wrong-gpu", {"gpu": "A100", "gpu_count": 2}, "gpu", "Tesla T4", stage="start")
    stage, err = _attempt(case, workdir)
    assert stage == "start"
    assert err.fields == ["gpu"]
    assert "this machine has Tesla T4" in str(err)
    assert _state(seer_home) == before


def test_missing_secret_is_a_missing_secret_error_naming_only_the_missing_one(workdir: Path) -> None:
    config = SandboxConfig(secrets=["SEER_TEST_SECRET", "SEER_TEST_DOTENV_SECRET", "SEER_TEST_MISSING"])
    with pytest.raises(MissingSecretError) as info:
        preflight(config)
    assert info.value.fields == ["secrets[2]"]
    assert "SEER_TEST_SECRET'" not in str(info.value)
    assert SECRET_VALUE not in str(info.value) and DOTENV_SECRET_VALUE not in str(info.value)


def test_assignment_is_validated_too(workdir: Path) -> None:
    config = SandboxConfig()
    with pytest.raises(ConfigError) as info:
        config.timeout = 0
    assert info.value.fields == ["timeout"]
    with pytest.raises(ConfigError) as info:
        config.models = [{"name": "a/b", "is_peft": True}]  # type: ignore[list-item]
    assert info.value.fields == ["models[0].base_model"]
    assert config.timeout == 3600 and config.models == []


def test_nested_config_built_alone_names_its_own_field() -> None:
    with pytest.raises(ConfigError) as info:
        ModelConfig(name="user/adapter", is_peft=True)
    assert info.value.fields == ["base_model"]
    assert str(info.value).startswith("Invalid ModelConfig: base_model: ")


def test_model_validate_gives_the_same_paths(workdir: Path) -> None:
    with pytest.raises(ConfigError) as info:
        SandboxConfig.model_validate({"models": ["gpt2", {"name": "x/y", "var_name": "m", "dtype": "f16"}]})
    assert info.value.fields == ["models[1].dtype"]
    with pytest.raises(ConfigError) as info:
        SandboxConfig.model_validate_json('{"repos": [{"url": "org/r", "dockerfile": "../x"}]}')
    assert info.value.fields == ["repos[0].dockerfile"]


def test_the_title_fits_every_problem_when_the_provider_is_unknown(workdir: Path) -> None:
    with pytest.raises(ConfigError) as alone:
        preflight(SandboxConfig(provider="nosuchprovider"))
    assert alone.value.title == "Unknown provider"
    with pytest.raises(ConfigError) as more:
        preflight(SandboxConfig(provider="nosuchprovider", gpu="Z100", execution_mode="nosuchmode"))
    assert set(more.value.fields) == {"provider", "gpu", "execution_mode"}
    assert more.value.title == "Config not valid: unknown provider 'nosuchprovider', and 2 more problems"
    assert str(more.value).startswith(more.value.title + ":\n")
