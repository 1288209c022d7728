"""advisor/patch.py alone: the merge patch a candidate writes (option, batch keys, bucket sizes, lint fixes),
each checked on what DeepSpeed and the estimate read of the config it writes."""

from __future__ import annotations

import pytest

from zeroadvisor.advisor.candidates import divisors
from zeroadvisor.advisor.change import NVME_PATH_PLACEHOLDER, SP_KEY
from zeroadvisor.advisor.check import combined_patch
from zeroadvisor.advisor.patch import (
    BUCKET_KEYS,
    BatchKeys,
    bucket_target,
    bucket_tuning,
    diff,
    lint_closure,
    nvme_path,
    option_patch,
    renamed_keys,
    same,
    shared_writes,
    written_buckets,
    written_patch,
)
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import Document
from zeroadvisor.deepspeed.settings import as_settings
from zeroadvisor.lint.context import LintOptions
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.options import Option
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape
from zeroadvisor.rules.linter import lint_document
from zeroadvisor.vocab import Device

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}
GB = 10**9
CPU, NVME, NONE = Device.CPU, Device.NVME, Device.NONE


@pytest.mark.parametrize("base,option,patch", [
    ({"zero_optimization": {"stage": 1}}, Option(3, CPU),
     {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True}}}),
    # NVMe without a path anywhere: the placeholder an action asks to point at a mount
    ({"zero_optimization": {"stage": 3}}, Option(3, NVME),
     {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "pin_memory": True,
                                                               "nvme_path": NVME_PATH_PLACEHOLDER}}}),
    # a path the other block has is kept
    ({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/local"}}},
     Option(3, NVME, NVME),
     {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "pin_memory": True,
                                                               "nvme_path": "/local"}}}),
    # below stage 3 the stage-3-only keys would do nothing, and the legacy offload key goes
    ({"zero_optimization": {"stage": 3, "stage3_max_live_parameters": 10**9, "cpu_offload": True,
                            "offload_param": {"device": "cpu"}}}, Option(2),
     {"zero_optimization": {"stage": 2, "offload_param": None, "cpu_offload": None,
                            "stage3_max_live_parameters": None}}),
    # the legacy boolean form is written anew, without nulls
    ({"zero_optimization": True}, Option(2, CPU),
     {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True}}}),
])
def test_option_patch(base, option, patch):
    assert option_patch(base, option) == patch


@pytest.mark.parametrize("option", [Option(0), Option(1), Option(2, CPU), Option(3), Option(3, CPU, CPU),
                                    Option(3, NONE, CPU)])
