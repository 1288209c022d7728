"""Launch commands: each launcher's world size, the Trainer script's arguments, and ``check -- <command>``.

World sizes are the launchers' documented arithmetic (GPUs x nodes); the flag tables and the script-argument
parsing are compared with the real parsers in tests/oracle/test_hf_fill_oracle.py.
"""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.launch import LaunchError, parse_launch, script_training_args


@pytest.mark.parametrize("command,launcher,world", [
    ("deepspeed --num_gpus 8 train.py", "deepspeed", 8),
    ("deepspeed --num_gpus=4 --num_nodes=2 train.py", "deepspeed", 8),
    ("deepspeed --num_accelerators 2 --master_port 29501 --no_local_rank train.py", "deepspeed", 2),
    ("deepspeed --include localhost:0,1,2 train.py", "deepspeed", 3),
    ("CUDA_VISIBLE_DEVICES=0,1 deepspeed train.py", "deepspeed", 2),
    ("deepspeed train.py", "deepspeed", None),
    ("torchrun --nproc_per_node 8 --nnodes 2 train.py", "torchrun", 16),
    ("torchrun --nproc-per-node=4 --standalone train.py", "torchrun", 4),
    ("torchrun --nnodes 1:4 --nproc_per_node 8 train.py", "torchrun", 32),
    ("python -m torch.distributed.run --nproc_per_node 2 train.py", "torchrun", 2),
    ("accelerate launch --num_processes 16 --num_machines 2 train.py", "accelerate launch", 16),
    ("accelerate launch --multi_gpu --num_processes=4 -m trl.scripts.sft", "accelerate launch", 4),
    ("python train.py", "python", 1),
    ("python3 -u train.py", "python", 1),
    ("/usr/bin/python3.11 -m my_pkg.train", "python", 1),
])
def test_world_size_by_launcher(command, launcher, world):
    parsed = parse_launch(command)
    assert (parsed.launcher, parsed.world_size) == (launcher, world)


def test_script_and_its_arguments():
    parsed = parse_launch("deepspeed --num_gpus 8 --master_port=1234 train.py --deepspeed ds.json --bf16 "
                          "--per_device_train_batch_size=2 --gradient-accumulation-steps 16 --gradient_checkpointing "
                          "--model_name_or_path org/model --model_max_length 2048 --learning_rate 1e-5 "
                          "--data_path data.json --lora_enable")
    args = parsed.training
    assert parsed.script == "train.py"
    assert args.deepspeed == "ds.json" and args.model == "org/model"
    assert args.get("bf16") is True and args.get("per_device_train_batch_size") == 2
    assert args.get("gradient_accumulation_steps") == 16 and args.get("learning_rate") == 1e-5
    assert args.checkpointing is True
    assert (args.sequence_length, args.sequence_key) == (2048, "model_max_length")
    assert args.label("bf16") == "--bf16"
    assert any("--data_path" in note and "--lora_enable" in note for note in args.notes)


@pytest.mark.parametrize("words,value", [
    (["--bf16"], True), (["--bf16", "false"], False), (["--bf16=True"], True), (["--bf16=0"], False),
    (["--bf16", "--fp16"], True),
])
def test_bool_flag_forms(words, value):
    assert parse_launch(["python", "train.py", *words]).training.get("bf16") is value


@pytest.mark.parametrize("key", ["max_seq_length", "block_size", "cutoff_len", "model_max_length"])
def test_sequence_length_says_which_key(key):
    args = parse_launch(["python", "train.py", f"--{key}", "1024"]).training
    assert (args.sequence_length, args.sequence_key) == (1024, key)


