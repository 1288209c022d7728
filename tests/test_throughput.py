"""The step-time model (zeroadvisor/throughput): each term by hand from its cited formula, and the
properties the options must keep (more efficiency is faster, offload is slower at equal batch,
ZeRO-3 moves more than ZeRO-2)."""

from __future__ import annotations

import pytest

from zeroadvisor.hardware.table import GpuSpec
from zeroadvisor.memory.estimate import Cluster
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.parallel import Parallel
from zeroadvisor.memory.settings import read_settings
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.throughput import Hardware, NoThroughput, ZeroPlusPlus, step_time
from zeroadvisor.throughput.flops import token_flops
from zeroadvisor.throughput.offload import cpu_adam_seconds
from zeroadvisor.vocab import Precision

# A100-SXM4-80GB from NVIDIA's datasheet: 312 dense bf16 TFLOPS, NVLink 600 GB/s bidirectional = 300 one way,
# PCIe gen4 x16 32 GB/s (written out here, not read from the table, so the arithmetic below is checkable).
A100 = GpuSpec("A100-SXM4-80GB", 81920, 312.0, 300.0, 32.0, "datasheet")
P = 7_000_000_000
MODEL = ModelSpec(parameters=P)  # 6N only: no layer sizes, so no attention term
SHAPE = TrainingShape(sequence_length=2048)
CLUSTER = Cluster(gpus=8)


def _settings(stage: int, overlap: bool | None = None, micro: int = 1):
    zero = {"stage": stage} if overlap is None else {"stage": stage, "overlap_comm": overlap}
    config = {"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
              "optimizer": {"type": "AdamW"}, "zero_optimization": zero}
    return read_settings(config, MODEL, 8)


def _run(option: Option, overlap: bool | None = None, hw: Hardware | None = None, global_batch: int | None = None,
         shape: TrainingShape = SHAPE, **kwargs):
    return step_time(MODEL, shape, CLUSTER, option, _settings(option.stage, overlap), hw or Hardware(A100),
                     global_batch=global_batch, **kwargs)


def test_compute_and_stage2_communication_by_hand():
    # compute: 2048 tokens per GPU x 6 x 7e9 FLOPs (Kaplan §2.1) / (312e12 x 0.4) = 8.6016e13 / 1.248e14 s
    compute = 2048 * 6 * 7e9 / (312e12 * 0.4)  # 0.689 s
    # ZeRO-2, overlap_comm off: reduce-scatter and all-gather of 7e9 bf16 elements, each moving 7/8 of 14 GB per
    # rank over 300 GB/s (ZeRO paper §7; ring (n-1)/n), after and beside nothing: 2 x 0.0408333 s
    collective = 7e9 * 2 * 7 / 8 / 300e9
    t = _run(Option(2), overlap=False)
    assert t.seconds("compute") == pytest.approx(compute)
    assert t.seconds("communication") == pytest.approx(2 * collective)
    assert t.step_time_s == pytest.approx(compute + 2 * collective)
    assert t.tokens_per_s == pytest.approx(8 * 2048 / (compute + 2 * collective))
    assert t.bound == "compute"


def test_stage3_overlaps_its_three_collectives_with_compute():
    # ZeRO-3: forward all-gather beside the forward (1/3 of compute), backward all-gather + reduce-scatter beside
    # the backward (2/3): each pass is the longer of the two, here compute (0.23 s vs 0.041 s; 0.46 s vs 0.082 s)
    collective = 7e9 * 2 * 7 / 8 / 300e9
    t = _run(Option(3))  # overlap_comm defaults to on at stage 3 (runtime/zero/config.py)
    assert t.seconds("communication") == pytest.approx(3 * collective)
    assert t.step_time_s == pytest.approx(t.seconds("compute"))
    off = _run(Option(3), overlap=False)
    assert off.step_time_s == pytest.approx(off.seconds("compute") + 3 * collective)


def test_full_checkpointing_costs_a_third_more_compute():
    # Narayanan et al. 2021 §5.1: 4 passes instead of 3 (8N instead of 6N per token)
    base = _run(Option(2), overlap=True)
    full = _run(Option(2), overlap=True, shape=TrainingShape(sequence_length=2048, activation_checkpointing="full"))
    assert full.seconds("compute") / base.seconds("compute") == pytest.approx(4 / 3)


