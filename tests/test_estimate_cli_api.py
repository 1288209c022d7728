"""The command line and the Python API give the same answer for the same inputs (issue 33).

``zeroadvisor estimate`` and ``zeroadvisor.estimate()``: the same numbers where the GPU count is given (as
--gpus/gpus=, or by an Accelerate config's num_processes), the same refusal where nothing gives it (the partitions
depend on it: neither assumes 1 GPU), and the config is positional on the command line as lint and check take it
(--config/-c, the old spelling, still works). ``check`` and ``lint``: the API's ``report("json")`` is the command's
``--format json``, with and without the GPU count. Both make the same typed Request (inputs/request.py) for the
same inputs, and refuse a choice outside its closed set in one line listing the same choices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import zeroadvisor
from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor import api as api_module
from zeroadvisor.cli import options
from zeroadvisor.inputs import run as inputs_run
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.request import ENUMS, INPUT_NAMES, Request
from zeroadvisor.inputs.values import KEYWORDS
from zeroadvisor.lint.context import Integration
from zeroadvisor.vocab import Precision, Stage

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


def _flags(keywords: dict, command: options.CommandSpec = options.ESTIMATE) -> list[str]:
    spelling = command.spelling()
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


# -- check and lint: the API's report("json") is the command's --format json -----------------------------------

CHECK_CASES = {
    "gpus given": ("zero2_bf16.json", {"params": "7B", "gpus": 8, "gpu": "A100-SXM4-80GB", "seq_len": 2048}),
    "gpus given, a finding": ("zero3_offload.json", {"params": "7B", "gpus": 16, "gpu_memory": "40GiB",
                                                     "cpu_memory": "512GiB", "precision": "bf16"}),
    "gpus from the accelerate config": ("accelerate_zero3.yaml", {"params": "7B", "gpu": "H100-SXM5-80GB"}),
    "gpus missing": ("zero2_bf16.json", {"params": "7B", "gpu": "A100-SXM4-80GB"}),
}


def _outcome(result) -> tuple[str, str]:
    """The command's answer: its JSON, or the one line it refused with."""
    if result.returncode == 2:
        assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
        return "refused", result.stderr.removeprefix("zeroadvisor: ").rstrip("\n")
    return "answered", result.stdout


def _check_exit(report: zeroadvisor.CheckReport) -> int:
    """The exit code the command gives the API's report (cli/commands.py _check_exit at --fail-on error)."""
    return 1 if report.fails() else 5 if report.verdict in ("unknown", None) else 0


@pytest.mark.parametrize("case", CHECK_CASES)
def test_check_the_command_line_and_the_api_give_the_same_report(cli, tmp_path, case):
    name, keywords = CHECK_CASES[case]
    config = str(SAMPLES / name)
    report = None
    try:
        report = zeroadvisor.check(config, **keywords)
        api = ("answered", report.report("json"))
    except zeroadvisor.UsageError as err:
        api = ("refused", str(err))
    result = cli("check", config, *_flags(keywords, options.CHECK), "--format", "json", cwd=tmp_path)
    command = _outcome(result)
    assert api[0] == command[0] == ("refused" if case == "gpus missing" else "answered")
    if report is not None:
        assert api[1] == command[1]  # byte for byte: the same document
        assert result.returncode == _check_exit(report)
        answer = json.loads(api[1])["estimate"]
        assert answer["stages"] and answer["cluster"]["gpus"] == keywords.get("gpus", 8)
    else:  # neither assumes a GPU count: the same refusal, each naming the input its own way
        assert api[1] == f"give {KEYWORDS.ask('gpus')}"
        assert command[1] == f"give {options.CHECK.spelling().ask('gpus')}{PROJECT_HINT}"


@pytest.mark.parametrize("gpus", [None, 3, 8])
@pytest.mark.parametrize("name", ["zero2_bf16.json", "zero3_offload.json", "accelerate_zero3.yaml"])
def test_lint_the_command_line_and_the_api_give_the_same_report(cli, tmp_path, name, gpus):
    """With --gpus/gpus= the batch is checked exactly (ZA2xx on a world size the batch does not divide by)."""
    config = str(SAMPLES / name)
    api = zeroadvisor.lint(config, gpus=gpus).report("json")
    result = cli("lint", config, *(["--gpus", str(gpus)] if gpus else []), "--format", "json", cwd=tmp_path)
    assert result.returncode in (0, 1) and result.returncode == int(zeroadvisor.lint(config, gpus=gpus).fails())
    assert api == result.stdout
    assert json.loads(api)["files"] == 1