def test_arguments_file_with_overrides(tmp_path):
    (tmp_path / "sft.yaml").write_text("stage: sft\nper_device_train_batch_size: 2\ncutoff_len: 1024\n"
                                       "deepspeed: ds.json\n")
    parsed = parse_launch(["torchrun", "--nproc_per_node", "4", "src/train.py", "sft.yaml",
                           "per_device_train_batch_size=8"], cwd=str(tmp_path))
    args = parsed.training
    assert args.project == "llama-factory" and args.get("per_device_train_batch_size") == 8
    assert args.sequence_length == 1024 and args.deepspeed == "ds.json"


def test_hostfile(tmp_path):
    (tmp_path / "hosts").write_text("node-a slots=8\nnode-b slots=8\nnode-c slots=8\n")
    assert parse_launch("deepspeed --hostfile hosts train.py", cwd=str(tmp_path)).world_size == 24
    assert parse_launch("deepspeed -H hosts --num_nodes 2 train.py", cwd=str(tmp_path)).world_size == 16
    assert parse_launch("deepspeed -H hosts --num_nodes 2 --num_gpus 4 train.py", cwd=str(tmp_path)).world_size == 8
    (tmp_path / "bad").write_text("node-a 8\n")
    with pytest.raises(LaunchError, match="bad:1: hostfile line"):
        parse_launch("deepspeed -H bad train.py", cwd=str(tmp_path))


def test_hostfile_not_here_leaves_the_world_size_to_ask_for():
    parsed = parse_launch("deepspeed --hostfile /nonexistent/hostfile --num_gpus 2 train.py")
    assert parsed.world_size is None and "/nonexistent/hostfile" in parsed.world_from
    assert "/nonexistent/hostfile" in parsed.world_missing


def test_hostfile_not_here_with_nodes_and_gpus_stated():
    """apply_num_nodes_and_gpus: the first --num_nodes hosts, --num_gpus each: the file's slots do not matter."""
    parsed = parse_launch("deepspeed --hostfile /nonexistent/hostfile --num_nodes 2 --num_gpus 4 train.py")
    assert (parsed.world_size, parsed.per_node) == (8, 4)
    assert any("/nonexistent/hostfile is not here" in note for note in parsed.notes)


@pytest.mark.parametrize("command,message", [
    ("", "empty"),
    ("srun train.py", "not a launcher"),
    ("accelerate config", "only 'accelerate launch'"),
    ("deepspeed --num_gpus", "needs a value"),
    ("deepspeed --num_gpus eight train.py", "whole number"),
    ("torchrun --nproc_per_node many train.py", "expects a number"),
    ("deepspeed --num_gpus 2", "runs no script"),
    ("python train.py --per_device_train_batch_size", "needs a value"),
    ("python train.py --bf16=maybe", "expected true or false"),
    ("python train.py 'unclosed", "No closing quotation"),
])
def test_bad_commands_are_one_line_errors(command, message):
    with pytest.raises(LaunchError if "quotation" in message else ValueError) as err:
        parse_launch(command)
    assert message in str(err.value) and "\n" not in str(err.value)


# -- check -- <launch command> ----------------------------------------------------------------------

HF_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
             "intermediate_size": 5632, "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
             "vocab_size": 32000, "max_position_embeddings": 2048, "torch_dtype": "bfloat16"}
AUTO_CONFIG = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
               "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"},
               "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"}}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(HF_CONFIG))
    (tmp_path / "ds.json").write_text(json.dumps(AUTO_CONFIG, indent=2))
    return tmp_path


def _launch(project, *script_args, launcher=("deepspeed", "--num_gpus", "4")):
    return ("check", "--gpu", "H100-SXM5-80GB", "--format", "json", "--", *launcher, "train.py",
            "--deepspeed", str(project / "ds.json"), "--model_name_or_path", str(project / "model" / "config.json"),
            *script_args)


