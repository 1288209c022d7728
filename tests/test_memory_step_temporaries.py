"""The optimizer step's temporaries (memory/step_temporaries.py), against hand calculations from torch's code.

A 7.5e9-parameter model on 8 GPUs at ZeRO-2 fp16: the rank's fp32 partition is 7.5e9 / 8 = 937,500,000 elements
(a multiple of 2·N = 16, no padding). torch.optim.AdamW's foreach step (torch/optim/adam.py _multi_tensor_adam)
builds exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs): one fp32 tensor the size of that partition.
"""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.step_temporaries import GRAD_KEY, KEY
from zeroadvisor.model.spec import CLIENT_OPTIMIZER_NAMES, Checkpointing, ModelSpec, TrainingShape

P, N = 7_500_000_000, 8
PART = P // N
SPEC = ModelSpec(parameters=P, largest_layer_parameters=200_000_000)


def temporary(config, shape=None, stage=None, offload="none"):
    est = estimate(config, SPEC, shape or TrainingShape(), Cluster(gpus=N))
    (st,) = [s for s in est.stages if s.option.stage == (stage if stage is not None else est.settings.stage)
             and s.option.offload_optimizer == offload and s.option.offload_param == "none"]
    return sum(t.nbytes for t in st.terms if t.key == KEY), est


def zero(stage, **extra):
    return {"fp16": {"enabled": True}, "zero_optimization": {"stage": stage}, **extra}


def test_the_client_adamw_foreach_step_builds_one_fp32_partition():
    nbytes, est = temporary(zero(2))
    # no sequence length: no activations to free first. The foreach temporary (4 B) sits beside the partition's fp32
    # gradient (4 B), built in the step beside its fp16 cat copy (2 B): max(2 + 4, 4 + 4) = 8 B per element, the
    # temporary's share 8 - 6 (stage_1_and_2.py step; the gradient's share is tests/test_memory_zero3_step.py's)
    assert nbytes == 2 * PART
    assert [a.value for a in est.assumed if a.name == "optim"] == ["adamw_torch"]


@pytest.mark.parametrize("optim", ["adamw_torch_fused", "adamw_apex_fused"])
def test_fused_steps_build_none(optim):
    nbytes, est = temporary(zero(2), TrainingShape(optim=optim))
    assert nbytes == 0 and not [a for a in est.assumed if a.name == "optim"]


