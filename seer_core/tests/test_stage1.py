"""The Stage-1 config format and entry point (seed 000): experiment YAML written for the earlier
design loads, with one notice naming the current fields; ``ModelConfig.dtype`` / ``.device`` are
honoured by the kernel; ``setup_environment(config)`` returns the documented handle.

The issue's YAML asks for two A100-80GB GPUs and google/gemma-2-9b-it. Here the tiny offline
model stands in for gemma (found in a private Hugging Face cache) and a local git repository for
the GitHub one; the GPU block is shown to parse and to be refused clearly on a machine without a
GPU, and a CPU variant (the same file without ``gpu_type``) starts.
"""

from __future__ import annotations

import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from _model_kit import MODEL_ID, hf_home, install_all, tiny_dirs
from seer import ConfigError, Sandbox, load_config
from seer.environment import EnvironmentHandle, setup_environment

pytestmark = pytest.mark.e2e

#: The issue's Stage-1 YAML, word for word.
STAGE1_YAML = """\
name: "my-experiment"
gpu: {gpu_type: "A100-80GB", gpu_count: 2, use_model_volumes: true}
models:
  - {name: "google/gemma-2-9b-it", device: "auto", dtype: "bfloat16"}
github_repos: ["myorg/my-research-code"]
"""


def _load_quietly(path: Path) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return load_config(path)


@pytest.mark.unit
def test_the_stage1_yaml_loads_with_one_notice_naming_the_current_fields(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(STAGE1_YAML)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = load_config(path)
    notices = [w for w in caught if issubclass(w.category, FutureWarning)]
    assert len(notices) == 1, [str(w.message) for w in caught]
    text = str(notices[0].message)
    assert "\n" not in text
    for moved in ("gpu.gpu_type -> gpu", "gpu.gpu_count -> gpu_count", "github_repos -> repos"):
        assert moved in text
    assert "gpu.use_model_volumes (ignored" in text and str(path) in text
    assert (config.name, config.gpu, config.gpu_count) == ("my-experiment", "A100-80GB", 2)
    assert [r.url for r in config.repos] == ["myorg/my-research-code"]
    [model] = config.models
    assert (model.name, model.device, model.dtype) == ("google/gemma-2-9b-it", "auto", "bfloat16")


@pytest.mark.unit
def test_an_image_block_maps_onto_packages(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("image:\n  python_packages: [numpy]\n  apt_packages: [git]\n  env: {A: '1'}\n")
    config = _load_quietly(path)
    assert (config.python_packages, config.system_packages, config.env) == (["numpy"], ["git"], {"A": "1"})


@pytest.mark.unit
def test_the_current_format_gives_no_notice(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("gpu: A100\ngpu_count: 2\nrepos: [myorg/code]\nmodels: [{name: a/b, dtype: float32}]\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config(path)


def test_the_gpu_block_is_refused_clearly_where_there_is_no_gpu(tmp_path: Path) -> None:
    if subprocess.run("nvidia-smi -L", shell=True, capture_output=True).returncode == 0:
        pytest.skip("this machine has an NVIDIA GPU: the local provider would accept the GPU block")
    path = tmp_path / "config.yaml"
    path.write_text(STAGE1_YAML)
    config = _load_quietly(path)
    with pytest.raises(ConfigError) as info:
        setup_environment(config)
    assert info.value.fields == ["gpu.gpu_type"]  # the field as the Stage-1 file spells it
    assert "A100-80GB" in str(info.value) and "no NVIDIA GPU" in str(info.value)


def _git_repo(path: Path) -> Path:
    path.mkdir()
    (path / "analysis.py").write_text("ANSWER = 42\n")
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "research code"], check=True)
    return path


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Path]:
    """HF_HOME holding the tiny model under its id, for the sandboxes started here."""
    home = tmp_path_factory.mktemp("hf-home")
    install_all(tiny_dirs(tmp_path_factory, worker_id), home / "hub")
    with hf_home(home):
        yield home


@pytest.fixture(scope="module")
def stage1_env(hub: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvironmentHandle]:
    """The issue's YAML on this CPU machine: gemma -> the tiny model, the GitHub repo -> a local
    one, and the GPU block without its GPU type."""
    folder = tmp_path_factory.mktemp("stage1")
    _git_repo(folder / "my-research-code")
    text = (
        STAGE1_YAML.replace('gpu_type: "A100-80GB", gpu_count: 2, ', "")
        .replace("google/gemma-2-9b-it", MODEL_ID)
        .replace("myorg/my-research-code", "./my-research-code")
    )
    (folder / "config.yaml").write_text(text + "timeout: 600\n")
    with pytest.warns(FutureWarning, match="github_repos -> repos"):
        env = setup_environment(folder / "config.yaml", quiet=True)
    with env:
        yield env


def test_setup_environment_returns_the_documented_handle(stage1_env: EnvironmentHandle) -> None:
    env = stage1_env
    sandbox = env.sandbox
    assert isinstance(sandbox, Sandbox)
    assert env.sandbox_id == sandbox.sandbox_id and env.status == "running"
    assert env.jupyter_url == sandbox.jupyter_url and env.jupyter_token in env.jupyter_url
    assert f":{env.jupyter_port}" in env.jupyter_url
    assert env.experiment_config.name == "my-experiment"
    from seer.notebook import JupyterClient

    assert JupyterClient.from_url(env.jupyter_url).status()  # the URL alone reaches the server
    assert sandbox.exec("cat my-research-code/analysis.py", check=True).stdout == "ANSWER = 42\n"


def test_the_stage1_model_loads_in_the_kernel_with_its_dtype(stage1_env: EnvironmentHandle) -> None:
    from seer.execution import create_notebook_session

    session = create_notebook_session(stage1_env.sandbox, outputs_dir=False)
    try:
        dtypes = session.exec("sorted({str(p.dtype) for p in model.parameters()})").result
        assert dtypes == "['torch.bfloat16']"
        assert "- Dtype: bfloat16" in session.model_info_text
    finally:
        session.shutdown()


def test_dtype_float16_and_float32_are_honoured_in_the_kernel(hub: Path) -> None:
    from seer import ModelConfig, SandboxConfig
    from seer.execution import create_notebook_session

    models = [
        ModelConfig(name=MODEL_ID, var_name="half", dtype="float16", device="cpu"),
        ModelConfig(name=MODEL_ID, var_name="full", dtype="float32"),
    ]
    with Sandbox(SandboxConfig(timeout=600, models=models)).start(quiet=True) as sandbox:
        session = create_notebook_session(sandbox, outputs_dir=False)
        try:
            code = "[sorted({str(p.dtype) for p in m.parameters()}) for m in (half, full)]"
            assert session.exec(code).result == "[['torch.float16'], ['torch.float32']]"
            info = session.model_info_text
            assert f"**half** ({MODEL_ID})\n- Type: LlamaForCausalLM\n- Device: cpu\n- Dtype: float16" in info
            assert f"**full** ({MODEL_ID})\n- Type: LlamaForCausalLM\n- Device: cpu\n- Dtype: float32" in info
        finally:
            session.shutdown()
