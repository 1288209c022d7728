"""Facts with one home: the lax-bool strings, the minimum stages, the target version.

pydantic 2's lax bool accepts "t"/"y"/"on"/"1"/"yes"/"true" (any case, not stripped) and their false
counterparts (pydantic-core str_as_bool); DeepSpeed validates fp16/bf16 and zero_optimization with
pydantic models since 0.17.1, so that table decides what "enabled": "t" means there.
"""

from __future__ import annotations

import json

import pytest

import zeroadvisor
from zeroadvisor.deepspeed import coerce, config_model, schema
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.rules.linter import lint_text

SPELLINGS = ["t", "T", "y", "Y", "yes", "YES", "on", "On", "1", "true", "TRUE", "f", "n", "no", "off", "0", "false",
             " true ", "2", "1.0", "", "enabled", 0, 1, 1.0, 0.0, 2, True, False, None]


@pytest.mark.parametrize("value", SPELLINGS, ids=repr)
def test_lax_bool_is_pydantics(value):
    pydantic = pytest.importorskip("pydantic")
    try:
        expected = pydantic.TypeAdapter(bool).validate_python(value)
    except pydantic.ValidationError:
        expected = None
    assert coerce.lax_bool(value) is expected


@pytest.mark.parametrize("text", ["t", "y", "YES", "1"])
def test_enabled_strings_count_where_pydantic_reads_them(text):
    assert config_model.is_enabled({"enabled": text}) is True
    config = json.dumps({"train_batch_size": 8, "fp16": {"enabled": text}, "bf16": {"enabled": True}})
    assert "ZA501" in {f.code for f in lint_text(config, "ds.json")}  # both enabled: DeepSpeed asserts


def test_minimum_stages_come_from_the_schema():
    assert schema.min_stage("offload_param") == 3
    assert schema.min_stage("offload_optimizer") == 1
    assert schema.min_stage("reduce_bucket_size") is None
    config = json.dumps({"train_batch_size": 8,
                         "zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}})
    assert "ZA601" in {f.code for f in lint_text(config, "ds.json")}


def test_refusal_notes_name_the_target_version():
    config = {"train_micro_batch_size_per_gpu": 1,
              "bf16": {"enabled": True, "bf16_master_weights_and_grads": True},
              "zero_optimization": {"stage": 2}}
    result = estimate(config, ModelSpec(parameters=10**9), TrainingShape(), Cluster(gpus=8))
    notes = [n for st in result.stages for n in st.notes if "does not run" in n]
    assert notes and all(f"DeepSpeed {zeroadvisor.DEEPSPEED_TARGET} " in n for n in notes)
