"""A built Estimate is a value: no attribute of it or of its StageEstimates can be set, its sequences are
tuples, and what a caller adds (the release said, the machine facts a step time assumed) is a new Estimate
that leaves the one it was made from as it was. (--padding longest builds the configured stage again with its
padded fit: tests/test_padding.py.)"""

from __future__ import annotations

import dataclasses

import pytest

from zeroadvisor.advisor.check import CheckOptions, check_document
from zeroadvisor.config.source import Document
from zeroadvisor.hardware.table import GPUS
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape
from zeroadvisor.throughput import DEFAULTS, Hardware
from zeroadvisor.throughput.timed import step_times

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}
CONFIG = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
GPU = GPUS["A100-SXM4-80GB"]


def _estimate():
    cluster = Cluster(gpus=8, gpu=GPU, gpu_memory=GPU.memory_bytes)
    return estimate(CONFIG, spec_from_hf_config(LLAMA2_7B), TrainingShape(2048, "full"), cluster)


def test_an_estimate_and_its_stages_cannot_be_changed():
    result = _estimate()
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.assumed = ()  # type: ignore[misc]
    stage = result.stages[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        stage.verdict = None  # type: ignore[misc]
    for sequence in (result.stages, result.skipped, result.assumptions, result.assumed, stage.terms, stage.notes):
        assert isinstance(sequence, tuple)


def test_step_times_add_the_machine_facts_to_a_new_estimate():
    result = _estimate()
    before = result.to_dict()
    timed, steps = step_times(result, Hardware(GPU, defaulted=tuple(DEFAULTS)))
    assert steps and result.to_dict() == before  # the estimate given is as it was
    assert timed is not result and timed.stages == result.stages
    added = timed.assumed[len(result.assumed):]
    assert timed.assumed[:len(result.assumed)] == result.assumed and all(a.name for a in added)


def test_the_check_keeps_the_estimate_it_judged():
    """The check's result carries the machine facts its ranking assumed; the advice reads the same estimate."""
    cluster = Cluster(gpus=8, gpu=GPU, gpu_memory=GPU.memory_bytes)
    options = CheckOptions(model=spec_from_hf_config(LLAMA2_7B), shape=TrainingShape(2048, "full"), cluster=cluster)
    checked = check_document(Document("ds.json", "", CONFIG), options)
    assert checked.estimate is not None and checked.advice is not None
    assert checked.advice.estimate is checked.estimate
    plain = estimate(CONFIG, options.model, options.shape, cluster)
    assert len(checked.estimate.assumed) > len(plain.assumed)  # the step time's assumed machine facts

