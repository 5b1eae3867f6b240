"""seer-slurm's options, without a cluster."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from seer_slurm.options import SlurmOptions, gres_type
from seer_slurm.provider import _limit_minutes, job_minutes, sbatch_args

pytestmark = pytest.mark.unit


def test_options_reach_compute_nodes_through_the_login_node() -> None:
    options = SlurmOptions(host="login.example", user="me", key_file="/k")
    node = options.node("10.1.2.3", "/kh")
    assert node.jump is not None and node.jump.host == "login.example" and node.host == "10.1.2.3"
    assert node.address == "me@10.1.2.3:22 via me@login.example:22"


def test_gres_types_default_and_mapped() -> None:
    assert gres_type("A100", {}) == "a100"
    assert gres_type("A100-80GB", {}) == "a100_80gb"
    assert gres_type("H100", {"H100": "h100_sxm"}) == "h100_sxm"


def test_sbatch_args() -> None:
    options = SlurmOptions(host="h", partition="gpu", account="lab", qos="high", sbatch_args=["--mem=8G"])
    args = sbatch_args(options, "slurm-0123456789ab", 125, "A100", 2)
    assert "--job-name=seer-slurm-0123456789ab" in args and "--comment=seer" in args
    assert f"--time={job_minutes(125)}" in args and job_minutes(125) == 4
    assert {"--partition=gpu", "--account=lab", "--qos=high", "--gres=gpu:a100:2"} <= set(args)
    assert args[-1] == "--mem=8G"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"sbatch_args": ["--time=5"]}, "--time is seer's"),
        ({"sbatch_args": ["mem=5"]}, "is not an option"),
        ({"partition": "-x"}, "not a SLURM name"),
        ({"gres_types": {"A100": "a 100"}}, "not a GRES type"),
        ({"node_host_key_policy": "never"}, "node_host_key_policy"),
    ],
)
def test_bad_options(raw: dict, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        SlurmOptions(host="h", **raw)


def test_partition_limits() -> None:
    assert _limit_minutes("2:00:00") == 120
    assert _limit_minutes("10:00") == 10
    assert _limit_minutes("1-00:00:00") == 1440
    assert _limit_minutes("infinite") is None


def test_the_fetcher_is_told_apart() -> None:
    from seer_slurm.provider import _is_fetcher

    assert _is_fetcher(["env", "--", "/v/bin/python", "-m", "seer.runtime.fetch"])
    assert _is_fetcher(["/v/bin/python", "-m", "seer.runtime.fetch"])
    assert not _is_fetcher(["env", "--", "python", "-c", "-m seer.runtime.fetch"])