def test_check_launch_command_feeds_the_estimate(cli, project):
    result = cli(*_launch(project, "--bf16", "--per_device_train_batch_size", "3", "--max_seq_length", "1024",
                          "--gradient_checkpointing"))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    estimate = report["estimate"]
    assert estimate["cluster"]["gpus"] == 4
    model = estimate["model"]
    assert (model["micro_batch_size"], model["precision"], model["sequence_length"],
            model["activation_checkpointing"]) == (3, "bf16", 1024, "full")
    # given by the launch command, so not assumed (ZA808)
    assert not {a["name"] for a in estimate["assumed"]} & {"micro_batch_size", "precision", "sequence_length"}
    assert "world size 4 from the launch command" in result.stderr


def test_launch_without_a_checkpointing_flag_leaves_the_description_to_decide(cli, project):
    """A script's arguments that do not mention gradient_checkpointing say nothing about it (the script may call
    model.gradient_checkpointing_enable() itself, as gpjt/fine-tune-2024-04's do): the model description's
    activation_checkpointing decides, and a flag on the command line still wins over it."""
    (project / "model.yaml").write_text(f"hf_config: {project / 'model' / 'config.json'}\nsequence_length: 1024\n"
                                        "activation_checkpointing: full\n")
    launch = ("check", "--gpu", "H100-SXM5-80GB", "--format", "json", "--model", str(project / "model.yaml"),
              "--", "deepspeed", "--num_gpus", "4", "train.py", "--deepspeed", str(project / "ds.json"), "--bf16")
    silent = cli(*launch)
    assert silent.returncode == 0, silent.stderr
    assert json.loads(silent.stdout)["estimate"]["model"]["activation_checkpointing"] == "full"
    off = cli(*launch, "--gradient_checkpointing", "false")
    assert json.loads(off.stdout)["estimate"]["model"]["activation_checkpointing"] == "none"
    assert script_training_args(["--bf16"]).checkpointing is None
    assert script_training_args(["--gradient_checkpointing"]).checkpointing is True


def test_check_launch_command_mismatch_is_an_error(cli, project):
    (project / "ds.json").write_text(json.dumps({**AUTO_CONFIG, "train_micro_batch_size_per_gpu": 4}, indent=2))
    result = cli("check", "--gpu", "H100-SXM5-80GB", "--", "deepspeed", "--num_gpus", "4", "train.py", "--deepspeed",
                 str(project / "ds.json"), "--model_name_or_path", str(project / "model" / "config.json"),
                 "--per_device_train_batch_size", "3")
    assert result.returncode == 1
    assert f"{project / 'ds.json'}:3:3: ZA310 [error]" in result.stdout


def test_check_launch_without_gpu_count_asks_for_gpus(cli, project):
    result = cli(*_launch(project, launcher=("deepspeed",)))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "give --gpus N" in lines[0] and "--num_gpus N in the launch command" in lines[0]
    assert "the world size is missing: deepspeed without --num_gpus" in lines[0]


def test_check_launch_without_deepspeed_config(cli, project):
    result = cli("check", "--params", "7B", "--gpu", "H100-SXM5-80GB", "--", "torchrun", "--nproc_per_node", "8",
                 "train.py")
    assert result.returncode == 2 and "give CONFIG" in result.stderr


@pytest.mark.parametrize("launch,message", [
    (("srun", "x.py"), "not a launcher"),
    (("deepspeed", "--num_gpus"), "needs a value"),
    ((), "empty"),
])
def test_check_bad_launch_exits_2(cli, launch, message):
    result = cli("check", "--params", "7B", "--gpu", "H100-SXM5-80GB", "--", *launch)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_launch_as_one_quoted_flag(cli, project):
    command = (f"deepspeed --num_gpus 2 train.py --deepspeed {project / 'ds.json'} --model_name_or_path "
               f"{project / 'model' / 'config.json'} --bf16")
    result = cli("check", "--gpu", "H100-SXM5-80GB", "--launch", command, "--format", "json")
    assert result.returncode == 5, result.stderr  # no sequence length in the command: the verdict is unknown
    assert json.loads(result.stdout)["estimate"]["cluster"]["gpus"] == 2