def test_lint_with_a_world_size_the_batch_does_not_divide_by_gives_the_same_finding(cli, tmp_path):
    """A case where --gpus changes the answer: both see the same finding, and only with the GPU count."""
    (tmp_path / "ds.json").write_text('{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4}')
    config = str(tmp_path / "ds.json")
    without, with_gpus = (zeroadvisor.lint(config, gpus=gpus) for gpus in (None, 3))
    assert without.findings == [] and with_gpus.findings
    command = cli("lint", config, "--gpus", "3", "--format", "json", cwd=tmp_path)
    assert command.stdout == with_gpus.report("json")


# -- one request, from either side ----------------------------------------------------------------------------

@pytest.fixture
def requests_built(monkeypatch) -> list[Request]:
    """Each Request the one builder receives (the builder itself runs)."""
    built: list[Request] = []
    real = inputs_run.build

    def recording(request: Request, **kwargs):
        built.append(request)
        return real(request, **kwargs)

    monkeypatch.setattr(inputs_run, "build", recording)
    return built


CHECK_KEYWORDS = {"params": "7B", "gpus": 8, "gpu": "A100-SXM4-80GB", "seq_len": 2048, "precision": "bf16",
                  "stage": 3, "integration": "hf-trainer", "micro_batch": 2, "activation_checkpointing": "full"}


AUTO = ('{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "train_batch_size": "auto", '
        '"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": "auto"}}')


def test_the_command_line_and_the_api_make_the_same_request(cli, tmp_path, requests_built):
    (tmp_path / "ds.json").write_text(AUTO)  # the shape inputs fill its "auto"
    config = str(tmp_path / "ds.json")
    zeroadvisor.check(config, **CHECK_KEYWORDS)
    result = cli("check", config, *_flags(CHECK_KEYWORDS, options.CHECK), "--format", "json", cwd=tmp_path)
    assert result.returncode == 5, result.stderr  # built and run (the verdict unknown: a parameter count alone)
    api, command = requests_built
    expected = Request(Command.CHECK, config=config, params="7B", gpus=8, gpu="A100-SXM4-80GB", seq_len=2048,
                       precision=Precision.BF16, stage=Stage.WEIGHTS, integration=Integration.HF_TRAINER,
                       micro_batch=2, activation_checkpointing="full")
    # the command line's choices arrive as their members (the API's as the words, equal to them)
    assert isinstance(command.precision, Precision) and command.stage is Stage.WEIGHTS
    assert isinstance(command.integration, Integration)
    for name in expected.inputs():
        if name == "config":  # the command line's CONFIG takes several: a tuple of one
            assert api.config == expected.config and command.config == (config,)
        elif getattr(expected, name) is not None:
            assert getattr(api, name) == getattr(command, name) == getattr(expected, name), name
    # the API's interface is every input; the command line's is check's parameters, in their order
    assert api.inputs() == expected.inputs() and command.takes[0] == "config"
    assert set(command.takes) == {p.name for p in options.CHECK.params if p.alias_of is None}


def test_one_request_builds_the_same_inputs_whoever_spells_it():
    """A Request built with the command line's spelling and with the keywords': the same resolved inputs."""
    request = Request(Command.CHECK, config=str(SAMPLES / "zero2_bf16.json"), params="7B", gpus=8,
                      gpu="A100-SXM4-80GB", precision=Precision.BF16, stage=Stage.GRADIENTS)
    flags = inputs_run.build(request, spelling=options.CHECK.spelling())
    keywords = inputs_run.build(request)
    for name in ("command", "configs", "shape", "cluster", "accounting", "integration", "output", "rules"):
        assert getattr(flags, name) == getattr(keywords, name), name
    assert flags.command is Command.CHECK and flags.shape.zero_stage == 2 and flags.shape.precision == "bf16"