def test_option_patch_makes_deepspeed_run_the_option(option):
    """The estimate of the patched config has ``option`` as its configured run, from any starting option."""
    spec = spec_from_hf_config(LLAMA2_7B)
    for base in ({"zero_optimization": {"stage": 1}},
                 {"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}):
        written = mp.apply(base, option_patch(base, option))
        configured = estimate(written, spec, TrainingShape(1024), Cluster(gpus=8)).configured
        assert configured is not None and configured.option == option


def _keys(config: dict, gpus: int = 8, trainer: bool = False) -> BatchKeys:
    ds = as_settings(config)
    micro = ds.batch.micro_batch or 8
    return BatchKeys(ds, gpus, micro, trainer)


@pytest.mark.parametrize("config", [
    {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1},
    {"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2},
    {"train_batch_size": 128, "train_micro_batch_size_per_gpu": 8},
])
def test_batch_patch_keeps_deepspeeds_batch_assertion(config):
    """tbs == micro x accumulation x world (runtime/config.py _batch_assertion) at every smaller micro batch, and
    under Ulysses, whose world is the GPUs / sequence_parallel_size."""
    keys = _keys(config)
    tbs = as_settings(config).batch.global_batch(8)
    for micro in divisors(8):
        for sp in (None, 2, 4):
            patch = keys.patch(micro, {SP_KEY: sp} if sp else None)
            assert patch is not None
            if micro == 8 and not sp:
                assert patch == {}  # the configured batch: nothing to write
                continue
            written = mp.apply(config, {**patch, **({SP_KEY: sp} if sp else {})})
            _, micro_written, gas = as_settings(written).batch.counts
            world = as_settings(written).batch_world(8)  # DeepSpeed's: the GPUs over sequence_parallel_size
            assert world == 8 // (sp or 1)
            assert micro_written == micro and micro_written * (gas or 1) * world == tbs


def test_batch_patch_refuses_what_cannot_keep_the_global_batch():
    assert _keys({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8}).patch(3) is None
    assert _keys({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": "auto"}).patch(2) is None
    assert _keys({"train_micro_batch_size_per_gpu": 8}).patch(8) == {}  # nothing changes
    assert _keys({"train_micro_batch_size_per_gpu": 8}).smaller(8) is None


def test_trainer_batch_is_an_action_not_a_key():
    """"auto" batch keys: the HF Trainer's arguments change, so nothing is written, where its micro batch
    divides the configured one."""
    keys = _keys({"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto"}, trainer=True)
    assert keys.patch(2) == {} and keys.patch(3) is None


def _llama_stage2(buckets: float) -> tuple[dict, object]:
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 2, "reduce_bucket_size": buckets, "allgather_bucket_size": buckets}}
    result = estimate(config, spec_from_hf_config(LLAMA2_7B), TrainingShape(1024, "full"), Cluster(gpus=8))
    return config, result.configured


def test_bucket_tuning_shrinks_large_buckets_to_the_target():
    config, stage = _llama_stage2(5e8)
    target = bucket_target(spec_from_hf_config(LLAMA2_7B))
    assert target == 4096 * 4096  # the Hugging Face fill: hidden_size²
    # the 5e8-element reduce bucket: 1 GB of bf16 gradients, past 5% of a 16 GB budget
    assert bucket_tuning(config, stage, 40 * GB, target) is None
    tuning = bucket_tuning(config, stage, 16 * GB, target)
    assert tuning is not None and tuning.target == target
    assert tuning.patch == {"zero_optimization": dict.fromkeys(BUCKET_KEYS, target)}
    assert tuning.keys == ("zero_optimization.allgather_bucket_size", "zero_optimization.reduce_bucket_size")
    # the bucket (1 GB of bf16 gradients) and the reduction's flat copy of it beyond the loss's tensors: both
    # shrink with the bucket
    (copy,) = [t for t in stage.terms if t.key == "allreduce_bucket"]
    assert tuning.buffers == 10**9 + copy.nbytes and copy.upper == 10**9
    tuned = estimate(mp.apply(config, tuning.patch), spec_from_hf_config(LLAMA2_7B), TrainingShape(1024, "full"),
                     Cluster(gpus=8)).configured
    assert tuned is not None and stage is not None and tuned.per_gpu["buffers"] < stage.per_gpu["buffers"]


def test_bucket_tuning_leaves_small_or_unbudgeted_buckets():
    config, stage = _llama_stage2(5e8)
    target = bucket_target(spec_from_hf_config(LLAMA2_7B))
    assert bucket_tuning(config, stage, None, target) is None  # no GPU memory given: no share to judge
    assert bucket_tuning(config, stage, 10**15, target) is None  # a small share of a huge card
    assert bucket_tuning(config, stage, 10**15, target, needed=True) is not None  # unless they keep it from fitting
    small, small_stage = _llama_stage2(1e6)
    assert bucket_tuning(small, small_stage, 16 * GB, target, needed=True) is None  # already below the target
    auto = mp.apply(config, {"zero_optimization": dict.fromkeys(BUCKET_KEYS, "auto")})
    assert bucket_tuning(auto, stage, 16 * GB, target) is None  # the integration fills them


def _lint_fixes(data: dict, gpus: int) -> dict:
    return combined_patch(lint_document(Document("ds.json", "", data), LintOptions(gpus=gpus)))


def test_lint_closure_applies_the_fixes_until_none_is_left():
    config = {"train_batch_size": 8, "zero_optimization": {"stage": 2, "overlap_com": True,
                                                           "offload_optimizer": {"device": "cpu", "pin_memmory": True}}}
    fixed = lint_closure(config, _lint_fixes, 8)
    assert fixed == {"train_batch_size": 8, "zero_optimization": {
        "stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True}, "overlap_comm": True}}
    assert _lint_fixes(fixed, 8) == {}
    assert lint_closure(fixed, _lint_fixes, 8) == fixed


@pytest.mark.parametrize("source,target", [
    ({"a": 1, "b": {"c": 2, "d": 3}}, {"a": 1.0, "b": {"c": 2}}),
    ({"a": True}, {"a": 1}),
    ({"a": [1, 2]}, {"a": [1, 2], "e": None}),
    ({"zero_optimization": {"stage": 3}}, {"zero_optimization": True}),
])
def test_diff_is_the_patch_from_source_to_target(source, target):
    patch = diff(source, target)
    written = mp.apply(source, patch)
    if None not in target.values():  # a null in a merge patch deletes: the one value a patch cannot write
        assert same(written, target)
    assert diff(target, target) == {}


def test_same_is_json_equality():
    assert same({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]})
    assert not same(1, 1.0) and not same(True, 1) and not same([1], [1, 2]) and not same({"a": 1}, {"b": 1})


def test_nvme_path():
    zero = {"offload_optimizer": {"device": "cpu", "nvme_path": "/a"}, "offload_param": {"device": "nvme",
                                                                                          "nvme_path": "/b"}}
    assert nvme_path({"zero_optimization": zero}) == "/b"
    assert nvme_path({"zero_optimization": zero}, any_device=True) == "/a"
    assert nvme_path({"zero_optimization": True}) is None


def test_written_patch_writes_the_priced_run_on_the_config_as_given():
    """The fix is from the config as given to the run priced: the lint fixes and buckets of the base, then the
    change. A key a lint fix adds and the change drops is written as a deletion, so --fix, which merges the lint
    finding's own fix under it, still writes the priced run."""
    original = {"zero_optimisation": {"stage": 3}, "train_micro_batch_size_per_gpu": 4}
    lint = {"zero_optimisation": None, "zero_optimization": {"stage": 3, "stage3_max_live_parameters": 10**9}}
    base = mp.apply(mp.apply(original, lint), {"zero_optimization": {"reduce_bucket_size": 4194304}})
    final = mp.apply(base, {"zero_optimization": {"stage": 1, "stage3_max_live_parameters": None}})
    patch = written_patch(original, base, final)
    assert same(mp.apply(original, patch), final)
    assert patch["zero_optimization"]["stage3_max_live_parameters"] is None  # the lint's key, dropped: deleted
    assert same(mp.apply(original, mp.merge(lint, patch)), final)  # what --fix writes (lint's fix under it)
    assert written_buckets(patch) == 4194304 and written_buckets({"zero_optimization": {"stage": 1}}) is None


def test_written_patch_falls_back_to_the_difference_where_merging_cannot_say_it():
    """A base that deletes an object and a change that writes it anew: merged, the patch would keep the old
    object's keys; the plain difference of the two configs writes exactly the run."""
    original = {"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "buffer_count": 9}}}
    base = {"zero_optimization": {"stage": 3}}
    final = {"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}
    assert not same(mp.apply(original, mp.merge(diff(original, base), diff(base, final))), final)
    assert same(mp.apply(original, written_patch(original, base, final)), final)


def test_the_lint_keys_a_fix_still_writes_and_the_renames():
    original = {"zero_optimisation": {"stage": 2}, "bf16": {"enabled": "true"}}
    fixed = {"zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}
    assert renamed_keys(original, fixed) == {"zero_optimisation": "zero_optimization"}
    lint = diff(original, fixed)
    fix = {"zero_optimisation": None, "zero_optimization": {"stage": 1}, "bf16": {"enabled": True}}
    # the stage the change rewrites is not the lint fix's; the rename and the boolean are
    assert shared_writes(lint, fix) == [("zero_optimisation", True), ("bf16.enabled", False)]
