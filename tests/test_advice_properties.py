"""Properties of the advice over many runs (hypothesis): no recommendation contradicts another finding, every
fix leaves the headroom the verdict uses, and "faster" is said only outside the step-time model's measured
error (issue 17)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroadvisor.advisor.advice import Recommendation
from zeroadvisor.advisor.check import CheckOptions, check_document
from zeroadvisor.advisor.ranking import overrules
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import parse
from zeroadvisor.hardware.gpus import resolve_gpu
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.memory.estimate import estimate
from zeroadvisor.model.description import spec_from_params
from zeroadvisor.model.spec import TrainingShape

pytestmark = pytest.mark.slow

ADVICE_WITH_A_CHANGE = ("ZA801", "ZA802", "ZA803", "ZA804", "ZA810")


@st.composite
def runs(draw: st.DrawFn) -> tuple[dict, CheckOptions]:
    stage = draw(st.sampled_from([0, 1, 2, 3]))
    zero: dict = {"stage": stage}
    if stage >= 1 and draw(st.booleans()):
        zero["offload_optimizer"] = {"device": "cpu"}
    if stage == 3 and draw(st.booleans()):
        zero["offload_param"] = {"device": "cpu"}
    config = {"train_micro_batch_size_per_gpu": draw(st.sampled_from([1, 2, 4, 8, 16])),
              "gradient_accumulation_steps": draw(st.sampled_from([1, 2, 4])),
              "bf16": {"enabled": True}, "zero_optimization": zero}
    params = draw(st.sampled_from(["350M", "1.3B", "7B", "13B", "34B", "70B"]))
    gpu = resolve_gpu(draw(st.sampled_from(["A100-SXM4-80GB", "A100-SXM4-40GB", "H100-SXM5-80GB", "A10G",
                                             "RTX-4090", "L40S"])))
    gpus = draw(st.sampled_from([1, 2, 8, 16]))
    host = draw(st.sampled_from([None, 256 * 10**9, 1024 * 10**9]))
    shape = TrainingShape(draw(st.sampled_from([512, 2048, 8192])), draw(st.sampled_from(["none", "full"])))
    options = CheckOptions(model=spec_from_params(params), shape=shape,
                           cluster=Cluster(gpus=gpus, gpu=gpu, cpu_memory=host))
    return config, options


def _recommendations(findings) -> list[tuple[str, Recommendation]]:
    return [(f.code, f.recommends) for f in findings
            if f.code in ADVICE_WITH_A_CHANGE and isinstance(f.recommends, Recommendation)]


@settings(max_examples=40, deadline=None)
@given(runs())
def test_the_advice_agrees_with_itself_and_its_fix_fits_with_the_headroom(run):
    config, options = run
    result = check_document(parse(json.dumps(config), "ds.json"), options)
    recommended = _recommendations(result.findings)
    # one change: every advice finding that names a change names the same one (one combined fix)
    changes = {json.dumps(rec.patch, sort_keys=True) for _, rec in recommended}
    assert len(changes) <= 1, [(code, rec.description) for code, rec in recommended]
    for code, rec in recommended:
        # the recommended option fits in every phase with the headroom left free (not "tight")
        assert rec.stage.comfortable, (code, rec.description)
        if code == "ZA810":  # "faster" only outside the model's measured error
            assert overrules(rec.step_time_s, rec.configured_step_time_s), rec.description
    if recommended and recommended[0][1].patch and recommended[0][1].change.cluster is None:
        # written into the config, the fix is a run the memory model calls a fit with the headroom
        rec = recommended[0][1]
        fixed = mp.apply(config, rec.patch)
        again = estimate(fixed, options.model, rec.change.shape, options.cluster)
        assert again.configured is not None and again.configured.comfortable, rec.description
