"""``seer.load_config``: YAML and JSON files, paths relative to the file, errors with file and line;
and the shipped example configs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from seer import ConfigError, ExecutionMode, ExperimentConfig, ModelConfig, RepoConfig, Sandbox, load_config
from seer.preflight import preflight
from seer.providers.local import provider as local_provider
from seer.providers.local.env import unsatisfied

pytestmark = pytest.mark.unit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SEER_PROVIDER", raising=False)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_yaml_config(tmp_path: Path) -> None:
    path = write(
        tmp_path / "exp.yaml",
        """
        name: exp
        gpu: A100
        gpu_count: 2
        execution_mode: CLI
        models:
          - google/gemma-2-9b-it
          - name: user/adapter
            var_name: adapter
            is_peft: true
            base_model: google/gemma-2-9b-it
        repos:
          - org/repo
        python_packages: [torch, transformers]
        env: {A: "1"}
        timeout: 120
        """,
    )
    config = load_config(path)
    assert isinstance(config, ExperimentConfig)
    assert config.name == "exp"
    assert (config.gpu, config.gpu_count, config.timeout) == ("A100", 2, 120)
    assert config.execution_mode is ExecutionMode.CLI
    assert config.models == [
        ModelConfig(name="google/gemma-2-9b-it"),
        ModelConfig(name="user/adapter", var_name="adapter", is_peft=True, base_model="google/gemma-2-9b-it"),
    ]
    assert config.repos == [RepoConfig(url="org/repo")]
    assert config.python_packages == ["torch", "transformers"]
    assert config.env == {"A": "1"}


def test_json_config_equals_the_same_yaml(tmp_path: Path) -> None:
    data = {"name": "exp", "gpu": "H100", "models": ["gpt2"], "secrets": ["HF_TOKEN"], "timeout": 60}
    from_json = load_config(write(tmp_path / "exp.json", json.dumps(data, indent=2)))
    from_yaml = load_config(
        write(
            tmp_path / "exp.yaml", "name: exp\ngpu: H100\nmodels: [gpt2]\nsecrets: [HF_TOKEN]\ntimeout: 60\n"
        )
    )
    assert from_json == from_yaml
    assert from_json.models == [ModelConfig(name="gpt2")]


@pytest.mark.parametrize("text", ["", "# only a comment\n"])
def test_empty_file_is_the_defaults(tmp_path: Path, text: str) -> None:
    assert load_config(write(tmp_path / "empty.yaml", text)) == ExperimentConfig()


def test_relative_paths_are_taken_from_the_files_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "project" / "conf"
    (conf / "data").mkdir(parents=True)
    (conf / "data" / "prompts.txt").write_text("p")
    (conf / "repo").mkdir()
    (conf / "other-repo").mkdir()
    (conf / "weights").mkdir()
    (tmp_path / "project" / "shared").mkdir()
    path = write(
        conf / "seer.yaml",
        """
        local_files:
          - [data/prompts.txt, prompts.txt]
          - {local: ./data/prompts.txt, remote: again.txt}
        local_dirs:
          - [../shared, shared]
        repos:
          - ./repo
          - {url: ./other-repo, ref: main}
        models:
          - ./weights
        """,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config(path)
    assert config.local_files == [
        (str(conf / "data" / "prompts.txt"), "prompts.txt"),
        (str(conf / "data" / "prompts.txt"), "again.txt"),
    ]
    assert config.local_dirs == [(str(tmp_path / "project" / "shared"), "shared")]
    assert [r.url for r in config.repos] == [str(conf / "repo"), str(conf / "other-repo")]
    assert config.models[0].name == str(conf / "weights")


def test_hub_ids_and_absolute_paths_are_not_rebased(tmp_path: Path) -> None:
    data = tmp_path / "abs.txt"
    data.write_text("x")
    path = write(
        tmp_path / "sub" / "seer.yaml",
        f"""
        models: [google/gemma-2-9b]
        repos: [org/repo]
        local_files: [[{data}, abs.txt]]
        """,
    )
    config = load_config(path)
    assert config.models[0].name == "google/gemma-2-9b"
    assert config.repos[0].url == "org/repo"
    assert config.local_files == [(str(data), "abs.txt")]


# --- errors with file and line ------------------------------------------------------------------
def _error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return info.value


DEEP = """
name: deep
gpu: A100
models:
  - name: google/gemma-2-9b-it
    var_name: model
  - name: user/adapter
    var_name: adapter
    hidden: true
    base_model: google/gemma-2-9b-it