def test_token_flops_counts_attention_and_skips_the_input_embedding():
    # PaLM appendix B: 6N + 12·L·q·s; N without the (untied) input embedding lookup
    spec = ModelSpec(parameters=1000, num_layers=2, hidden_size=8, num_attention_heads=2, embedding_parameters=100,
                     tied_embeddings=False)
    f = token_flops(spec, 16)
    assert f.matmul_weights == 900
    assert f.model == 6 * 900 + 12 * 2 * 8 * 16
    assert token_flops(spec, 16, "selective").recompute == 4 * 2 * 8 * 16


def test_mixture_of_experts_counts_active_parameters():
    spec = ModelSpec(parameters=10_000_000, num_layers=2, hidden_size=64, intermediate_size=128, gated_mlp=False,
                     num_experts=8, experts_per_token=2)
    experts = 2 * 8 * 2 * 64 * 128  # layers x experts x (fc1 + fc2)
    active = 2 * 2 * 2 * 64 * 128
    assert token_flops(spec, 4).matmul_weights == 10_000_000 - experts + active


def test_cpu_adam_by_hand():
    # 7e9 / 8 = 8.75e8 parameters per process. deepspeed launcher: 48 cores / 8 processes = 6 threads at 0.8e9/s:
    # 0.182 s; the node's 8 processes move 8.75e8 x 8 x 28 B = 196 GB through 200 GB/s of host memory: 0.98 s,
    # the bound. torchrun (the default): OMP_NUM_THREADS=1, one thread: 8.75e8 / 0.8e9 = 1.094 s, the bound.
    hw = Hardware(A100, launcher="deepspeed")
    assert cpu_adam_seconds(8.75e8, 8, hw) == pytest.approx(8.75e8 * 8 * 28 / 200e9)
    assert cpu_adam_seconds(8.75e8, 8, Hardware(A100, host_memory_gb_s=2000.0, launcher="deepspeed")) == \
        pytest.approx(8.75e8 / (0.8e9 * 6))
    assert cpu_adam_seconds(8.75e8, 8, Hardware(A100)) == pytest.approx(8.75e8 / 0.8e9)


@pytest.mark.parametrize(("launcher", "ranks", "threads"), [
    ("torchrun", 8, 1),  # torch/distributed/run.py: OMP_NUM_THREADS=1 when unset and nproc_per_node > 1
    ("torchrun", 1, 64),  # one process: left unset, OpenMP takes every core
    ("accelerate", 8, 1), ("accelerate", 1, 1),  # num_cpu_threads_per_process defaults to 1
    ("deepspeed", 8, 8),  # --bind_cores_to_rank: 64 / 8; unbound: oversubscribed, at best the same share
])
def test_cpu_optimizer_threads_per_process_by_launcher(launcher, ranks, threads):
    from zeroadvisor.hardware.machine import cpu_threads_per_rank

    assert cpu_threads_per_rank(launcher, 64, ranks) == threads


def test_optimizer_offload_adds_the_cpu_step_and_pcie():
    base = _run(Option(2, "cpu"), overlap=False)
    none = _run(Option(2), overlap=False)
    part = 7e9 / 8
    # ZeRO-Offload §4.1: bf16 gradients of the partition to the host (in backward; exposed with overlap_comm
    # off), the CPU step, the updated bf16 partition back over PCIe gen4 (32 GB/s each way)
    down = upload = part * 2 / 32e9
    adam = part / 0.8e9  # torchrun: one thread per process (above the 0.98 s memory bound)
    # stage 2, bf16, no clipping: the fp32 -> bf16 copy of the partition on the host, 0.430 ns per parameter
    # (benchmarks/offload_step.json; above its 8 x 6 B x 8.75e8 / 200 GB/s = 0.21 s memory bound)
    to_16bit = part * 0.430e-9
    assert base.step_time_s == pytest.approx(none.step_time_s + down + adam + to_16bit + upload)
    overlapped = _run(Option(2, "cpu"), overlap=True)
    assert overlapped.step_time_s < base.step_time_s


def test_no_gpu_no_step_time():
    with pytest.raises(NoThroughput, match="--gpu"):
        _run(Option(2), hw=Hardware(None))
    with pytest.raises(NoThroughput, match="sequence length"):
        _run(Option(2), shape=TrainingShape())