def test_every_closed_choice_of_the_command_line_is_its_enum():
    """Each choice text names a member of the enum it becomes (cli/request.py); a command may take fewer (lint's
    formats), and apart from the formats every member is a choice."""
    from zeroadvisor.inputs.request import member

    for command in (options.LINT, options.ESTIMATE, options.CHECK):
        for param in command.params:
            if param.name in ENUMS:
                choices = param.choice_values() or ()
                assert [str(member(param.name, text).value) for text in choices] == list(choices)
                if param.name != "format":
                    assert len(choices) == len(ENUMS[param.name]), (command.name, param.name)


# -- a value outside a closed set: one line from both ------------------------------------------------------------

INVALID = [
    ("lint", "integration", "bogus", {}),
    ("check", "integration", "bogus", CLUSTER := {"params": "7B", "gpus": 8, "gpu": "A100-SXM4-80GB"}),
    ("check", "accounting", "bogus", CLUSTER),
]


def _choices(text: str) -> list[str]:
    return [word.strip("'") for word in text.split(", ")]


@pytest.mark.parametrize("command, name, value, keywords", INVALID)
def test_a_value_outside_its_set_is_one_line_listing_the_same_choices(cli, tmp_path, command, name, value, keywords):
    import re

    config = str(SAMPLES / "zero2_bf16.json")
    function = getattr(zeroadvisor, command)
    with pytest.raises(zeroadvisor.UsageError) as raised:
        function(config, **keywords, **{name: value})
    api = str(raised.value)
    spec = {"lint": options.LINT, "check": options.CHECK}[command]
    result = cli(command, config, *_flags(keywords, spec), spec.spelling().label(name), value, cwd=tmp_path)
    line = result.stderr
    assert result.returncode == 2 and result.stdout == "" and line.count("\n") == 1 and "\n" not in api
    # each names the input as its caller spells it, and the value
    assert api.startswith(f"{name}: ") and f"'{spec.spelling().label(name)}'" in line
    assert repr(value) in api and repr(value) in line
    api_choices = re.search(r"expected one of (.*), got", api)
    cli_choices = re.search(r"is not one of (.*)\. \(see", line)
    assert api_choices and cli_choices
    assert _choices(api_choices.group(1)) == _choices(cli_choices.group(1))


@pytest.mark.parametrize("call", [
    lambda: zeroadvisor.estimate(params="7B", gpus=8, sequence=4096),
    lambda: zeroadvisor.check(str(SAMPLES / "zero2_bf16.json"), params="7B", gpus=8, gpu="A100-SXM4-80GB",
                              sequence=4096),
    lambda: zeroadvisor.preflight(str(SAMPLES / "zero2_bf16.json"), params="7B", gpus=8, gpu="A100-SXM4-80GB",
                                  sequence=4096),
])
def test_a_keyword_the_request_has_no_field_for_is_one_line_naming_the_training_keywords(call):
    """The Python API's **training becomes Request fields: a keyword with no field is refused before, in one line."""
    with pytest.raises(zeroadvisor.UsageError, match=r"^unknown keyword 'sequence'; the training shape takes seq_len"):
        call()


def test_the_command_names_the_run_commands_only():
    assert [command.value for command in Command] == ["lint", "estimate", "check", "preflight"]
    assert Command.named("check") is Command.CHECK and Command.named("rules") is None
    # the command line's commands that run on a config are these, by the same names
    assert {spec.name for spec in options.COMMANDS if Command.named(spec.name)} == {"lint", "estimate", "check"}


def test_the_first_bad_keyword_in_the_functions_order_is_the_one_reported():
    """Each value is checked in the order its interface lists it: lint's integration before its gpus, check's gpus
    before its integration (the Request's field order)."""
    config = str(SAMPLES / "zero2_bf16.json")
    with pytest.raises(zeroadvisor.UsageError, match=r"^integration: expected one of"):
        zeroadvisor.lint(config, integration="bogus", gpus=0)
    with pytest.raises(zeroadvisor.UsageError, match=r"^gpus: expected a whole number"):
        zeroadvisor.check(config, params="7B", gpus=0, gpu="A100-SXM4-80GB", integration="bogus")
    assert set(api_module._LINT_KEYWORDS) <= set(INPUT_NAMES)