def test_deepspeeds_own_optimizer_decides_fused_or_torch():
    adamw = {"optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}
    assert temporary(zero(2, **adamw))[0] == 0  # FusedAdam, in place
    torch_adam = {"optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}}}
    assert temporary(zero(2, **torch_adam))[0] == (4 + 4 - 6) * PART  # beside the step's gradient, as above
    # foreach off: _single_tensor_adam's exp_avg_sq.sqrt() and its division by the bias correction coexist
    single = {"optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True, "foreach": False}}}
    assert temporary(zero(2, **single))[0] == (4 + 2 * 4 - 6) * PART
    # the config's optimizer: the client's optim is not asked for
    assert not [a for a in temporary(zero(2, **adamw))[1].assumed if a.name == "optim"]


def test_stage3_steps_one_sub_group_and_stage0_the_whole_fp32_group():
    # stage 3: the foreach temporary (4 B) sits beside the sub-group's fp32 gradient (4 B), built in the step
    # beside its fp16 cat copy (2 B): max(2 + 4, 4 + 4) = 8 B per element, the temporary's share 8 - 6
    # (memory/step_temporaries.py step_terms; tests/test_memory_zero3_step.py)
    assert temporary(zero(3))[0] == 2 * min(1_000_000_000, P // N)  # sub_group_size 1e9 > P/N: the partition
    small = zero(3)
    small["zero_optimization"]["sub_group_size"] = 100_000_000
    assert temporary(small)[0] == 2 * 100_000_000
    assert temporary(zero(0))[0] == 4 * P  # FP16_Optimizer: one flat fp32 group, not partitioned


def test_an_offloaded_optimizer_steps_on_the_host():
    assert temporary(zero(2), stage=2, offload="cpu")[0] == 0


def test_the_activations_freed_before_the_step_are_reused():
    shape = TrainingShape(sequence_length=2048, micro_batch_size=1, activation_checkpointing=Checkpointing.FULL)
    model = ModelSpec(parameters=P, largest_layer_parameters=200_000_000, num_layers=32, hidden_size=4096,
                      vocab_size=32000, num_attention_heads=32, intermediate_size=11008)
    est = estimate(zero(2), model, shape, Cluster(gpus=N))
    st = next(s for s in est.stages if s.configured)
    activations = st.per_gpu["activations"]
    assert 0 < activations < 4 * PART
    # the step's working set (the fp32 gradient partition, 4 B, beside the foreach temporary, 4 B; 6 B while the
    # fp16 cat copy is cast) reuses the activations freed before it: the gradient's share 6 B - activations, the
    # temporary's the rest (stage_1_and_2.py step: single_grad_partition is built after backward)
    grad = sum(t.nbytes for t in st.terms if t.key == GRAD_KEY)
    assert grad == 6 * PART - activations
    assert sum(t.nbytes for t in st.terms if t.key == KEY) == 8 * PART - activations - grad
    assert not [t for t in st.terms if t.key in ("fp32_grads", "step12_fp32_grads")]


def test_the_names_are_the_trainers():
    assert "adamw_torch" in CLIENT_OPTIMIZER_NAMES and "adamw_torch_fused" in CLIENT_OPTIMIZER_NAMES


def _write(tmp_path, config):
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(config))
    return path


# Qwen1.5-7B-like on 8 x 40 GB at ZeRO-2 fp16 (benchmarks/field/cases/qwen1.5-7b-8xa100-40-z2-fp16.yaml):
# 37.9 GiB without the step's temporary ("tight"), over 40 GiB with it.
BASE = ["--params", "7.72B", "--gpus", "8", "--gpu", "A100-SXM4-40GB", "--format", "json", "--fail-on", "never",
        "--micro-batch", "1", "--precision", "fp16"]


# The same on a 37.5 GiB card: the expected peak is over it with the step's temporary (38.8 GiB), inside it without
# (36.8 GiB, tight: the bound is over the headroom line either way, so on a 40 GB card the optim decides nothing).
DECIDES = [*BASE[:4], "--gpu-memory", "37.5GiB", *BASE[6:]]


def test_the_assumed_optim_is_reported_where_it_changes_the_verdict_and_the_flag_silences_it(tmp_path, cli):
    path = _write(tmp_path, {"train_micro_batch_size_per_gpu": "auto", "fp16": {"enabled": "auto"},
                             "zero_optimization": {"stage": 2, "overlap_comm": True}})
    data = json.loads(cli("check", str(path), *DECIDES).stdout)
    codes = [f["message"] for f in data["findings"] if f["code"] == "ZA808"]
    assert any("--optim" in m for m in codes)
    # on the 40 GB card both are tight: not said
    plain = json.loads(cli("check", str(path), *BASE).stdout)
    assert not any("--optim" in f["message"] for f in plain["findings"] if f["code"] == "ZA808")
    given = json.loads(cli("check", str(path), *DECIDES, "--optim", "adamw_torch_fused").stdout)
    assert not any("--optim" in f["message"] for f in given["findings"] if f["code"] == "ZA808")
    (configured,) = [s for s in given["estimate"]["stages"] if s["configured"]]
    (assumed,) = [s for s in data["estimate"]["stages"] if s["configured"]]
    assert assumed["peak_gpu"] > configured["peak_gpu"]


def test_the_trainer_arguments_give_optim(tmp_path, cli):
    path = _write(tmp_path, {"train_micro_batch_size_per_gpu": "auto", "fp16": {"enabled": "auto"},
                             "zero_optimization": {"stage": 2}})
    args = tmp_path / "train.json"
    # the Trainer's arguments fill the "auto" values (micro batch, fp16) and give the optim
    args.write_text(json.dumps({"optim": "adamw_torch_fused", "per_device_train_batch_size": 1, "fp16": True}))
    data = json.loads(cli("check", str(path), *BASE[:-4], "--training-args", str(args)).stdout)
    assert not [a for a in data["estimate"]["assumed"] if a["name"] == "optim"]
    (configured,) = [s for s in data["estimate"]["stages"] if s["configured"]]
    assert not [t for t in configured["terms"] if t["key"] == "step_temporary"]


def test_a_wrong_optim_name_is_one_line(tmp_path, cli):
    path = _write(tmp_path, zero(2))
    result = cli("check", str(path), *BASE, "--optim", "adam_torch")
    assert result.returncode == 2 and "--optim must be a Hugging Face Trainer optim name" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_torch_adam_with_l2_decay_adds_the_decayed_gradients_and_auto_decay_is_no_number():
    l2 = {"optimizer": {"type": "Adam", "params": {"torch_adam": True, "adam_w_mode": False, "weight_decay": 0.1}}}
    # foreach: the L2 sum is deleted before the sqrt (one temporary); single-tensor: grad + wd·param, sqrt and
    # its division coexist (three) - benchmarks/step_temporaries.md measures both
    # (each beside the step's fp32 gradient, less its 6 B share: test_the_client_adamw_foreach_step_...)
    assert temporary(zero(2, **l2))[0] == (4 + 4 - 6) * PART
    l2["optimizer"]["params"]["foreach"] = False
    assert temporary(zero(2, **l2))[0] == (4 + 3 * 4 - 6) * PART
    auto = {"optimizer": {"type": "Adam", "params": {"torch_adam": True, "adam_w_mode": False, "weight_decay": "auto"}}}
    assert temporary(zero(2, **auto))[0] == (4 + 4 - 6) * PART


def test_an_unmodelled_client_optimizer_is_said_and_counts_nothing():
    nbytes, est = temporary(zero(2), TrainingShape(optim="adafactor"))
    assert nbytes == 0
    st = next(s for s in est.stages if s.configured)
    assert any("adafactor" in n and "not modelled" in n for n in [*est.assumptions, *st.notes])