def test_cluster_gpu_is_used_when_hardware_names_none():
    cluster = Cluster(gpus=8, gpu=A100)
    t = step_time(MODEL, SHAPE, cluster, Option(2), _settings(2), Hardware(None))
    assert t.step_time_s == pytest.approx(_run(Option(2)).step_time_s)


@pytest.mark.parametrize("option", [Option(0), Option(1), Option(2), Option(3), Option(2, "cpu"),
                                    Option(3, "cpu", "cpu"), Option(3, "nvme", "nvme")])
def test_more_efficiency_is_faster(option):
    slow = _run(option, hw=Hardware(A100, efficiency=0.3), global_batch=64)
    fast = _run(option, hw=Hardware(A100, efficiency=0.6), global_batch=64)
    assert fast.step_time_s <= slow.step_time_s
    if fast.bound == "compute":
        assert fast.step_time_s < slow.step_time_s


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_offload_is_slower_at_equal_batch(stage):
    for gb in (8, 64):
        offloaded = _run(Option(stage, "cpu"), global_batch=gb).step_time_s
        assert offloaded > _run(Option(stage), global_batch=gb).step_time_s


def test_parameter_offload_and_nvme():
    # parameter offload moves the partition over PCIe before every forward and backward (prefetched beside the
    # compute) instead of once after the step: more PCIe traffic, not always a longer step
    assert _run(Option(3, "cpu", "cpu")).seconds("offload") > _run(Option(3, "cpu")).seconds("offload")
    assert _run(Option(3, "nvme")).step_time_s > _run(Option(3, "cpu")).step_time_s


def test_stage3_moves_more_than_stage2_and_accumulation_multiplies_it():
    assert _run(Option(3)).seconds("communication") > _run(Option(2)).seconds("communication")
    # ZeRO-2 reduces in every micro step (stage_1_and_2.py partition_gradients), ZeRO-1 only at the boundary
    z1, z2 = _run(Option(1), global_batch=64), _run(Option(2), global_batch=64)
    assert z1.accumulation == z2.accumulation == 8
    assert z2.seconds("communication") > z1.seconds("communication")


def test_multi_node_uses_the_node_network():
    cluster = Cluster(gpus=16, gpus_per_node=8)
    t = step_time(MODEL, SHAPE, cluster, Option(2), read_settings(
        {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}},
        MODEL, 16), Hardware(A100, inter_node_gb_s=25.0))
    # 14 GB x 15/16 over the node's 25 GB/s, twice (reduce-scatter + all-gather)
    assert t.seconds("communication") == pytest.approx(2 * 14e9 * 15 / 16 / 25e9)
    assert t.bound == "communication"


def test_zeropp_quantizes_and_keeps_the_backward_gather_in_the_node():
    cluster = Cluster(gpus=16, gpus_per_node=8)
    s = read_settings({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                       "zero_optimization": {"stage": 3}}, MODEL, 16)
    hw = Hardware(A100, inter_node_gb_s=25.0)
    plain = step_time(MODEL, SHAPE, cluster, Option(3), s, hw)
    zpp = step_time(MODEL, SHAPE, cluster, Option(3), s, hw, zeropp=ZeroPlusPlus(True, True, 8))
    network = 14e9 * 15 / 16 / 25e9
    assert plain.seconds("communication") == pytest.approx(3 * network)
    # qwZ: int8 forward gather (half); hpZ: backward gather of 8 ranks over NVLink; qgZ: int4 gradients (a quarter)
    assert zpp.seconds("communication") == pytest.approx(0.5 * network + 0.5 * 14e9 * 7 / 8 / 300e9 + 0.25 * network)


def test_hardware_rejects_bad_values():
    for kwargs in ({"efficiency": 0}, {"efficiency": 1.5}, {"cpu_cores": 0}, {"nvme_gb_s": -1.0},
                   {"launcher": "mpirun"}):
        with pytest.raises(ValueError):
            Hardware(A100, **kwargs)


