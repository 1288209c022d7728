"""advisor/estimates.py alone: the estimate cache's key is the config's typed value, and each estimate is made
once per (config, shape)."""

from __future__ import annotations

import copy
import dataclasses
import datetime

import pytest

from zeroadvisor.advisor.estimates import EstimateKey, Estimates, frozen
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}
GB = 10**9
CONFIG = {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}}
SHAPE = TrainingShape(2048, "full")


def test_frozen_tells_apart_what_a_config_file_tells_apart():
    """1, 1.0 and true are three values in JSON; key order is kept (the estimate's notes follow it)."""
    values = [frozen({"a": 1}), frozen({"a": 1.0}), frozen({"a": True}), frozen({"a": "1"}), frozen({"a": [1]})]
    assert len(set(values)) == len(values)
    assert frozen({"a": 1, "b": 2}) != frozen({"b": 2, "a": 1})
    assert frozen({"a": [1, {"b": None}]}) == frozen({"a": [1, {"b": None}]})
    assert frozen({"a": [1, {"b": None}]}) != frozen({"a": [1, {"b": False}]})
    assert frozen({"a": -0.0}) != frozen({"a": 0.0}) and frozen({"a": float("nan")}) == frozen({"a": float("nan")})


def test_frozen_takes_what_yaml_and_toml_make():
    """Dates, sets and bytes (YAML timestamps, !!set, !!binary; TOML dates) are hashable and not their text."""
    day = datetime.date(2024, 1, 2)
    hash(frozen({"when": day, "tags": {"a", "b"}, "blob": b"x"}))
    assert frozen({"when": day}) != frozen({"when": str(day)})
    assert frozen({"tags": {"a", "b"}}) == frozen({"tags": {"b", "a"}})


def test_key_is_a_frozen_value_of_config_and_shape():
    key = EstimateKey.of(CONFIG, SHAPE)
    assert key == EstimateKey.of(copy.deepcopy(CONFIG), SHAPE)
    assert key != EstimateKey.of(CONFIG, dataclasses.replace(SHAPE, sequence_length=4096))
    assert key != EstimateKey.of({**CONFIG, "train_micro_batch_size_per_gpu": 4}, SHAPE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.shape = SHAPE  # type: ignore[misc]


def _estimates() -> Estimates:
    return Estimates(spec_from_hf_config(LLAMA2_7B), Cluster(gpus=8, gpu_memory=40 * GB), "deepspeed")


def test_each_estimate_is_made_once_and_is_the_estimate():
    estimates = _estimates()
    first = estimates.of(CONFIG, SHAPE)
    assert estimates.of(copy.deepcopy(CONFIG), SHAPE) is first  # an equal config: the same estimate
    assert len(estimates) == 1
    other = estimates.of({**CONFIG, "zero_optimization": {"stage": 3}}, SHAPE)
    assert other is not first and len(estimates) == 2
    assert other.configured is not None and other.configured.option.stage == 3
    fresh = estimate(CONFIG, estimates.model, SHAPE, estimates.cluster, estimates.accounting)
    assert first.to_dict() == fresh.to_dict()


def test_a_known_estimate_is_not_made_again():
    estimates = _estimates()
    made = estimate(CONFIG, estimates.model, SHAPE, estimates.cluster)
    estimates.know(CONFIG, SHAPE, made)
    assert estimates.of(copy.deepcopy(CONFIG), SHAPE) is made
    assert estimates.of(CONFIG, dataclasses.replace(SHAPE, activation_checkpointing="none")) is not made
