"""The happy paths of ``SandboxConfig``: defaults, shorthands, derived names, secrets, schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from seer import ExecutionMode, ExperimentConfig, ModelConfig, RepoConfig, SandboxConfig
from seer.config import GPU_CATALOGUE
from seer.config.secrets import read_dotenv, resolve_secrets
from seer.preflight import preflight

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEER_PROVIDER", raising=False)


def test_defaults_match_the_documented_sandboxconfig() -> None:
    config = SandboxConfig()
    assert config.gpu is None
    assert config.gpu_count == 1
    assert config.execution_mode is ExecutionMode.NOTEBOOK
    assert config.models == []
    assert config.repos == []
    assert config.python_packages == []
    assert config.system_packages == []
    assert config.secrets == []
    assert config.env == {}
    assert config.timeout == 3600
    assert config.local_files == []
    assert config.local_dirs == []
    assert config.debug is False
    assert config.provider is None
    assert config.provider_options == {}
    assert config.provider_name == "local"


def test_model_and_repo_defaults() -> None:
    model = ModelConfig(name="google/gemma-2-9b-it")
    assert (model.revision, model.var_name, model.hidden, model.is_peft, model.base_model) == (
        "main",
        "model",
        False,
        False,
        None,
    )
    repo = RepoConfig(url="org/repo")
    assert (repo.ref, repo.dockerfile, repo.install) == (None, None, False)


def test_default_lists_are_not_shared() -> None:
    a, b = SandboxConfig(), SandboxConfig()
    a.python_packages.append("torch")
    assert b.python_packages == []


def test_provider_name_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEER_PROVIDER", "somewhere")
    assert SandboxConfig().provider_name == "somewhere"
    assert SandboxConfig(provider="local").provider_name == "local"


@pytest.mark.parametrize("text", ["NOTEBOOK", "notebook", "Notebook", "nOtEbOoK"])
def test_execution_mode_is_case_insensitive(text: str) -> None:
    assert ExecutionMode(text) is ExecutionMode.NOTEBOOK
    assert SandboxConfig(execution_mode=text).execution_mode is ExecutionMode.NOTEBOOK


@pytest.mark.parametrize(("text", "mode"), [("CLI", ExecutionMode.CLI), ("Local", ExecutionMode.LOCAL)])
def test_other_execution_modes(text: str, mode: ExecutionMode) -> None:
    assert ExecutionMode(text) is mode
    assert SandboxConfig(execution_mode=text).execution_mode is mode


def test_unknown_execution_mode_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        ExecutionMode("jupyter")


def test_models_and_repos_given_as_plain_strings() -> None:
    config = SandboxConfig(
        gpu="A100",
        models=["google/gemma-2-9b", ModelConfig(name="gpt2", var_name="small")],
        repos=["org/repo", {"url": "https://gitlab.com/group/other.git", "ref": "v1.2"}],
    )
    assert config.models == [
        ModelConfig(name="google/gemma-2-9b"),
        ModelConfig(name="gpt2", var_name="small"),
    ]
    assert config.repos == [
        RepoConfig(url="org/repo"),
        RepoConfig(url="https://gitlab.com/group/other.git", ref="v1.2"),
    ]


def test_peft_adapter_with_base_model() -> None:
    model = ModelConfig(name="user/adapter", is_peft=True, base_model="google/gemma-2-9b-it", hidden=True)
    assert model.is_peft and model.hidden and model.base_model == "google/gemma-2-9b-it"


@pytest.mark.parametrize(
    ("name", "env_id"),
    [
        ("google/gemma-2-9b", "GOOGLE_GEMMA_2_9B"),
        ("meta-llama/Llama-2-7b", "META_LLAMA_LLAMA_2_7B"),
        ("google/gemma-2-9b-it", "GOOGLE_GEMMA_2_9B_IT"),
        ("gpt2", "GPT2"),
        ("Qwen/Qwen2.5-0.5B", "QWEN_QWEN2_5_0_5B"),
    ],
)
def test_model_env_id_naming_rule(name: str, env_id: str) -> None:
    assert ModelConfig(name=name).env_id == env_id


@pytest.mark.parametrize(
    ("url", "clone_url", "dir_name"),
    [
        ("org/repo", "https://github.com/org/repo.git", "repo"),
        (
            "anthropics/transformer-circuits",
            "https://github.com/anthropics/transformer-circuits.git",
            "transformer-circuits",
        ),
        ("https://github.com/org/repo", "https://github.com/org/repo", "repo"),
        ("https://github.com/org/repo.git/", "https://github.com/org/repo.git/", "repo"),
        ("git@github.com:org/tools.git", "git@github.com:org/tools.git", "tools"),
        ("ssh://git@host.example/team/lib.git", "ssh://git@host.example/team/lib.git", "lib"),
        ("file:///srv/git/code.git", "file:///srv/git/code.git", "code"),
    ],
)
def test_repo_clone_url_and_dir_name(url: str, clone_url: str, dir_name: str) -> None:
    repo = RepoConfig(url=url)
    assert repo.clone_url == clone_url
    assert repo.dir_name == dir_name


def test_local_repo_and_model_paths_are_made_absolute(tmp_path: Path) -> None:
    (tmp_path / "my-repo").mkdir()
    (tmp_path / "my-model").mkdir()
    repo = RepoConfig(url="./my-repo")
    model = ModelConfig(name="./my-model")
    assert repo.url == str(tmp_path / "my-repo") == repo.clone_url
    assert repo.dir_name == "my-repo"
    assert model.name == str(tmp_path / "my-model")


@pytest.mark.parametrize("gpu", sorted(GPU_CATALOGUE))
def test_every_catalogue_gpu_is_accepted(gpu: str) -> None:
    assert SandboxConfig(gpu=gpu, gpu_count=2).gpu == gpu


@pytest.mark.parametrize(
    "requirement",
    [
        "torch",
        "torch>=2.1",
        "transformers[torch]==4.44.0",
        "numpy; python_version >= '3.9'",
        "git+https://github.com/org/pkg.git@main",
        "https://example.com/pkg-1.0-py3-none-any.whl",
        "./local_pkg",
    ],
)
def test_valid_requirements(requirement: str) -> None:
    assert SandboxConfig(python_packages=[requirement]).python_packages == [requirement]


@pytest.mark.parametrize("revision", ["main", "v1.0", "refs/pr/1", "a" * 40, "release/2024-01"])
def test_valid_revisions(revision: str) -> None:
    assert ModelConfig(name="gpt2", revision=revision).revision == revision
    assert RepoConfig(url="org/r", ref=revision).ref == revision


def test_local_files_and_dirs_as_pairs_or_mappings(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "d").mkdir()
    config = SandboxConfig(
        local_files=[("./a.txt", "w/a.txt")],
        local_dirs=[{"local": "d", "remote": "w/d"}],
    )
    assert config.local_files == [(str(tmp_path / "a.txt"), "w/a.txt")]
    assert config.local_dirs == [(str(tmp_path / "d"), "w/d")]


def test_a_cpu_config_passes_preflight_on_the_local_provider() -> None:
    assert preflight(SandboxConfig(python_packages=["numpy"], env={"A": "1"})).secrets == {}


# --- secrets --------------------------------------------------------------------------------
def test_secrets_resolved_from_env_and_dotenv_env_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("FROM_FILE=file-value\nBOTH=file-loses\n")
    monkeypatch.setenv("FROM_ENV", "env-value")
    monkeypatch.setenv("BOTH", "env-wins")
    monkeypatch.delenv("FROM_FILE", raising=False)
    config = SandboxConfig(secrets=["FROM_ENV", "FROM_FILE", "BOTH"])
    assert preflight(config).secrets == {
        "FROM_ENV": "env-value",
        "FROM_FILE": "file-value",
        "BOTH": "env-wins",
    }


def test_secrets_from_another_dotenv_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "conf" / "secrets.env"
    other.parent.mkdir()
    other.write_text("ONLY_THERE=x\n")
    monkeypatch.delenv("ONLY_THERE", raising=False)
    assert resolve_secrets(["ONLY_THERE"], dotenv=other) == {"ONLY_THERE": "x"}
    assert resolve_secrets([], dotenv=None) == {}


def test_dotenv_parsing(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text(
        "# a comment\n"
        "PLAIN=plain\n"
        "export EXPORTED=exp\n"
        "SPACED = spaced value \n"
        'DOUBLE="a # not a comment"\n'
        "SINGLE='single'  # trailing comment\n"
        'QUOTED_COMMENT="quoted" # trailing comment\n'
        "COMMENTED=value # trailing comment\n"
        "EQUALS=a=b=c\n"
        "EMPTY=\n"
        "not an assignment\n"
    )
    assert read_dotenv(path) == {
        "PLAIN": "plain",
        "EXPORTED": "exp",
        "SPACED": "spaced value",
        "DOUBLE": "a # not a comment",
        "SINGLE": "single",
        "QUOTED_COMMENT": "quoted",
        "COMMENTED": "value",
        "EQUALS": "a=b=c",
        "EMPTY": "",
    }
    assert read_dotenv(tmp_path / "missing.env") == {}


# --- schema and round trips -----------------------------------------------------------------
@pytest.mark.parametrize("cls", [SandboxConfig, ExperimentConfig])
def test_json_schema_describes_every_field(cls: type[SandboxConfig]) -> None:
    schema = cls.model_json_schema()
    assert set(schema["properties"]) == set(cls.model_fields)
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"{cls.__name__}.{name} has no description"
    for model in ("ModelConfig", "RepoConfig"):
        definition = schema["$defs"][model]
        assert definition["additionalProperties"] is False
        for name, prop in definition["properties"].items():
            assert prop.get("description"), f"{model}.{name} has no description"
    assert schema["additionalProperties"] is False
    assert schema["properties"]["timeout"]["maximum"] == 7 * 24 * 3600
    json.dumps(schema)  # serialisable as is


def test_json_schema_accepts_a_valid_config_and_rejects_an_unknown_field() -> None:
    fastjsonschema = pytest.importorskip("fastjsonschema")
    validate = fastjsonschema.compile(ExperimentConfig.model_json_schema())
    good = {"name": "x", "gpu": "A100", "models": [{"name": "gpt2"}], "timeout": 60}
    assert validate(good) == good
    with pytest.raises(fastjsonschema.JsonSchemaException):
        validate({"models": [{"name": "gpt2", "dtype": "bf16"}]})
    with pytest.raises(fastjsonschema.JsonSchemaException):
        validate({"timeout": 8 * 24 * 3600})


def _full_config(tmp_path: Path) -> SandboxConfig:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "d").mkdir()
    return SandboxConfig(
        gpu="A100-80GB",
        gpu_count=2,
        execution_mode="cli",
        models=[
            "google/gemma-2-9b-it",
            ModelConfig(
                name="user/adapter", var_name="adapter", is_peft=True, base_model="google/gemma-2-9b-it"
            ),
        ],
        repos=[RepoConfig(url="org/repo", ref="v1", install="pip install -e .[dev]")],
        python_packages=["torch>=2.1", "transformers"],
        system_packages=["git", "libgl1=1.7.0-1"],
        secrets=["HF_TOKEN"],
        env={"A": "1"},
        timeout=7200,
        local_files=[("a.txt", "w/a.txt")],
        local_dirs=[("d", "w/d")],
        debug=True,
        provider="local",
        provider_options={"anything": [1, 2]},
    )


def test_round_trip_model_dump_model_validate(tmp_path: Path) -> None:
    config = _full_config(tmp_path)
    assert SandboxConfig.model_validate(config.model_dump()) == config
    assert SandboxConfig.model_validate(json.loads(config.model_dump_json())) == config
    assert SandboxConfig.model_validate_json(config.model_dump_json()) == config


def test_experiment_config_drops_its_name_for_the_sandbox_config(tmp_path: Path) -> None:
    base = _full_config(tmp_path)
    experiment = ExperimentConfig.model_validate({**base.model_dump(), "name": "exp-1"})
    assert experiment.name == "exp-1"
    assert experiment.sandbox_config() == base
    assert type(experiment.sandbox_config()) is SandboxConfig