def test_hardware_defaults_become_assumed_inputs_naming_their_flags():
    from zeroadvisor.hardware.machine import DEFAULTS
    from zeroadvisor.memory.assumed import hardware_assumptions

    hw = Hardware(None, cpu_cores=64, defaulted=("efficiency", "nvme_gb_s"))
    assumed = hardware_assumptions(hw)
    assert [a.flag for a in assumed] == ["--efficiency", "--nvme-bandwidth"]
    assert [a.value for a in assumed] == [DEFAULTS["efficiency"][0], DEFAULTS["nvme_gb_s"][0]]
    assert all("set it with flag --" in a.message() for a in assumed)
    assert hardware_assumptions(Hardware(None)) == []


def test_offloaded_gradients_to_pageable_memory_do_not_overlap_the_backward_pass():
    # CUDA Runtime API, "API synchronization behavior": a device-to-pageable-host copy returns when done, so with
    # pin_memory off (the default before DeepSpeed PR 8207) the partition's gradients (P/8 x 2 B over PCIe 32 GB/s)
    # add to the pass.
    def run(pin: bool):
        config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
                  "optimizer": {"type": "AdamW"},
                  "zero_optimization": {"stage": 2, "overlap_comm": True,
                                        "offload_optimizer": {"device": "cpu", "pin_memory": pin}}}
        return step_time(MODEL, SHAPE, CLUSTER, Option(2, "cpu", "none"), read_settings(config, MODEL, 8),
                         Hardware(A100), global_batch=8)

    copy = P / 8 * 2 / 32e9
    assert run(False).step_time_s - run(True).step_time_s == pytest.approx(copy, rel=1e-6)


# -- ZeRO-3 host work per module fetch (throughput/host.py) ------------------------------------------------------

def test_module_count_of_a_llama_layout_by_hand():
    from zeroadvisor.throughput.host import modules_with_parameters

    # LlamaDecoderLayer: q, k, v, o, gate, up, down projections + 2 RMSNorms = 9; x 32 + embed_tokens, norm, lm_head
    llama = ModelSpec(parameters=P, num_layers=32, hidden_size=4096, intermediate_size=11008, gated_mlp=True)
    assert modules_with_parameters(llama)[0] == 32 * 9 + 3
    assert modules_with_parameters(ModelSpec(parameters=P, modules_with_parameters=148))[0] == 148
    assert modules_with_parameters(MODEL)[0] is None


def test_zero3_module_fetches_run_on_the_host_beside_the_compute():
    from zeroadvisor.throughput.host import ZERO3_FETCH_HOST_S, ZERO3_FETCH_WAIT_S

    # 10,000 modules x the measured seconds per fetch, once in forward and once in backward; full checkpointing
    # fetches again in the recomputed forward (3 per micro step)
    many = ModelSpec(parameters=P, modules_with_parameters=10_000)
    for checkpointing, passes in (("none", 2), ("full", 3)):
        shape = TrainingShape(sequence_length=2048, activation_checkpointing=checkpointing)
        t = step_time(many, shape, CLUSTER, Option(3), _settings(3), Hardware(A100))
        assert t.seconds("host") == pytest.approx(passes * 10_000 * ZERO3_FETCH_HOST_S)
    # a pass takes the longer of compute and host work: with 1e6 modules the host binds (forward: 1 fetch each)
    huge = ModelSpec(parameters=P, modules_with_parameters=1_000_000)
    t = step_time(huge, SHAPE, CLUSTER, Option(3), _settings(3), Hardware(A100))
    assert t.bound == "host"
    # + the wait per fetch on the compute stream, which adds to the pass (host.py ZERO3_FETCH_WAIT_S)
    assert t.step_time_s == pytest.approx(2 * 1_000_000 * (ZERO3_FETCH_HOST_S + ZERO3_FETCH_WAIT_S))
    assert _run(Option(2)).seconds("host") == 0


def test_zero3_fetch_waits_add_to_the_pass_with_more_than_one_rank():
    from zeroadvisor.throughput.host import ZERO3_FETCH_WAIT_S

    many = ModelSpec(parameters=P, modules_with_parameters=10_000)
    without = step_time(many, SHAPE, CLUSTER, Option(3), _settings(3), Hardware(A100), layout=Parallel(data=1))
    t = step_time(many, SHAPE, CLUSTER, Option(3), _settings(3), Hardware(A100))
    (wait,) = [term for term in t.terms if term.what.startswith("ZeRO-3 fetch waits")]
    assert wait.component == "communication" and wait.seconds == pytest.approx(2 * 10_000 * ZERO3_FETCH_WAIT_S)
    assert "fetch_sub_module" in wait.source
    # one rank gathers nothing (partition_parameters.py _no_gather_coalesced): no wait
    assert not [term for term in without.terms if term.what.startswith("ZeRO-3 fetch waits")]
    # ZeRO-2 fetches nothing
    assert not [term for term in _run(Option(2)).terms if term.what.startswith("ZeRO-3 fetch waits")]


