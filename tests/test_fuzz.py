"""Random configs never crash lint, estimate or check: every bad value becomes a finding."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zeroadvisor.deepspeed import schema
from zeroadvisor.advisor.check import CheckOptions, check_document
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.fix.editor import patched_text
from zeroadvisor.advisor.check import combined_patch
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.config.source import parse

TOP = list(schema.load()["properties"])
ZERO = list(schema.node("zero_optimization")["properties"])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**12), st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from(["auto", "cpu", "nvme", "none", "2", "abc", "", "fp16", "Adam", "WarmupLR"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.sampled_from(ZERO + ["device", "x"]), inner,
                                                                      max_size=4)), max_leaves=8)
configs = st.dictionaries(st.sampled_from(TOP + ["zero_optimisation", "_comment"]), values, max_size=8)
zero_blocks = st.dictionaries(st.sampled_from(ZERO), values, max_size=6)

OPTIONS = CheckOptions(model=ModelSpec(parameters=7_000_000_000, num_layers=32, hidden_size=4096,
                                       num_attention_heads=32, intermediate_size=11008, vocab_size=32000),
                       shape=TrainingShape(sequence_length=2048),
                       cluster=Cluster(gpus=8, gpu_memory=80 * 2**30, cpu_memory=512 * 10**9))


@pytest.mark.slow  # a property test
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs, zero_blocks)
def test_check_never_raises_and_fixes_apply(config, zero):
    config = {**config, "zero_optimization": zero} if zero else config
    doc = parse(json.dumps(config, indent=2), "fuzz.json")
    result = check_document(doc, OPTIONS)
    for finding in result.findings:
        assert finding.message and "\n" not in finding.message
    patch = combined_patch(result.findings)
    if patch:
        # json.dumps text holds no placeholder and the findings' fixes are finite: no refusal is
        # documented for this input, so an EditError here is a defect and fails the test.
        new_text = patched_text(doc, patch)
        assert parse(new_text).data == mp.apply(doc.data, patch)
        assert patched_text(parse(new_text), patch) == new_text
