"""``check`` takes what the user's files already say: the world size from an Accelerate config, from
``accelerate launch --config_file`` (which is then the config checked) and from each launcher's options; the
sequence length from the Trainer's arguments, a LLaMA-Factory or axolotl YAML and the script's flags. Each
value taken is named in a note; a flag that disagrees with a file wins and is named too; what nothing gives
is asked for in one line (exit 2).
"""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.cli.exits import ExitCode
from zeroadvisor.config.launch import LaunchError, overridden, parse_launch

GPU = ("--gpu", "H100-SXM5-80GB")
TWO_MACHINES = ("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n"
                "  zero_stage: 3\n  offload_optimizer_device: none\nmixed_precision: bf16\nmachine_rank: 0\n"
                "main_process_ip: 10.0.0.1\nmain_process_port: 29500\nnum_machines: 2\nnum_processes: 16\n")
HF_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
             "intermediate_size": 5632, "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
             "vocab_size": 32000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}
DS_CONFIG = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}, "bf16": {"enabled": True}}


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "acc.yaml").write_text(TWO_MACHINES)
    (tmp_path / "ds.json").write_text(json.dumps(DS_CONFIG, indent=2))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(HF_CONFIG))
    return tmp_path


def _estimate(result) -> dict:
    assert result.returncode in (0, 1, 5), result.stderr
    return json.loads(result.stdout)["estimate"]


def _configured_stage(estimate: dict) -> int:
    return next(stage["stage"] for stage in estimate["stages"] if stage["configured"])


def _cluster(result) -> tuple[int, int]:
    cluster = _estimate(result)["cluster"]
    return cluster["gpus"], cluster["gpus_per_node"]


# -- the world size -------------------------------------------------------------------------------

def test_accelerate_yaml_needs_no_gpus(cli, files):
    result = cli("check", "acc.yaml", "--params", "7B", *GPU, "--format", "json")
    assert _cluster(result) == (16, 8)
    assert "world size 16 from num_processes in acc.yaml over 2 machines, 8 each" in result.stderr


def test_accelerate_yaml_gpus_flag_that_agrees_is_taken(cli, files):
    result = cli("check", "acc.yaml", "--params", "7B", *GPU, "--gpus", "16", "--format", "json")
    assert _cluster(result) == (16, 8) and "from num_processes" not in result.stderr


def test_corpus_accelerate_yamls_give_their_world_size(cli, corpus):
    """Every real Accelerate config that states num_processes checks without --gpus, on that many GPUs."""
    from zeroadvisor.config.reader import read_document

    checked = 0
    for path in sorted((corpus / "accelerate_yaml").glob("*.y*ml")):
        data = read_document(path).data
        if not isinstance(data.get("num_processes"), int):
            continue
        result = cli("check", str(path), "--params", "1B", *GPU, "--format", "json")
        assert result.returncode in (0, 1, 5), f"{path.name}: {result.stderr}"
        report = json.loads(result.stdout)
        if report.get("estimate"):  # a YAML that builds no DeepSpeed config has no estimate, only its findings
            assert report["estimate"]["cluster"]["gpus"] == data["num_processes"], path.name
        assert f"world size {data['num_processes']} from num_processes in {path}" in result.stderr, path.name
        checked += 1
    assert checked >= 25


def test_accelerate_launch_config_file_is_the_config(cli, files):
    result = cli("check", "--params", "7B", *GPU, "--format", "json", "--", "accelerate", "launch", "--config_file",
                 "acc.yaml", "train.py", "--per_device_train_batch_size", "2")
    assert _cluster(result) == (16, 8)
    assert "config acc.yaml from the launch command (accelerate launch --config_file)" in result.stderr
    assert "ZA050" not in result.stdout  # the Trainer's --bf16/--fp16 block is not written into the YAML
    assert _estimate(result)["model"]["micro_batch_size"] == 2


def test_accelerate_launch_config_file_reads_its_deepspeed_config_file(cli, files):
    (files / "zero3.json").write_text(json.dumps({"zero_optimization": {"stage": 3}}))
    (files / "acc_file.yaml").write_text("distributed_type: DEEPSPEED\nnum_processes: 4\ndeepspeed_config:\n"
                                         "  deepspeed_config_file: zero3.json\n")
    result = cli("check", "--params", "7B", *GPU, "--format", "json", "--", "accelerate", "launch", "--config_file",
                 "acc_file.yaml", "train.py")
    estimate = _estimate(result)
    assert estimate["cluster"]["gpus"] == 4 and _configured_stage(estimate) == 3


