"""torch's caching allocator (memory/allocator.py): fragmentation is charged on what is freed and re-allocated every
step, not on buffers allocated once, and PYTORCH_CUDA_ALLOC_CONF's expandable segments (from the environment or
the launch command) lower it, said as an assumed input where nobody gave it and it decides the verdict."""

from __future__ import annotations

import json
from fractions import Fraction

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.launch import parse_launch
from zeroadvisor.inputs.run import alloc_conf
from zeroadvisor.inputs.trainer import read_trainer
from zeroadvisor.memory.allocator import FRAGMENTATION, PAGE_BYTES, AllocatorConf, reallocated
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.vocab import Verdict

SPEC = ModelSpec(parameters=6_738_415_616, largest_layer_parameters=131_072_000, num_layers=32, hidden_size=4096,
                 num_attention_heads=32, intermediate_size=11008, vocab_size=32000)
SHAPE = TrainingShape(sequence_length=2048)
EXPANDABLE = "expandable_segments:True"


def _stage2(bucket: int, alloc: str | None = None, gpu_memory: int | None = None):
    config = {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 2, "reduce_bucket_size": bucket, "allgather_bucket_size": bucket}}
    est = estimate(config, SPEC, SHAPE, Cluster(gpus=8, gpu_memory=gpu_memory, alloc_conf=alloc))
    assert est.configured is not None
    return est, est.configured


def _fragmentation(st):
    (term,) = [t for t in st.terms if t.key == "fragmentation"]
    return term


def test_fragmentation_is_not_charged_on_buffers_allocated_once():
    _, small = _stage2(50_000_000)
    _, large = _stage2(500_000_000)
    # the reduce bucket (allocated once at init) grows by 2 B × 450M elements; the allowance does not
    assert large.per_gpu["buffers"] >= small.per_gpu["buffers"] + 9 * 10**8
    assert _fragmentation(large).nbytes == _fragmentation(small).nbytes
    churn = sum(t.nbytes for t in small.terms if t.phase == "train" and reallocated(t))
    assert churn == small.per_gpu["activations"] + small.per_gpu["gathered_parameters"] + sum(
        t.nbytes for t in small.terms if t.key == "step_temporary")
    assert _fragmentation(small).nbytes == round(FRAGMENTATION * churn)
    # the parameters, gradients and optimizer partitions are not re-allocated
    assert not any(reallocated(t) for t in small.terms if t.row in ("parameters", "gradients", "optimizer_states"))


def test_expandable_segments_lower_the_fragmentation_to_pages():
    _, default = _stage2(50_000_000)
    _, expandable = _stage2(50_000_000, EXPANDABLE)
    churned = [t for t in expandable.terms if t.phase == "train" and t.nbytes and reallocated(t)]
    assert _fragmentation(expandable).nbytes == PAGE_BYTES * len(churned) < _fragmentation(default).nbytes
    assert expandable.peak_gpu < default.peak_gpu


def test_the_allocator_conf_is_read_as_torch_reads_it():
    assert AllocatorConf("max_split_size_mb:128,expandable_segments:True").expandable_segments
    assert AllocatorConf(" expandable_segments : True ").expandable_segments
    assert not AllocatorConf("expandable_segments:True,expandable_segments:False").expandable_segments  # last wins
    assert not AllocatorConf("expandable_segments:true").expandable_segments  # torch accepts only True/False
    assert not AllocatorConf("").expandable_segments and AllocatorConf("").given
    assert not AllocatorConf(None).given


def test_the_launch_command_and_the_environment_give_it():
    launch = f"PYTORCH_CUDA_ALLOC_CONF={EXPANDABLE} NCCL_DEBUG=INFO torchrun --nproc-per-node 8 train.py"
    assert dict(parse_launch(launch).env)["PYTORCH_CUDA_ALLOC_CONF"] == EXPANDABLE
    trainer = read_trainer(None, launch)
    # the launch command's prefix is the run's environment: it wins over the shell's
    assert alloc_conf(trainer, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"})[0] == EXPANDABLE
    assert alloc_conf(read_trainer(None, "torchrun train.py"), {"PYTORCH_CUDA_ALLOC_CONF": EXPANDABLE})[0] == EXPANDABLE
    assert alloc_conf(None, {}) == (None, [])


def _deciding_card() -> int:
    _, default = _stage2(50_000_000)
    _, expandable = _stage2(50_000_000, EXPANDABLE)
    # between the two expected peaks, above both bounds' headroom line: does-not-fit only with the default
    return (default.peak_gpu + expandable.peak_gpu) // 2


def test_the_assumed_allocator_is_said_where_it_decides_the_verdict():
    card = _deciding_card()
    est, st = _stage2(50_000_000, gpu_memory=card)
    assert st.counted_verdict == Verdict.DOES_NOT_FIT
    (assumed,) = [a for a in est.assumed if a.name == "alloc_conf"]
    assert "expandable_segments:True" in assumed.message() and "launch command" in assumed.message()
    est, st = _stage2(50_000_000, EXPANDABLE, gpu_memory=card)
    assert st.counted_verdict != Verdict.DOES_NOT_FIT
    assert not [a for a in est.assumed if a.name == "alloc_conf"]
    # where it does not decide the verdict, nothing is said
    est, _ = _stage2(50_000_000, gpu_memory=200 * 2**30)
    assert not [a for a in est.assumed if a.name == "alloc_conf"]


def test_the_cli_reads_it_from_the_environment(cli, tmp_path):
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True},
                                  "zero_optimization": {"stage": 2}}))
    args = ("estimate", str(config), "--model", "sample_configs/models/llama-2-7b.yaml", "--gpus", "8",
            "--seq-len", "2048", "--format", "json")
    plain = json.loads(cli(*args, env={"PYTORCH_CUDA_ALLOC_CONF": None}).stdout)
    expandable = json.loads(cli(*args, env={"PYTORCH_CUDA_ALLOC_CONF": EXPANDABLE}).stdout)
    assert expandable["cluster"]["alloc_conf"] == EXPANDABLE and plain["cluster"]["alloc_conf"] is None

    def frag(data):
        (st,) = [s for s in data["stages"] if s["configured"]]
        return next(t["bytes"] for t in st["terms"] if t["key"] == "fragmentation")

    assert frag(expandable) < frag(plain) * Fraction(1, 10)


def test_the_cli_reads_it_from_the_launch_command(cli, tmp_path):
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"},
                                  "zero_optimization": {"stage": 2}}))
    result = cli("check", str(config), "--model", "sample_configs/models/llama-2-7b.yaml", "--seq-len", "2048",
                 "--gpu-memory", "80GiB", "--format", "json", "--", f"PYTORCH_CUDA_ALLOC_CONF={EXPANDABLE}",
                 "torchrun", "--nproc-per-node", "8", "train.py", env={"PYTORCH_CUDA_ALLOC_CONF": None})
    assert result.returncode in (0, 1), result.stderr
    assert json.loads(result.stdout)["estimate"]["cluster"]["alloc_conf"] == EXPANDABLE
