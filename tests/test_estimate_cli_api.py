"""``zeroadvisor estimate`` and ``zeroadvisor.estimate()`` give the same answer for the same inputs (issue 33):
the same numbers where the GPU count is given (as --gpus/gpus=, or by an Accelerate config's num_processes), the
same refusal where nothing gives it (the partitions depend on it: neither assumes 1 GPU), and the config is
positional on the command line as lint and check take it (--config/-c, the old spelling, still works)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import zeroadvisor
from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.cli import options
from zeroadvisor.inputs.values import KEYWORDS

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_configs"
# what the command line adds to the refusal: it reads the project configuration, the API does not
PROJECT_HINT = " (or gpus under [tool.zeroadvisor.cluster] in pyproject.toml)"
# The command line also times each option, which the API's estimate() does only with step_times=True: without it, the
# step times and the machine facts they assumed are left out of the comparison, the memory answer is compared whole.
STEP_TIME_INPUTS = {"efficiency", "inter_node_bandwidth", "cpu_cores", "nvme_bandwidth", "launcher", "gpu_variant"}

CASES = {
    # the GPU count given to both
    "gpus given": ("zero2_bf16.json", {"params": "7B", "gpus": 8, "gpu": "A100-SXM4-80GB", "seq_len": 2048}),
    "gpus given, no config": (None, {"params": "7B", "gpus": 2, "gpu_memory": "24GiB"}),
    # the Accelerate config's num_processes (8) gives it to both
    "gpus from the accelerate config": ("accelerate_zero3.yaml", {"params": "7B", "gpu": "H100-SXM5-80GB"}),
    # nothing gives it: both refuse
    "gpus missing": ("zero2_bf16.json", {"params": "7B", "gpu": "A100-SXM4-80GB"}),
    "gpus missing, no config": (None, {"params": "7B"}),
}


def _flags(keywords: dict) -> list[str]:
    spelling = options.ESTIMATE.spelling()
    return [word for name, value in keywords.items() for word in (spelling.label(name), str(value))]


def _memory(answer: dict) -> dict:
    stages = [{key: value for key, value in stage.items() if not key.startswith("throughput")}
              for stage in answer["stages"]]
    assumed = [entry for entry in answer["assumed"] if entry["name"] not in STEP_TIME_INPUTS]
    return {**answer, "stages": stages, "assumed": assumed}


def _api(config: str | None, keywords: dict) -> tuple[str, object]:
    try:
        result = zeroadvisor.estimate(config, **keywords)
    except zeroadvisor.UsageError as err:
        return "refused", str(err)
    return "answered", json.loads(json.dumps(result.to_dict()))


def _cli(cli, tmp_path: Path, config: str | None, keywords: dict) -> tuple[str, object]:
    # in a folder without a project configuration, which only the command line reads
    result = cli("estimate", *([config] if config else []), *_flags(keywords), "--format", "json", cwd=tmp_path)
    if result.returncode == 2:
        assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
        return "refused", result.stderr.removeprefix("zeroadvisor: ").rstrip("\n")
    assert result.returncode == 0, result.stderr
    return "answered", json.loads(result.stdout)


@pytest.mark.parametrize("case", CASES)
def test_the_command_line_and_the_api_give_the_same_answer(cli, tmp_path, case):
    name, keywords = CASES[case]
    config = str(SAMPLES / name) if name else None
    api_outcome, api_answer = _api(config, keywords)
    cli_outcome, cli_answer = _cli(cli, tmp_path, config, keywords)
    assert api_outcome == cli_outcome == ("refused" if case.startswith("gpus missing") else "answered")
    if api_outcome == "answered":
        assert isinstance(api_answer, dict) and isinstance(cli_answer, dict)
        assert _memory(cli_answer) == _memory(api_answer)
        assert api_answer["stages"] and any(stage["configured"] for stage in api_answer["stages"]) == bool(name)
        expected = 8 if "accelerate" in case else keywords["gpus"]
        assert api_answer["cluster"]["gpus"] == expected
    else:
        # one message, each naming the input as its caller gives it: --gpus on the command line, gpus= in Python
        assert api_answer == f"give {KEYWORDS.ask('gpus')}"
        assert cli_answer == f"give {options.ESTIMATE.spelling().ask('gpus')}{PROJECT_HINT}"


@pytest.mark.parametrize("case", [c for c in CASES if not c.startswith("gpus missing")])
def test_with_step_times_the_api_gives_the_whole_answer_of_the_command_line(cli, tmp_path, case):
    """``step_times=True`` times each option as the command does: the answers are equal whole, the step times and
    the machine facts they assumed included."""
    name, keywords = CASES[case]
    config = str(SAMPLES / name) if name else None
    answer = json.loads(zeroadvisor.estimate(config, step_times=True, **keywords).report("json"))
    outcome, cli_answer = _cli(cli, tmp_path, config, keywords)
    assert outcome == "answered" and answer == cli_answer
    assert any(key.startswith("throughput") for stage in answer["stages"] for key in stage)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_step_times_must_be_a_bool(value):
    with pytest.raises(zeroadvisor.UsageError, match=r"^step_times: expected True or False"):
        zeroadvisor.estimate(params="7B", gpus=8, gpu="A100-SXM4-80GB", step_times=value)


@pytest.mark.parametrize("spelling", [["--config"], ["-c"], ["--config="]])
def test_the_old_config_flag_still_gives_the_config(cli, tmp_path, spelling):
    config = str(SAMPLES / "zero3_offload.json")
    given = [spelling[0] + config] if spelling[0].endswith("=") else [*spelling, config]
    args = ["--params", "7B", "--gpus", "8", "--format", "json"]
    old = cli("estimate", *given, *args, cwd=tmp_path)
    new = cli("estimate", config, *args, cwd=tmp_path)
    assert old.returncode == new.returncode == 0, old.stderr
    assert old.stdout == new.stdout
    # the configured option is the config's (ZeRO-3 with offload), not DeepSpeed's defaults
    (configured,) = [s for s in json.loads(new.stdout)["stages"] if s["configured"]]
    assert configured["stage"] == 3
    # the same path in both spellings is that path
    both = cli("estimate", config, *given, *args, cwd=tmp_path)
    assert both.returncode == 0 and both.stdout == new.stdout


def test_two_different_configs_are_one_usage_error(cli, tmp_path):
    result = cli("estimate", SAMPLES / "zero2_bf16.json", "--config", SAMPLES / "zero3_offload.json",
                 "--params", "7B", "--gpus", "8", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "zeroadvisor: give CONFIG or --config, not both\n"


def test_help_shows_the_positional_config_and_hides_the_old_flag(cli):
    text = cli("estimate", "--help", columns=100).stdout
    assert "[CONFIG]" in text.splitlines()[0]
    assert "--config" not in text and "-c," not in text


def test_a_second_positional_config_is_a_usage_error(cli, tmp_path):
    result = cli("estimate", SAMPLES / "zero2_bf16.json", SAMPLES / "zero3_offload.json", "--params", "7B",
                 "--gpus", "8", cwd=tmp_path)
    assert result.returncode == 2 and "unexpected extra argument" in result.stderr