def test_accelerate_launch_options_win_over_the_config_file(cli, files):
    """_validate_launch_command copies a config key only where the command left the option unset."""
    result = cli("check", "--params", "7B", *GPU, "--format", "json", "--", "accelerate", "launch", "--config_file",
                 "acc.yaml", "--num_processes", "8", "--zero_stage", "2", "train.py")
    estimate = _estimate(result)
    assert (estimate["cluster"]["gpus"], estimate["cluster"]["gpus_per_node"]) == (8, 4)
    assert _configured_stage(estimate) == 2
    assert "--num_processes 8 from the launch command used over num_processes (16 in the file)" in result.stderr
    assert "--zero_stage 2 from the launch command used over deepspeed_config.zero_stage (3 in the file)" in \
        result.stderr


def test_the_scripts_deepspeed_config_is_checked_over_the_accelerate_config(cli, files):
    result = cli("check", "--params", "7B", *GPU, "--format", "json", "--", "accelerate", "launch", "--config_file",
                 "acc.yaml", "train.py", "--deepspeed", "ds.json", "--per_device_train_batch_size", "1")
    report = json.loads(result.stdout)
    assert {finding["file"] for finding in report["findings"]} == {"ds.json"}
    assert report["estimate"]["cluster"]["gpus"] == 16
    assert "the script's --deepspeed ds.json is the DeepSpeed config checked" in result.stderr