def test_fetch_cost_is_the_measured_one():
    import json

    from conftest import REPO
    from zeroadvisor.throughput.host import ZERO3_FETCH_HOST_S

    measured = json.loads((REPO / "benchmarks" / "zero3_fetch_overhead.json").read_text())
    assert ZERO3_FETCH_HOST_S == pytest.approx(measured["by_ranks"]["1"]["per_module_fetch_s"], rel=0.05)


@pytest.mark.parametrize(("command", "launcher"), [
    ("torchrun --nproc_per_node 8 train.py --deepspeed ds.json", "torchrun"),
    ("accelerate launch --num_processes 8 train.py --deepspeed ds.json", "accelerate"),
    ("deepspeed --num_gpus 8 train.py --deepspeed ds.json", "deepspeed"),
])
def test_the_launch_command_names_the_launcher(command, launcher):
    from zeroadvisor.inputs.command import Command
    from zeroadvisor.inputs.request import Request
    from zeroadvisor.inputs.run import build
    from zeroadvisor.inputs.trainer import read_trainer

    assert read_trainer(None, command).launcher == launcher
    given = {"config": None, "params": "7B", "gpus": 8, "gpu_memory": "80GiB", "launch": command, "launcher": None}
    hw = build(Request.taking(Command.CHECK, **given)).hardware
    assert hw.launcher == launcher and "launcher" not in hw.defaulted
    flag = build(Request.taking(Command.CHECK, **{**given, "launcher": "deepspeed"}))
    assert flag.hardware.launcher == "deepspeed"  # the flag wins


# -- the optimizer step on the GPU (gpu_step.py) ----------------------------------------------------------------

def test_gpu_step_bytes_per_parameter_by_hand():
    from zeroadvisor.throughput.gpu_step import gpu_step_bytes

    # bf16 + AdamW (2 fp32 states): bf16 grad read + fp32 written (2 + 4); Adam reads p, g, m, v and writes p, m, v
    # (7 x 4 = 28, multi_tensor_adam.cu); fp32 master read + bf16 written (4 + 2): 40 B
    assert gpu_step_bytes(Precision.BF16, 2, 0.0).total == 6 + 28 + 6
    # gradient_clipping 1.0 adds the norm's read of the bf16 grads (2) and the clip's mul_ on fp32 grads (4 + 4)
    assert gpu_step_bytes(Precision.BF16, 2, 1.0).overflow_and_clip == 2 + 8
    # fp16: the overflow check reads the grads (2) and unscaling by the loss scale reads+writes them in fp32 (8)
    assert gpu_step_bytes(Precision.FP16, 2, 0.0).total == 6 + 28 + 6 + 2 + 8
    assert gpu_step_bytes(Precision.FP16, 2, 1.0).overflow_and_clip == 2 + 2 + 8  # the clip shares the unscale's mul_
    # fp32: no conversions; Adam 28; clipping reads the fp32 grads (4) and rescales them (8)
    assert gpu_step_bytes(Precision.FP32, 2, 1.0).total == 28 + 4 + 8
    # SGD without momentum: p, g read, p written (12) between the two conversions
    assert gpu_step_bytes(Precision.BF16, 0, 0.0).total == 6 + 12 + 6


A100_HBM = GpuSpec("A100-SXM4-80GB", 81920, 312.0, 300.0, 32.0, "datasheet", memory_gb_s=2039.0)


@pytest.mark.parametrize("stage, stepped", [(0, P), (1, P / 8), (2, P / 8), (3, P / 8)])
def test_gpu_optimizer_step_adds_its_bytes_over_hbm_after_the_backward(stage, stepped):
    # ZeRO-0 steps all 7e9 parameters, ZeRO-1/2/3 their 1/8: x 40 B (bf16 AdamW) / 2039 GB/s (A100 datasheet)
    with_hbm = _run(Option(stage), hw=Hardware(A100_HBM))
    without = _run(Option(stage), hw=Hardware(A100))
    expected = stepped * 40 / 2039e9
    assert with_hbm.step_time_s - without.step_time_s == pytest.approx(expected)
    term = next(t for t in with_hbm.terms if t.what == "optimizer step on the GPU")
    assert term.seconds == pytest.approx(expected)
    assert any("no memory bandwidth" in n for n in without.notes)


