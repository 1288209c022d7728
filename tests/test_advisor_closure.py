"""Closure of the advice (issue 10 item 3): over a grid of models, clusters and configs, once the fix's patch is
written and its actions are done (a cluster action is done by checking on the cluster it names), ``check``
reports neither does-not-fit nor host-memory-insufficient, and a second ``--fix`` changes nothing, or (one change
before several, issue 36) only moves to a faster rung that fits, after which a third changes nothing.

Model shapes are the published Hugging Face config.json values (facebook/opt-1.3b, meta-llama/Llama-2-7b-hf
from sample_configs/models, Llama-2-70b-hf); GPU capacities come from the GPU table.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog_models import LLAMA2_7B, LLAMA2_70B, OPT_1_3B
from zeroadvisor.advisor.check import CheckOptions, check_document, combined_patch
from zeroadvisor.advisor.cluster import CLUSTER_SEARCH_LIMIT
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import parse
from zeroadvisor.hardware.gpus import resolve_gpu
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape

MODELS = {"opt-1.3b": OPT_1_3B, "llama-2-7b": LLAMA2_7B, "llama-2-70b": LLAMA2_70B}
GPUS = ("A10G", "A100-SXM4-40GB", "H100-SXM5-80GB")
GB = 10**9
BLOCKING = {"ZA801", "ZA805"}
IMPROVEMENTS = {"ZA802", "ZA804"}  # a faster rung that fits: lower-stage-fits, offload-not-needed


def _check(config: dict, options: CheckOptions):
    return check_document(parse(json.dumps(config, indent=2), "ds.json"), options)


def _done(options: CheckOptions, findings) -> CheckOptions:
    """The options once every cluster action of the findings is done."""
    for finding in findings:
        for action in finding.actions:
            if action.kind == "cluster":
                grown = {key: action.values[key] for key in ("gpus", "gpus_per_node", "cpu_memory", "nvme")
                         if key in action.values}
                options = replace(options, cluster=replace(options.cluster, **grown))
    return options


configs = st.builds(
    lambda stage, offload, micro, accumulation, total: {
        "bf16": {"enabled": True}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}},
        "train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": accumulation,
        **({"train_batch_size": "derived"} if total else {}),
        "zero_optimization": {"stage": stage, **({"offload_optimizer": {"device": offload}} if offload else {})}},
    st.integers(0, 3), st.sampled_from([None, "cpu"]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 4]),
    st.booleans())


@pytest.mark.slow  # a property test
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(sorted(MODELS)), gpu=st.sampled_from(GPUS), gpus=st.sampled_from([1, 2, 8, 16]),
       cpu_memory=st.sampled_from([None, 256 * GB, 1024 * GB]), nvme=st.sampled_from([None, 2000 * GB]),
       sequence=st.sampled_from([1024, 4096]), checkpointing=st.sampled_from(["none", "full"]), config=configs)
def test_fix_and_actions_make_it_fit_and_a_second_fix_changes_nothing(model, gpu, gpus, cpu_memory, nvme, sequence,
                                                                      checkpointing, config):
    if config.get("train_batch_size") == "derived":
        config["train_batch_size"] = config["train_micro_batch_size_per_gpu"] * \
            config["gradient_accumulation_steps"] * gpus
    card = resolve_gpu(gpu)
    options = CheckOptions(model=spec_from_hf_config(MODELS[model]), shape=TrainingShape(sequence, checkpointing),
                           cluster=Cluster(gpus=gpus, cpu_memory=cpu_memory, nvme=nvme, gpu=card))
    first = _check(config, options)
    blocking = [f for f in first.findings if f.code in BLOCKING]
    if any(f.fix is None and not f.actions for f in blocking):
        # nothing fits, not even on a larger cluster, or only with a change the config cannot hold (LoRA/QLoRA, a
        # bigger card: advisor/nofit.py): the message says so
        assert all(f"cluster of up to {CLUSTER_SEARCH_LIMIT} GPUs" in f.message or "no fix is written" in f.message
                   for f in blocking if f.fix is None and not f.actions)
        return
    options = _done(options, first.findings)
    if any(a.kind == "gradient-checkpointing" for f in first.findings for a in f.actions):
        levels = {a.values["level"] for f in first.findings for a in f.actions if a.kind == "gradient-checkpointing"}
        [level] = levels  # one combined fix: one level
        options = replace(options, shape=replace(options.shape, activation_checkpointing=level))
    fixed = mp.apply(config, combined_patch(first.findings))
    second = _check(fixed, options)
    assert not [f.code for f in second.findings if f.code in BLOCKING], [f.message for f in second.findings]
    again = mp.apply(fixed, combined_patch(second.findings))
    if again != fixed:
        # one change before several (issue 36 item 2): the first fix is the single change that makes the run fit;
        # once it fits, a faster rung of the ladder that also fits is the next check's advice (lower-stage-fits,
        # offload-not-needed), never a blocking one, and the advice converges: a third --fix changes nothing
        improving = {f.code for f in second.findings if f.fix}
        assert improving <= IMPROVEMENTS, (improving, json.dumps(combined_patch(second.findings)))
        third = _check(again, options)
        assert not [f.code for f in third.findings if f.code in BLOCKING], [f.message for f in third.findings]
        assert mp.apply(again, combined_patch(third.findings)) == again, json.dumps(combined_patch(third.findings))