python_packages:
  - torch
"""


def test_a_bad_field_deep_in_yaml_names_file_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path / "deep.yaml", DEEP)
    err = _error(path)
    [problem] = err.problems
    assert problem.field == "models[1].base_model"
    assert problem.file == str(path)
    assert problem.line == 9  # the line of `base_model:` under models[1]
    assert f"{path}:9: models[1].base_model: base_model is only used with is_peft=True" in str(err)


def test_unknown_field_deep_in_yaml_has_its_line(tmp_path: Path) -> None:
    path = write(tmp_path / "deep.yaml", DEEP.replace("    hidden: true", "    load_in_8bit: true"))
    err = _error(path)
    assert [(p.field, p.line) for p in err.problems] == [("models[1].load_in_8bit", 8)]
    assert "seer loads models itself" in str(err)


def test_each_of_several_problems_has_its_own_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "many.yaml",
        """
        gpu: cpu
        timeout: soon
        secrets:
          - HF_TOKEN
          - 1BAD
        local_files:
          - [nope.txt, w/nope.txt]
        """,
    )
    err = _error(path)
    assert {p.field: p.line for p in err.problems} == {
        "gpu": 1,
        "timeout": 2,
        "secrets[1]": 5,
        "local_files[0]": 7,
    }
    assert all(p.file == str(path) for p in err.problems)


def test_a_missing_required_field_points_at_its_item(tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", "models:\n  - gpt2\n  - var_name: other\n")
    [problem] = _error(path).problems
    assert (problem.field, problem.line) == ("models[1].name", 3)
    assert "required" in problem.message


def test_json_errors_have_lines_too(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.json", '{\n  "gpu": "A100",\n  "models": [\n    {"name": "a/b", "dtype": "x"}\n  ]\n}\n'
    )
    [problem] = _error(path).problems
    assert (problem.field, problem.line, problem.file) == ("models[0].dtype", 4, str(path))


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", "gpu: A100\nmodels: [gpt2\ntimeout: 60\n")
    err = _error(path)
    [problem] = err.problems
    assert problem.file == str(path)
    assert problem.line == 3
    assert "not valid YAML" in problem.message
    assert "starts on line 2" in problem.message
    assert f"{path}:3:" in str(err)


def test_yaml_bad_indentation(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", "models:\n  - name: gpt2\n   var_name: x\n")
    [problem] = _error(path).problems
    assert problem.line == 3 and "not valid YAML" in problem.message


def test_json_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.json", '{\n  "gpu": "A100",\n}\n')
    [problem] = _error(path).problems
    assert problem.line == 3 and "not valid JSON" in problem.message


def test_a_key_given_twice_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "twice.yaml", "models:\n  - name: gpt2\n    revision: main\n    revision: dev\n")
    [problem] = _error(path).problems
    assert (problem.field, problem.line) == ("models[0].revision", 4)
    assert "given twice (also on line 3)" in problem.message


@pytest.mark.parametrize(
    ("text", "kind"), [("- gpu: A100\n", "list"), ("just a string\n", "string"), ("42\n", "number")]
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    path = write(tmp_path / "top.yaml", text)
    [problem] = _error(path).problems
    assert problem.file == str(path) and problem.line == 1
    assert f"top level must be a mapping of fields (gpu: ..., models: ...), not a {kind}" in problem.message


def test_top_level_json_array(tmp_path: Path) -> None:
    [problem] = _error(write(tmp_path / "top.json", "[1, 2]")).problems
    assert "not a list" in problem.message


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.yaml"
    err = _error(path)
    assert err.problems[0].file == str(path)
    assert "config file not found" in str(err) and str(path) in str(err)


def test_a_directory_is_not_a_config_file(tmp_path: Path) -> None:
    assert "is a directory" in str(_error(tmp_path))


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    assert "not UTF-8" in str(_error(path))


# --- anchors and aliases, hostile documents --------------------------------------------------------
def _alias_bomb(levels: int, width: int) -> str:
    """A "billion laughs" config: each level is a list of ``width`` aliases of the one before, so
    a few hundred bytes expand to ``width ** levels`` strings."""
    lines = ["provider_options:", f"  l0: &l0 [{','.join(['lol'] * width)}]"]
    for i in range(1, levels + 1):
        lines.append(f"  l{i}: &l{i} [{','.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


#: Loads a config in a child process with its memory capped, and prints how long load_config took
#: and what it raised: an alias bomb must not be able to take the test run (or the machine) down.
_LOAD_IN_A_CHILD = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))
from seer import ConfigError, load_config
start = time.perf_counter()
try:
    load_config(sys.argv[1])
    outcome = "accepted"
except ConfigError as exc:
    outcome = str(exc)
print(f"{time.perf_counter() - start:.3f}")
print(outcome)
"""


