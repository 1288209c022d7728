"""Every numeric input is bounded where it is read: each extreme below is one line on stderr and exit 2 (a usage
error), never an internal error (exit 3), a traceback or a hang. Each case runs through the real command line."""

from __future__ import annotations

import pytest

from cli_run import cli  # noqa: F401 - the fixture

DS = '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}\n'
MODEL = ("--params", "7B")
CLUSTER = ("--gpus", "8", "--gpu-memory", "80GiB")
HUGE = "9" * 5000  # more digits than int() converts (sys.get_int_max_str_digits: 4,300)
BEYOND_FLOAT = "1" + "0" * 400  # an integer literal past the float range (1e400)


def _usage_error(result, *expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "ds.json").write_text(DS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- the cluster: zero usable memory, counts past the cluster bound --------------------------------

@pytest.mark.parametrize("args, expected", [
    (("--gpu-memory", "1B"), ("--gpu-memory", "at least 1 MiB")),
    (("--gpu-memory", "1023KiB"), ("--gpu-memory", "at least 1 MiB")),
    (("--gpu-memory", "80GiB", "--headroom", "99.9999999999%"), ("--headroom", "leaves", "at least 1 MiB")),
    (("--gpu", "A100-SXM4-80GB", "--headroom", "99.9999999999%"), ("--headroom", "leaves")),
    (("--gpu-memory", "80GiB", "--gpus-per-node", str(2**24 + 1)), ("--gpus-per-node", "at most 16,777,216")),
], ids=["1B", "under-1MiB", "headroom-zero-usable", "headroom-zero-usable-card", "gpus-per-node"])
@pytest.mark.parametrize("command", ["check", "estimate"])
def test_cluster_values_without_usable_memory_are_usage_errors(cli, workdir, command, args, expected):
    config = ("ds.json",)
    _usage_error(cli(command, *config, *MODEL, "--gpus", "8", *args), *expected)


def test_the_advisor_never_grows_host_memory_past_the_bound(cli, workdir):
    """1e18 parameters need more host RAM than the cluster bound (1 EB): the advice says nothing fits on that
    cluster instead of building a cluster the bound refuses."""
    result = cli("check", "ds.json", "--params", "1e18", *CLUSTER, "--cpu-memory", "1TB")
    assert result.returncode in (1, 5), result.stderr  # findings (nothing fits), never an internal error
    assert "internal error" not in result.stderr


@pytest.mark.parametrize("flag", ["--gpus", "--seq-len", "--micro-batch"])
def test_a_number_flag_of_more_digits_than_int_reads(cli, workdir, flag):
    """parse_simple's int() raised ValueError (4,300 digits at most) past the typer fallback: exit 3."""
    args = {"--gpus": ("--gpu-memory", "80GiB"), "--seq-len": CLUSTER, "--micro-batch": CLUSTER}[flag]
    _usage_error(cli("check", "ds.json", *MODEL, *args, flag, HUGE), flag)


def test_a_project_configuration_number_of_more_digits_than_int_reads(cli, workdir):
    (workdir / ".zeroadvisor.toml").write_text(f"[cluster]\ngpus = {HUGE}\n")
    _usage_error(cli("lint", "ds.json"), ".zeroadvisor.toml", "too long")


def test_params_past_the_model_bound_are_a_usage_error(cli, workdir):
    _usage_error(cli("check", "ds.json", "--params", "1e31", *CLUSTER), "--params")


# -- the launch command: no processes, numbers int() refuses --------------------------------------

LAUNCHES = {
    "nnodes-0": ("torchrun --nnodes 0 --nproc-per-node 8 train.py --deepspeed ds.json", ("--nnodes 0", "no process")),
    "nproc-0": ("torchrun --nproc-per-node 0 train.py --deepspeed ds.json", ("--nproc-per-node 0", "no process")),
    "num-processes-0": ("accelerate launch --num_processes 0 train.py --deepspeed ds.json",
                        ("--num_processes 0", "no process")),
    "hostfile-no-slots": ("deepspeed --hostfile hosts train.py --deepspeed ds.json", ("launch command", "at least 1")),
    "hostfile-huge-slots": ("deepspeed --hostfile huge train.py --deepspeed ds.json", ("huge:1: slots",
                                                                                    "at most 16,777,216")),
    "visible-empty-torchrun": ("CUDA_VISIBLE_DEVICES= torchrun --nproc-per-node gpu train.py --deepspeed ds.json",
                               ("CUDA_VISIBLE_DEVICES", "no GPU")),
    "visible-empty-deepspeed": ("CUDA_VISIBLE_DEVICES= deepspeed train.py --deepspeed ds.json",
                                ("CUDA_VISIBLE_DEVICES", "no GPU")),
    "superscript": ("torchrun --nproc-per-node ² train.py --deepspeed ds.json", ("--nproc-per-node", "'²'")),
    "superscript-nnodes": ("torchrun --nnodes ² --nproc-per-node 8 train.py --deepspeed ds.json", ("--nnodes",)),
    "superscript-deepspeed": ("deepspeed --num_gpus ² train.py --deepspeed ds.json", ("--num_gpus",)),
    "superscript-accelerate": ("accelerate launch --num_processes ² train.py --deepspeed ds.json",
                               ("--num_processes",)),
    "huge-nproc": (f"torchrun --nproc-per-node {HUGE} train.py --deepspeed ds.json",
                   ("--nproc-per-node", "at most 16,777,216")),
    "huge-nnodes": (f"torchrun --nnodes 1:{HUGE} --nproc-per-node 8 train.py --deepspeed ds.json",
                    ("--nnodes", "at most 16,777,216")),
    "huge-num-gpus": (f"deepspeed --num_gpus {HUGE} train.py --deepspeed ds.json", ("--num_gpus",)),
    "world-past-bound": ("torchrun --nnodes 4096 --nproc-per-node 8192 train.py --deepspeed ds.json",
                         ("launch command", "at most 16,777,216")),
    "script-seq-superscript": ("torchrun --nproc-per-node 8 train.py --deepspeed ds.json --max_seq_length ²",
                               ("max_seq_length",)),
    "script-seq-huge": (f"torchrun --nproc-per-node 8 train.py --deepspeed ds.json --max_seq_length {HUGE}",
                        ("max_seq_length",)),
}


@pytest.mark.parametrize("launch, expected", LAUNCHES.values(), ids=LAUNCHES.keys())
def test_launch_commands_without_a_usable_world_are_usage_errors(cli, workdir, launch, expected):
    (workdir / "hosts").write_text("worker-1 slots=0\n")
    (workdir / "huge").write_text(f"worker-1 slots={HUGE}\n")
    _usage_error(cli("check", *MODEL, "--gpu-memory", "80GiB", "--launch", launch), *expected)


def test_a_launch_error_message_shows_a_long_number_short(cli, workdir):
    result = cli("check", *MODEL, "--gpu-memory", "80GiB", "--launch", f"torchrun --nproc-per-node {HUGE} x.py")
    _usage_error(result)
    assert len(result.stderr) < 400


def test_the_words_after_the_double_dash_are_read_the_same(cli, workdir):
    _usage_error(cli("check", *MODEL, "--gpu-memory", "80GiB", "--", "torchrun", "--nproc-per-node", "²", "x.py"),
                 "--nproc-per-node")


def test_an_accelerate_config_of_no_processes_asks_for_the_world_size(cli, workdir):
    (workdir / "acc.yaml").write_text("distributed_type: DEEPSPEED\nnum_processes: 0\nnum_machines: 1\n"
                                      "deepspeed_config:\n  zero_stage: 2\n")
    result = cli("check", "acc.yaml", *MODEL, "--gpu-memory", "80GiB")
    _usage_error(result, "--gpus")


def test_an_accelerate_config_past_the_cluster_bound_is_a_usage_error(cli, workdir):
    (workdir / "acc.yaml").write_text(f"distributed_type: DEEPSPEED\nnum_processes: {2**25}\nnum_machines: 1\n"
                                      "deepspeed_config:\n  zero_stage: 2\n")
    _usage_error(cli("check", "acc.yaml", *MODEL, "--gpu-memory", "80GiB"), "at most 16,777,216")


# -- the Trainer's arguments -------------------------------------------------------------------

@pytest.mark.parametrize("micro", ["0", "-2", "2.5", "'x'"])
def test_axolotl_micro_batch_that_batch_size_cannot_be_divided_by(cli, workdir, micro):
    (workdir / "axo.yml").write_text(f"base_model: x\nmicro_batch_size: {micro}\nbatch_size: 16\n"
                                     "sequence_len: 2048\n")
    _usage_error(cli("check", "ds.json", *CLUSTER, *MODEL, "--training-args", "axo.yml"), "micro_batch_size")


# -- the project configuration -------------------------------------------------------------------

@pytest.mark.parametrize("name, text", [
    (".zeroadvisor.toml", "a = " + "[" * 5000 + "]" * 5000 + "\n"),
    ("pyproject.toml", "[tool.zeroadvisor]\nselect = " + "[" * 5000 + "]" * 5000 + "\n"),
    ("pyproject.toml", "[tool.zeroadvisor]\nx = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n"),
], ids=["zeroadvisor-toml", "pyproject-array", "pyproject-inline-table"])
@pytest.mark.parametrize("command", [("lint", "ds.json"), ("check", "ds.json", *MODEL, *CLUSTER)],
                         ids=["lint", "check"])
def test_a_deeply_nested_project_configuration_is_one_line(cli, workdir, name, text, command):
    (workdir / name).write_text(text)
    _usage_error(cli(*command), name, "nested")


# -- config values past the float range ------------------------------------------------------------

@pytest.mark.parametrize("config", [
    f'{{"train_batch_size": 16, "sequence_parallel_size": {BEYOND_FLOAT}}}',
    f'{{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "sequence_parallel_size": {BEYOND_FLOAT}}}',
], ids=["tbs", "tbs-mbs"])
def test_lint_with_a_sequence_parallel_size_past_the_float_range(cli, workdir, config):
    (workdir / "sp.json").write_text(config)
    result = cli("lint", "sp.json", "--gpus", "8")
    assert result.returncode == 1, result.stderr  # findings: the degree does not divide the GPUs
    assert "sequence_parallel_size" in result.stdout and not result.stderr


@pytest.mark.parametrize("key", ["train_batch_size", "gradient_accumulation_steps", "gradient_clipping"])
@pytest.mark.parametrize("command", ["lint", "check", "estimate"])
def test_a_400_digit_value_is_a_finding_or_a_usage_error(cli, workdir, key, command):
    (workdir / "big.json").write_text(f'{{"train_micro_batch_size_per_gpu": 2, "{key}": {BEYOND_FLOAT}}}')
    args = {"lint": ("lint", "big.json", "--gpus", "8"), "check": ("check", "big.json", *MODEL, *CLUSTER),
            "estimate": ("estimate", "big.json", *MODEL, *CLUSTER)}[command]
    result = cli(*args)
    assert result.returncode in (0, 1, 2, 5), result.stderr
    assert "internal error" not in result.stderr and len(result.stderr.splitlines()) <= 1


@pytest.mark.parametrize("steps", ["'²'", "'" + HUGE + "'"], ids=["superscript", "5000-digits"])
def test_an_accelerate_config_accumulation_int_cannot_read_is_a_finding(cli, workdir, steps):
    """DeepSpeedPlugin's int() of the environment text raised ValueError here too (exit 3)."""
    (workdir / "acc.yaml").write_text("distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n"
                                      f"  zero_stage: 2\n  gradient_accumulation_steps: {steps}\n")
    result = cli("lint", "acc.yaml")
    assert result.returncode == 1 and "gradient_accumulation_steps" in result.stdout, result.stderr
