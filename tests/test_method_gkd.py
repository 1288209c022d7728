"""TRL's GKD (GKDTrainer, examples/scripts/gkd.py): the teacher beside the student, prepared as TRL prepares the
reference (stage 3 kept, else stage 0), the generalized JSD's copies of the logits at the loss (measured with TRL's
own compute_loss: benchmarks/gkd_loss.md), the student's on-policy generation, and what a GKDConfig file says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.launch import parse_launch
from zeroadvisor.config.method import MethodSetup
from zeroadvisor.memory.method import GKD_SCORES_EVERY_POSITION, gkd_copies
from zeroadvisor.vocab import Method, TrainerFamily

REPO = Path(__file__).resolve().parent.parent
GIB = 2**30


@pytest.fixture
def project(tmp_path) -> Path:
    shutil.copy(REPO / "sample_configs" / "zero2_bf16.json", tmp_path / "ds.json")
    (tmp_path / ".git").mkdir()  # the pins' search stops here
    (tmp_path / "requirements.txt").write_text("trl==1.9.0\n")
    return tmp_path


def test_gkd_copies_match_trl_s_own_loss_measured_on_cpu():
    """benchmarks/gkd_loss.json: from TRL 1.7 (every position scored) the estimate's copies are within 3% of the
    measured peak at beta 0.5, 0 and 1; before (the logits sliced from the batch's prompt width), the whole sequence
    counted is a bound: at or above the measured peak (a quarter of each row is prompt there)."""
    from packaging.version import Version

    data = json.loads((REPO / "benchmarks" / "gkd_loss.json").read_text())
    releases = {row["trl"] for row in data["rows"]}
    assert {"0.21.0", "1.9.0"} <= releases
    for row in data["rows"]:
        setup = MethodSetup(method=Method.GKD, trainer=TrainerFamily.TRL, trainer_version=row["trl"],
                            beta=row["beta"])
        predicted = gkd_copies(setup) * row["copy_bytes"]
        if Version(row["trl"]) >= GKD_SCORES_EVERY_POSITION:
            assert abs(predicted / row["peak"] - 1) < 0.03, row
        else:
            assert 1.0 <= predicted / row["peak"] < 1.35, row
    assert gkd_copies(MethodSetup(method=Method.GKD)) == 17  # GKDConfig.beta 0.5 unset


def test_trl_s_gkd_script_and_its_config_are_read():
    """examples/scripts/gkd.py runs GKDTrainer (no CLI command); GKDConfig's teacher_model_name_or_path, lmbda,
    seq_kd, beta and max_new_tokens are read."""
    launch = parse_launch("accelerate launch --num_processes 8 examples/scripts/gkd.py "
                          "--teacher_model_name_or_path Qwen/Qwen2.5-14B --lmbda 0.25 --beta 0.0 --max_new_tokens 256")
    setup = launch.training.method.setup
    assert (setup.method, setup.trainer) == (Method.GKD, TrainerFamily.TRL)
    assert (setup.teacher_model, setup.lmbda, setup.beta) == ("Qwen/Qwen2.5-14B", 0.25, 0.0)
    assert setup.generation.max_completion_length == 256


def _configured(cli, project, *args: str) -> dict:
    result = cli("check", project / "ds.json", "--model", "Qwen/Qwen2.5-7B", "--gpus", "8", "--gpu-memory", "80GiB",
                 "--seq-len", "2048", *args, "-f", "json", cwd=project)
    assert result.stdout, result.stderr
    data = json.loads(result.stdout)
    stage = next(st for st in data["estimate"]["stages"] if st["configured"])
    return {"per_gpu": stage["per_gpu"], "assumed": {a["name"]: a for a in data["estimate"]["assumed"]}}


def test_the_teacher_is_a_row_of_its_own_and_the_jsd_s_copies_are_in_the_activations(cli, project):
    """ZeRO-2 (zero2_bf16.json): the teacher at stage 0, a whole copy of the model named; beta 0.5's JSD holds
    8 copies of the logits more than beta 0's single KL (4 x 2,048 x 152,064 x 2 B each: the config's micro batch
    4); the teacher, beta and lmbda unset are listed as assumed with their keys."""
    (project / "gkd.yaml").write_text("bf16: true\ngradient_checkpointing: true\n")
    default = _configured(cli, project, "--training-args", str(project / "gkd.yaml"), "--trainer", "gkd")
    rows = default["per_gpu"]
    # Qwen2.5-7B as the teacher at stage 0 with the config's optimizer block (TRL 1.9.0's prepare_deepspeed copies
    # it): bf16 weights, fp32 master and Adam's two states, 14 B per parameter
    assert rows["teacher_model"] == 14 * 7_615_616_512, rows
    assert {"teacher_model", "jsd_beta", "lmbda"} <= set(default["assumed"])
    assert default["assumed"]["teacher_model"]["key"] == "teacher_model_name_or_path"
    (project / "gkd.yaml").write_text("bf16: true\ngradient_checkpointing: true\n"
                                      "beta: 0.0\nlmbda: 0.0\nteacher_model_name_or_path: Qwen/Qwen2.5-0.5B\n")
    single = _configured(cli, project, "--training-args", str(project / "gkd.yaml"), "--trainer", "gkd")
    assert rows["activations"] - single["per_gpu"]["activations"] == 8 * 4 * 2048 * 152064 * 2
    assert single["per_gpu"]["teacher_model"] < rows["teacher_model"] / 10  # the 0.5B teacher named
    assert not {"teacher_model", "jsd_beta", "lmbda"} & set(single["assumed"])


def test_gkd_s_teacher_keeps_zero_3_and_lmbda_decides_the_student_s_generation(cli, project):
    """prepare_deepspeed keeps stage 3 for the teacher (its partition per GPU: 2 B x P / 8); the student generates in
    the steps random.random() <= lmbda picks (GKDTrainer.training_step): lmbda 0 never."""
    from zeroadvisor.memory.generation import gkd_generates

    config = json.loads((project / "ds.json").read_text())
    config["zero_optimization"] = {"stage": 3}
    config.pop("optimizer", None)
    (project / "ds.json").write_text(json.dumps(config))
    (project / "gkd.yaml").write_text("bf16: true\ngradient_checkpointing: true\n")
    rows = _configured(cli, project, "--training-args", str(project / "gkd.yaml"), "--trainer", "gkd")["per_gpu"]
    assert rows["teacher_model"] == 2 * 7_615_616_512 // 8, rows
    assert gkd_generates(MethodSetup(method=Method.GKD))  # lmbda 0.5 unset
    assert not gkd_generates(MethodSetup(method=Method.GKD, lmbda=0.0))


def test_ms_swift_s_gkd_stays_a_one_line_error():
    from zeroadvisor.config.training_args import TrainerInputError

    with pytest.raises(TrainerInputError, match="ms-swift's rlhf types"):
        parse_launch("swift rlhf --rlhf_type gkd --model m --teacher_model t")


def test_a_gkd_config_read_alone_is_guessed_as_gkd_and_a_bad_lmbda_is_one_line(project):
    """GKDConfig's own keys point to GKD where nothing names the trainer, before beta (which DPO has too); lmbda
    outside [0, 1] is refused as GKDConfig.__post_init__ refuses it."""
    from zeroadvisor.config.training_args import TrainerInputError
    from zeroadvisor.inputs import run as inputs_run
    from zeroadvisor.inputs.command import Command
    from zeroadvisor.inputs.request import Request

    (project / "gkd.yaml").write_text("beta: 0.1\nteacher_model_name_or_path: Qwen/Qwen2.5-0.5B\n")
    inputs = inputs_run.build(Request(Command.ESTIMATE, config=str(project / "ds.json"), params="7B", gpus=8,
                                      gpu_memory="80GiB", seq_len=1024, training_args=str(project / "gkd.yaml")))
    assert inputs.shape.method.method is Method.GKD
    assert any("guessed from teacher_model_name_or_path" in note for note in inputs.notes), inputs.notes
    (project / "gkd.yaml").write_text("lmbda: 1.5\n")
    with pytest.raises(TrainerInputError,
                       match=r"lmbda in .*gkd.yaml: expected a share from 0 to 1, got 1\.5") as caught:
        inputs_run.build(Request(Command.ESTIMATE, config=str(project / "ds.json"), params="7B", gpus=8,
                                 gpu_memory="80GiB", seq_len=1024, training_args=str(project / "gkd.yaml")))
    assert "\n" not in str(caught.value)


def test_gkd_s_notes_say_the_bound_before_trl_1_7_and_the_teacher_s_engine():
    """Up to TRL 1.6 the whole sequence counted is a bound (the logits are sliced from the batch's prompt width); the
    optimizer block copied up to 1.9.0 is the teacher's engine's, not a reference's."""
    from zeroadvisor.memory.method import method_notes
    from zeroadvisor.model.description import spec_from_params

    policy = spec_from_params(1_000_000_000)
    old = method_notes(MethodSetup(method=Method.GKD, trainer=TrainerFamily.TRL, trainer_version="0.21.0"), True,
                       policy)
    new = method_notes(MethodSetup(method=Method.GKD, trainer=TrainerFamily.TRL, trainer_version="1.9.0"), True,
                       policy)
    assert any("prompt width" in note and "a bound" in note for note in old)
    assert not any("prompt width" in note for note in new)
    assert any("to the teacher's engine" in note for note in new)
    seq = method_notes(MethodSetup(method=Method.GKD, trainer=TrainerFamily.TRL, trainer_version="1.9.0",
                                   seq_kd=True), True, policy)
    assert any("seq_kd" in note and "not counted" in note for note in seq)