@pytest.mark.parametrize(("levels", "width", "size"), [(7, 9, 440), (9, 10, 1024)])
@pytest.mark.e2e
def test_a_yaml_alias_bomb_is_refused_in_under_a_second(
    tmp_path: Path, levels: int, width: int, size: int
) -> None:
    text = _alias_bomb(levels, width)
    assert len(text) <= size  # the sizes of the red-team's files: 440 bytes and 1 KB
    path = write(tmp_path / "bomb.yaml", text)
    child = subprocess.run(
        [sys.executable, "-c", _LOAD_IN_A_CHILD, str(path)], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr[-2000:]
    seconds, outcome = child.stdout.split("\n", 1)
    assert float(seconds) < 1.0, f"took {seconds} s to refuse"
    assert f"{path}:" in outcome
    assert "expands to more than 100,000 values" in outcome
    assert "provider_options.l" in outcome  # names the anchor where it blew past the limit


def test_a_huge_config_file_is_refused_for_its_size_not_called_an_alias_bomb(tmp_path: Path) -> None:
    """20 MB of plain YAML (no alias): refused by its size, before any parsing, saying so."""
    path = tmp_path / "huge.yaml"
    line = "  K{}: " + "v" * 60 + "\n"
    path.write_text("env:\n" + "".join(line.format(i) for i in range(300_000)))
    assert path.stat().st_size > 20_000_000
    [problem] = _error(path).problems
    assert problem.file == str(path)
    assert "MiB, over the 1.0 MiB a config file may be" in problem.message, problem.message
    assert "alias" not in problem.message and "billion" not in problem.message


def test_too_many_values_without_aliases_are_not_called_an_alias_bomb(tmp_path: Path) -> None:
    path = write(tmp_path / "many.yaml", "python_packages: [" + ",".join(["x"] * 100_001) + "]\n")
    [problem] = _error(path).problems
    assert problem.field == "python_packages" and "holds more than 100,000 values" in problem.message
    assert "alias" not in problem.message


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        ("python_packages: &x [*x]\n", "python_packages[0]", 1),
        ("provider_options: &opts\n  image: x\n  again: *opts\n", "provider_options.again", 3),
        ("env:\n  A: &a [b, {c: *a}]\n", "env.A[1].c", 2),
    ],
)
def test_a_self_referencing_anchor_is_a_config_error(
    tmp_path: Path, text: str, field: str, line: int
) -> None:
    path = write(tmp_path / "loop.yaml", text)
    [problem] = _error(path).problems
    assert (problem.field, problem.line, problem.file) == (field, line, str(path))
    assert "refers to itself" in problem.message


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.yaml", "provider_options: " + "[" * 3000 + "]" * 3000 + "\n"),
        ("deep.json", '{"provider_options": ' + "[" * 3000 + "]" * 3000 + "}"),
    ],
)
def test_nesting_too_deep_for_the_parser_is_a_config_error(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path / name, text)
    [problem] = _error(path).problems
    assert problem.file == str(path)
    assert "nested too deeply" in problem.message