def test_estimate_of_an_accelerate_yaml_needs_no_gpus(cli, files):
    result = cli("estimate", "acc.yaml", "--params", "7B", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["cluster"]["gpus"] == 16


def test_overridden_keeps_the_file_and_sets_the_nested_key(files):
    data = {"num_processes": 16, "deepspeed_config": {"zero_stage": 3}}
    launch = parse_launch("accelerate launch --config_file acc.yaml --num-processes 4 --zero_stage 1 train.py")
    assert overridden(data, launch.overrides) == {"num_processes": 4, "deepspeed_config": {"zero_stage": 1}}
    assert data == {"num_processes": 16, "deepspeed_config": {"zero_stage": 3}}


def test_accelerate_launch_num_processes_and_num_machines(cli, files):
    result = cli("check", "ds.json", "--params", "7B", *GPU, "--format", "json", "--", "accelerate", "launch",
                 "--num_processes", "16", "--num_machines", "2", "train.py")
    assert _cluster(result) == (16, 8)


@pytest.mark.parametrize("launcher,cluster", [
    (("deepspeed", "--num_gpus", "4", "--num_nodes", "2"), (8, 4)),
    (("deepspeed", "--include", "host1:0,1,2@host2:0,1,2"), (6, 3)),
    (("deepspeed", "--include", "localhost:0,1"), (2, 2)),
    (("torchrun", "--nproc_per_node", "8", "--nnodes", "2"), (16, 8)),
    (("torchrun", "--nproc-per-node=4", "--nnodes=3"), (12, 4)),
    (("torchrun", "--standalone", "--nproc-per-node", "16"), (16, 16)),
    (("python", "-m", "torch.distributed.run", "--nproc_per_node", "2"), (2, 2)),
])
def test_launcher_options_give_the_cluster(cli, files, launcher, cluster):
    result = cli("check", "--params", "7B", *GPU, "--format", "json", "--", *launcher, "train.py", "--deepspeed",
                 "ds.json")
    assert _cluster(result) == cluster
    assert f"world size {cluster[0]} from the launch command" in result.stderr


def test_hostfile_hosts_and_slots(cli, files):
    (files / "hosts").write_text("# the cluster\nworker-0 slots=8\nworker-1 slots=8\n\nworker-2 slots=8\n")
    result = cli("check", "--params", "7B", *GPU, "--format", "json", "--", "deepspeed", "--hostfile", "hosts",
                 "train.py", "--deepspeed", "ds.json")
    assert _cluster(result) == (24, 8)
    assert "hostfile hosts: 3 node(s), 8+8+8 GPU(s)" in result.stderr


@pytest.mark.parametrize("options,world,per_node", [
    ("--include worker-0@worker-1:0,1", 10, None),  # a host without slots: all of its slots
    ("--exclude worker-1:0,1,2,3", 12, None),
    ("--exclude worker-1", 8, 8),
    ("--num_nodes 1", 8, 8),
])
def test_hostfile_narrowed_as_deepspeed_narrows_it(tmp_path, options, world, per_node):
    (tmp_path / "hosts").write_text("worker-0 slots=8\nworker-1 slots=8\n")
    parsed = parse_launch(f"deepspeed -H hosts {options} train.py", cwd=str(tmp_path))
    assert (parsed.world_size, parsed.per_node) == (world, per_node)


@pytest.mark.parametrize("options,message", [
    ("--include worker-9:0", "Hostname 'worker-9' not found in hostfile"),
    ("--include worker-0:0 --num_gpus 2", "Cannot specify num_nodes/gpus with include/exclude"),
    ("--include worker-0 --exclude worker-1", "mutually exclusive"),
])
def test_resource_filters_deepspeed_rejects(tmp_path, options, message):
    (tmp_path / "hosts").write_text("worker-0 slots=8\nworker-1 slots=8\n")
    with pytest.raises(LaunchError, match=message) as err:
        parse_launch(f"deepspeed -H hosts {options} train.py", cwd=str(tmp_path))
    assert "\n" not in str(err.value)


def test_missing_hostfile_is_one_error_naming_it(cli, files):
    result = cli("check", "--params", "7B", *GPU, "--", "deepspeed", "--hostfile", "job/hosts", "train.py",
                 "--deepspeed", "ds.json")
    assert result.returncode == ExitCode.USAGE
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "the hostfile job/hosts" in lines[0] and "give --gpus N" in lines[0]
    assert "Traceback" not in result.stderr


def test_bad_hostfile_line_names_the_file_and_line(cli, files):
    (files / "hosts").write_text("worker-0 slots=8\nworker-1 eight\n")
    result = cli("check", "--params", "7B", *GPU, "--", "deepspeed", "-H", "hosts", "train.py", "--deepspeed",
                 "ds.json")
    assert result.returncode == ExitCode.USAGE
    expected = "zeroadvisor: hosts:2: hostfile line is not 'host slots=N' (DeepSpeed rejects it)"
    assert result.stderr.strip().splitlines() == [expected]


@pytest.mark.parametrize("launcher,alternative", [
    (("deepspeed",), "--num_gpus N in the launch command"),
    (("torchrun", "--nproc-per-node", "gpu"), "--nproc-per-node N in the launch command"),
    (("accelerate", "launch"), "--num_processes N or --config_file FILE in the launch command"),
])
def test_world_size_nothing_states_is_one_error(cli, files, launcher, alternative):
    result = cli("check", "--params", "7B", *GPU, "--", *launcher, "train.py", "--deepspeed", "ds.json")
    assert result.returncode == ExitCode.USAGE
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zeroadvisor: the world size is missing: ")
    assert "give --gpus N" in lines[0] and alternative in lines[0]


def test_config_and_world_size_missing_are_one_error(cli, files):
    result = cli("check", "--params", "7B", *GPU, "--", "deepspeed", "train.py", "--bf16")
    assert result.returncode == ExitCode.USAGE
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "give CONFIG, or --deepspeed FILE in the launch command" in lines[0]
    assert "--num_gpus N in the launch command" in lines[0]


def test_gpus_flag_gives_what_the_launch_command_leaves_to_the_machine(cli, files):
    result = cli("check", "--params", "7B", *GPU, "--gpus", "8", "--format", "json", "--", "deepspeed", "train.py",
                 "--deepspeed", "ds.json")
    assert _cluster(result)[0] == 8


def test_gpus_flag_over_the_launch_command_is_said(cli, files):
    result = cli("check", "--params", "7B", *GPU, "--gpus", "4", "--format", "json", "--", "torchrun",
                 "--nproc_per_node", "8", "train.py", "--deepspeed", "ds.json")
    assert _cluster(result)[0] == 4
    assert "--gpus 4 used; the launch command runs 8 process(es)" in result.stderr


def test_unreadable_accelerate_config_file_is_one_error_at_its_line(cli, files):
    (files / "acc_bad.yaml").write_text("num_processes: [8\n")
    result = cli("check", "--params", "7B", *GPU, "--", "accelerate", "launch", "--config_file", "acc_bad.yaml",
                 "train.py")
    assert result.returncode == ExitCode.USAGE
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "acc_bad.yaml:2:1: invalid YAML" in lines[0]


def test_accelerate_config_file_not_found_is_one_error(cli, files):
    result = cli("check", "--params", "7B", *GPU, "--", "accelerate", "launch", "--config_file", "nope.yaml",
                 "train.py")
    assert result.returncode == ExitCode.USAGE
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope.yaml" in lines[0]


# -- the sequence length --------------------------------------------------------------------------

LLAMA_FACTORY = "model_name_or_path: m\nstage: sft\nfinetuning_type: full\ncutoff_len: 4096\n"
AXOLOTL = "base_model: m\nsequence_len: 8192\nmicro_batch_size: 1\n"


@pytest.mark.parametrize("name,text,length,where", [
    ("lf.yaml", LLAMA_FACTORY, 4096, "cutoff_len in lf.yaml"),
    ("ax.yaml", AXOLOTL, 8192, "sequence_len in ax.yaml"),
    ("args.json", json.dumps({"max_seq_length": 1536}), 1536, "max_seq_length in args.json"),
    ("args.json", json.dumps({"max_length": 3072}), 3072, "max_length in args.json"),
    ("args.yaml", "model_max_length: 2560\n", 2560, "model_max_length in args.yaml"),
])
def test_sequence_length_from_the_training_arguments(cli, files, name, text, length, where):
    (files / name).write_text(text)
    result = cli("check", "acc.yaml", "--model", "model/config.json", *GPU, "--training-args", name, "--format",
                 "json")
    estimate = _estimate(result)
    assert estimate["model"]["sequence_length"] == length
    assert "sequence_length" not in {a["name"] for a in estimate["assumed"]}
    assert f"sequence length {length} from {where}" in result.stderr


@pytest.mark.parametrize("flag", ["--max_seq_length", "--max_length", "--model_max_length", "--cutoff_len",
                                  "--sequence_len", "--block_size", "--max-seq-length"])
def test_sequence_length_from_the_script_flags(cli, files, flag):
    result = cli("check", "--model", "model/config.json", *GPU, "--format", "json", "--", "torchrun",
                 "--nproc_per_node", "2", "run_clm.py", "--deepspeed", "ds.json", flag, "1280")
    assert _estimate(result)["model"]["sequence_length"] == 1280
    assert f"sequence length 1280 from {flag}" in result.stderr


def test_sequence_length_from_a_script_arguments_file(cli, files):
    (files / "lf.yaml").write_text(LLAMA_FACTORY)
    result = cli("check", "--model", "model/config.json", *GPU, "--format", "json", "--", "torchrun",
                 "--nproc_per_node", "2", "src/train.py", "lf.yaml", "deepspeed=ds.json")
    assert _estimate(result)["model"]["sequence_length"] == 4096
    assert "sequence length 4096 from cutoff_len in lf.yaml" in result.stderr


def test_seq_len_flag_over_the_file_is_said(cli, files):
    (files / "lf.yaml").write_text(LLAMA_FACTORY)
    result = cli("check", "acc.yaml", "--model", "model/config.json", *GPU, "--seq-len", "1024", "--training-args",
                 "lf.yaml", "--format", "json")
    assert _estimate(result)["model"]["sequence_length"] == 1024
    assert "--seq-len 1024 used; the Trainer's arguments give 4096 (cutoff_len in lf.yaml)" in result.stderr


def test_bad_sequence_length_is_one_error_naming_the_file(cli, files):
    (files / "ax.yaml").write_text("base_model: m\nsequence_len: long\n")
    result = cli("check", "acc.yaml", "--params", "7B", *GPU, "--training-args", "ax.yaml")
    assert result.returncode == ExitCode.USAGE
    expected = "zeroadvisor: sequence_len in ax.yaml: expected a positive integer, got 'long'"
    assert result.stderr.strip().splitlines() == [expected]



def test_the_config_a_trainer_file_names_is_said_and_a_missing_one_is_one_line(cli, tmp_path, monkeypatch):
    """LLaMA-Factory's YAMLs name their DeepSpeed config relative to where the trainer runs: the note says which file
    named it, so a run from elsewhere gets a 'no such file' it can place; the error is one line, exit 2. (A path to
    one of LLaMA-Factory's own files, examples/deepspeed/ds_z3_config.json, is read as its release ships it:
    tests/test_example_configs.py.)"""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(HF_CONFIG))
    (tmp_path / "lf.yaml").write_text(f"model_name_or_path: {tmp_path / 'model'}\nstage: sft\ndo_train: true\n"
                                      "finetuning_type: full\ndeepspeed: configs/ds_z3.json\n"
                                      "cutoff_len: 2048\nper_device_train_batch_size: 1\nbf16: true\n")
    launch = f"FORCE_TORCHRUN=1 NPROC_PER_NODE=8 llamafactory-cli train {tmp_path / 'lf.yaml'}"
    missing = cli("check", "--launch", launch, *GPU)
    assert missing.returncode == ExitCode.USAGE and "Traceback" not in missing.stderr
    assert (f"note: config configs/ds_z3.json from deepspeed in {tmp_path / 'lf.yaml'}"
            in missing.stderr)
    assert missing.stderr.rstrip().splitlines()[-1] == \
        "zeroadvisor: configs/ds_z3.json: no such file"
    (tmp_path / "configs").mkdir(parents=True)
    (tmp_path / "configs" / "ds_z3.json").write_text(json.dumps(DS_CONFIG))
    assert cli("check", "--launch", launch, *GPU).returncode == 0
