"""advisor/written.py alone: a candidate as it will be written on the base (the config with its lint fixes and
bucket tuning), and its estimate there."""

from __future__ import annotations

import dataclasses

from zeroadvisor.advisor.check import combined_patch
from zeroadvisor.advisor.estimates import Estimates
from zeroadvisor.advisor.written import Written, stage_of
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import Document
from zeroadvisor.deepspeed.effective import GAS, MBS, TBS
from zeroadvisor.hardware.table import GPUS
from zeroadvisor.lint.context import LintOptions
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.options import Option
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape
from zeroadvisor.rules.linter import lint_document
from zeroadvisor.throughput import Hardware, NoStepTime, Throughput
from zeroadvisor.vocab import Device

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}
GB = 10**9
# a typo lint fixes (overlap_com), 1e9-element buckets (2 GB) large-buckets tunes on a 24 GB card,
# ZeRO-1 that does not fit
CONFIG = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "bf16": {"enabled": True},
          "zero_optimization": {"stage": 1, "overlap_com": True, "reduce_bucket_size": 1e9}}
SHAPE = TrainingShape(2048, "none")
CLUSTER = Cluster(gpus=8, gpu_memory=24 * GB, cpu_memory=400 * GB)


def _lint_fixes(data: dict, gpus: int) -> dict:
    return combined_patch(lint_document(Document("ds.json", "", data), LintOptions(gpus=gpus)))


def _written(config: dict = CONFIG, tune: bool = True) -> Written:
    spec = spec_from_hf_config(LLAMA2_7B)
    return Written(config, spec, SHAPE, CLUSTER, Estimates(spec, CLUSTER, "deepspeed"), _lint_fixes, tune)


def test_base_is_the_config_with_its_fixes_and_tuning():
    w = _written()
    assert w.tuning is not None and w.tuning.keys == ("zero_optimization.allgather_bucket_size",
                                                     "zero_optimization.reduce_bucket_size")
    zero = w.base["zero_optimization"]
    assert zero["overlap_comm"] is True and "overlap_com" not in zero
    assert zero["reduce_bucket_size"] == w.tuning.target
    assert w.configured == Option(1) and w.micro_batch == 8 and w.global_batch == 64
    assert _lint_fixes(w.base, 8) == {}
    untuned = _written(tune=False)
    assert untuned.tuning is None and untuned.base["zero_optimization"]["reduce_bucket_size"] == 1e9


def test_outcome_is_what_its_patch_writes():
    """A fitting change's patch applied to the base is estimated as the outcome says, and fits."""
    w = _written()
    change = w.change(Option(3, Device.CPU), micro_batch=1)
    found = w.outcome(change)
    assert found is not None and found.patch is not None
    assert found.patch[MBS] == 1 and found.patch[GAS] == 8  # 64 = 1 x 8 x 8 GPUs
    assert found.patch["zero_optimization"]["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
    final = mp.apply(w.base, found.patch)
    checked = stage_of(estimate(final, w.model, change.shape, CLUSTER), change.option)
    assert checked is not None and checked.comfortable
    assert checked.to_dict() == found.stage.to_dict()
    assert _lint_fixes(final, 8) == {}  # a second check finds nothing more to write


def test_what_does_not_fit_has_no_outcome():
    w = _written()
    change = w.change(w.configured)
    stage = w.evaluate(change)
    assert stage is not None and not stage.comfortable and not w.fits(change)
    assert w.outcome(change) is None


def test_free_batch_is_estimated_without_keeping_the_global_batch():
    w = _written()
    change = w.change(w.configured, micro_batch=32, free_batch=True)
    assert change.config_patch == {MBS: 32, GAS: None, TBS: None}
    assert w.batch.patch(32) is None  # 64 cannot be kept at 32 per GPU on 8 GPUs
    assert w.config(change)[MBS] == 32 and TBS not in w.config(change)


def test_step_time_needs_a_machine():
    w = _written()
    change = w.change(Option(3, Device.CPU), micro_batch=1)
    stage = w.evaluate(change)
    assert stage is not None
    missing = w.step_time(change, stage, None)
    assert isinstance(missing, NoStepTime) and "--gpu" in missing.reason
    timed = w.step_time(change, stage, Hardware(GPUS["A100-SXM4-80GB"]))
    assert isinstance(timed, Throughput) and timed.step_time_s > 0


def test_stage_of_an_option_the_estimate_lacks():
    w = _written()
    assert stage_of(w.base_estimate, Option(1)) is not None
    other = dataclasses.replace(w.base_estimate, stages=[])
    assert stage_of(other, Option(1)) is None