def test_anchors_and_aliases_still_work_and_errors_under_them_have_lines(tmp_path: Path) -> None:
    ok = write(
        tmp_path / "ok.yaml",
        """
        env: &common
          A: "1"
          B: "2"
        provider_options:
          first: *common
          second: *common
        """,
    )
    config = load_config(ok)
    assert config.env == {"A": "1", "B": "2"}
    assert config.provider_options == {"first": config.env, "second": config.env}
    # An error inside an aliased value is reported at the alias, on the alias's line.
    bad = write(
        tmp_path / "bad.yaml",
        """
        provider_options:
          good: &m {name: gpt2}
        models:
          - *m
          - *m
        """,
    )
    [problem] = _error(bad).problems
    assert (problem.field, problem.line) == ("models[1].var_name", 5)
    assert "already used by models[0]" in problem.message


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("python_packages: &x [*x]\n", "python_packages[0]", "refers to itself"),
        ('env:\n  A: "x\\0y"\n', "env.A", "NUL byte"),
        (
            "models:\n  - gpt2\n  - {name: distilgpt2, var_name: tokenizer}\n",
            "models[1].var_name",
            "tokenizer",
        ),
        ("models:\n  - {name: gpt2, var_name: __builtins__}\n", "models[0].var_name", "'__'"),
        ("local_files:\n  - [data.txt, ../../outside.txt]\n", "local_files[0]", "out of the sandbox"),
        ("repos: ['--upload-pack=touch /tmp/seer-pwned']\n", "repos[0].url", "option"),
    ],
)
def test_seer_up_refuses_a_bad_file_with_exit_2(tmp_path: Path, text: str, field: str, message: str) -> None:
    from seer import cli
    from typer.testing import CliRunner

    (tmp_path / "data.txt").write_text("data")
    path = write(tmp_path / "experiment.yaml", text)
    result = CliRunner().invoke(cli.create_app(), ["up", str(path)], prog_name="seer")
    assert result.exit_code == 2, result.output
    assert str(path) in result.stderr and field in result.stderr and message in result.stderr
    assert "Traceback" not in result.output and result.stdout == ""


# --- the shipped examples -------------------------------------------------------------------------
def test_example_experiment_yaml() -> None:
    config = load_config(EXAMPLES / "experiment.yaml")
    assert config.name == "my-experiment"
    assert config.gpu == "A100-80GB"
    assert config.gpu_count == 2
    assert config.execution_mode is ExecutionMode.NOTEBOOK
    assert config.models == [ModelConfig(name="google/gemma-2-9b-it")]
    assert [(r.url, r.install) for r in config.repos] == [("myorg/my-research-code", True)]
    assert config.repos[0].clone_url == "https://github.com/myorg/my-research-code.git"
    assert {"torch", "transformers"} <= set(config.python_packages)
    assert config.secrets == ["HF_TOKEN"]
    assert config.timeout == 7200
    assert config.provider is None


def test_example_experiment_needs_a_gpu_on_the_local_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_provider, "detect_gpus", lambda: [])
    monkeypatch.setenv("HF_TOKEN", "hf_dummy")
    config = load_config(EXAMPLES / "experiment.yaml")
    with pytest.raises(ConfigError) as info:
        preflight(config, dotenv=None)
    assert info.value.fields == ["gpu"]
    assert "hf_dummy" not in str(info.value)


def test_example_quickstart_yaml() -> None:
    config = load_config(EXAMPLES / "quickstart.yaml")
    assert config.name == "quickstart"
    assert config.provider == "local"
    assert config.gpu is None
    assert config.models == []
    assert config.python_packages and unsatisfied(config.python_packages) == []  # nothing to download
    assert config.timeout <= 3600
    assert preflight(config, dotenv=None).secrets == {}


@pytest.mark.e2e
def test_example_quickstart_runs_on_the_local_provider() -> None:
    config = load_config(EXAMPLES / "quickstart.yaml")
    with Sandbox(config) as sandbox:
        result = sandbox.exec_python("import os, numpy, yaml; print(os.environ['SEER_EXAMPLE'])", timeout=60)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.strip() == "quickstart"