def test_offloaded_optimizer_has_no_gpu_step():
    t = _run(Option(2, "cpu"), hw=Hardware(A100_HBM))
    assert not any(t.what == "optimizer step on the GPU" for t in t.terms)


def test_gradient_clipping_reaches_the_gpu_step():
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "gradient_clipping": 1.0,
              "zero_optimization": {"stage": 2}}
    clipped = step_time(MODEL, SHAPE, CLUSTER, Option(2), read_settings(config, MODEL, 8), Hardware(A100_HBM))
    plain = _run(Option(2), hw=Hardware(A100_HBM))
    assert clipped.step_time_s - plain.step_time_s == pytest.approx(P / 8 * (2 + 8) / 2039e9)
    assert read_settings({**config, "gradient_clipping": "auto"}, MODEL, 8).gradient_clipping == 1.0
    assert read_settings({"zero_optimization": {"stage": 2}}, MODEL, 8).gradient_clipping == 0.0


# -- the offloaded step's host passes beside the Adam kernel (offload.py, benchmarks/offload_step.py) -------------

def test_offloaded_host_passes_by_hand():
    from zeroadvisor.throughput.offload import host_passes, host_passes_seconds

    # stage 1/2 unscale only with clipping or fp16's loss scale; stage 3's unscale_and_clip_grads always mul_s
    assert host_passes(2, Precision.BF16, 0.0) == ("to_16bit",)
    assert host_passes(2, Precision.BF16, 1.0) == host_passes(2, Precision.FP16, 0.0) \
        == host_passes(3, Precision.BF16, 0.0) == ("unscale", "to_16bit")
    # 7e9 / 8 parameters, one thread (torchrun, 8 processes): (0.295 + 0.430) ns each = 0.634 s; the memory cap
    # (8 processes x 14 B x 8.75e8 / 200 GB/s = 0.49 s) is lower
    hw = Hardware(A100)
    assert host_passes_seconds(P / 8, ("unscale", "to_16bit"), 8, hw) == pytest.approx(P / 8 * (0.295e-9 + 0.430e-9))
    # the deepspeed launcher shares 48 cores: 6 threads each -> 0.106 s, now under the memory cap 0.49 s
    hw6 = Hardware(A100, launcher="deepspeed")
    assert host_passes_seconds(P / 8, ("unscale", "to_16bit"), 8, hw6) == pytest.approx(8 * 14 * P / 8 / 200e9)


def test_offloaded_step_adds_its_host_passes():
    t = _run(Option(3, "cpu"))
    term = next(t for t in t.terms if t.what == "the offloaded step's other host passes")
    assert term.seconds == pytest.approx(P / 8 * (0.295e-9 + 0.430e-9))  # unscale + to_16bit, one thread


def test_host_pass_costs_are_the_measured_ones():
    import json

    from conftest import REPO
    from zeroadvisor.throughput.offload import HOST_PASS_S_PER_PARAM_THREAD

    measured = json.loads((REPO / "benchmarks" / "offload_step.json").read_text())["model_constants"]
    for name in ("unscale", "to_16bit"):
        assert HOST_PASS_S_PER_PARAM_THREAD[name] == pytest.approx(measured[f"{name}_s_per_param_thread"], rel=0.05)


def test_the_estimates_own_config_gives_the_global_batch():
    """per_option reads the global batch the estimate's settings resolved from the config it was made of
    (Settings.global_batch: for an Accelerate YAML or a Trainer-filled config, the one DeepSpeed gets), not
    from the file again: train_batch_size 64 = micro 2 x accumulation 4 x 8 GPUs."""
    from zeroadvisor.memory.estimate import estimate
    from zeroadvisor.throughput import per_option

    config = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 2}}
    est = estimate(config, MODEL, SHAPE, CLUSTER)
    assert est.settings.global_batch == 64
    timed = per_option(est, Hardware(A100))[Option(2)]
    assert timed.accumulation == 4 and timed.tokens_per_step == 64 * 2048
