"""Every "auto" decision against what DeepSpeed 0.19.8 and the integrations read.

- DeepSpeed's own "auto" values (runtime/config.py get_pipeline_config default_pipeline "stages": "auto";
  data_types.keep_in_fp32_modules "auto" or a list (runtime/config.py _do_error_check); ZenFlowConfig
  select_strategy/select_interval/update_interval default 'auto'; parse_autoep_config top_k,
  routed_scaling_factor, score_func 'auto'; leaf_module names: a string is a one-item list) are values,
  not placeholders: no auto rule may fire on them.
- Keys an integration fills (transformers integrations/deepspeed.py HfTrainerDeepSpeedConfig) fire only
  when the chosen integration does not fill them.
- HfTrainerDeepSpeedConfig.trainer_config_finalize: reduce_bucket_size = h*h, stage3_prefetch_bucket_size =
  int(0.9*h*h), stage3_param_persistence_threshold = 10*h: for h = 4096 that is 16,777,216,
  int(15,099,494.4) = 15,099,494 and 40,960.
"""

from __future__ import annotations

import json

import pytest

from zeroadvisor.deepspeed import schema
from zeroadvisor.lint.context import LintOptions
from zeroadvisor.rules.linter import lint_text

AUTO_RULES = {"ZA301", "ZA302"}

DEEPSPEED_OWN_AUTO = [
    {"pipeline": {"stages": "auto"}},
    {"data_types": {"keep_in_fp32_modules": "auto"}},
    {"zero_optimization": {"stage": 3, "zenflow": {"select_strategy": "auto"}}},
    {"zero_optimization": {"stage": 3, "zenflow": {"select_interval": "auto"}}},
    {"zero_optimization": {"stage": 3, "zenflow": {"update_interval": "auto"}}},
    {"expert_parallel": {"top_k": "auto"}},
    {"expert_parallel": {"routed_scaling_factor": "auto"}},
    {"expert_parallel": {"score_func": "auto"}},
    {"zero_optimization": {"stage": 3, "leaf_module": {"names": "auto"}}},
]


def _codes(config: dict, integration: str) -> set[str]:
    text = json.dumps({"train_micro_batch_size_per_gpu": 1, **config})
    return {f.code for f in lint_text(text, "ds.json", LintOptions(integration=integration))}


@pytest.mark.parametrize("config", DEEPSPEED_OWN_AUTO, ids=json.dumps)
@pytest.mark.parametrize("integration", ["deepspeed", "hf-trainer", "accelerate", "any"])
def test_deepspeeds_own_auto_is_a_value(config, integration):
    assert not _codes(config, integration) & AUTO_RULES


@pytest.mark.parametrize("config,integration,code", [
    # top-level dict.get keys keep the string and fail: an error unless the integration fills them
    ({"train_batch_size": "auto"}, "deepspeed", "ZA301"),
    ({"gradient_clipping": "auto"}, "deepspeed", "ZA301"),
    ({"optimizer": {"type": "AdamW", "params": {"lr": "auto"}}}, "deepspeed", "ZA301"),
    # DtypeEnum("auto") raises in engine.get_data_types: nobody fills it
    ({"data_types": {"grad_accum_dtype": "auto"}}, "hf-trainer", "ZA301"),
    # pydantic sections drop "auto": the default is used, a warning
    ({"zero_optimization": {"stage": 2, "allgather_bucket_size": "auto"}}, "any", "ZA302"),
    ({"zero_optimization": {"stage": "auto"}}, "hf-trainer", "ZA302"),  # only Accelerate fills the stage
    ({"zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}}, "deepspeed", "ZA302"),
])
def test_unfilled_auto_fires(config, integration, code):
    assert code in _codes(config, integration)


@pytest.mark.parametrize("config,integration", [
    ({"train_batch_size": "auto"}, "hf-trainer"),
    ({"gradient_clipping": "auto"}, "accelerate"),
    ({"optimizer": {"type": "AdamW", "params": {"lr": "auto"}}}, "hf-trainer"),
    ({"zero_optimization": {"stage": "auto"}}, "accelerate"),
    ({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": "auto"}}, "hf-trainer"),
])
def test_filled_auto_is_quiet(config, integration):
    assert not _codes(config, integration) & AUTO_RULES


@pytest.mark.parametrize("key,expected", [
    ("reduce_bucket_size", 16_777_216),
    ("stage3_prefetch_bucket_size", 15_099_494),
    ("stage3_param_persistence_threshold", 40_960),
])
def test_auto_fill_formulas_are_transformers(key, expected):
    assert schema.auto_fill("zero_optimization", key).value(4096) == expected


def test_only_the_stage3_spelling_is_filled():
    # HF and Accelerate look up only the stage3_* names (deepspeed-config.md §5)
    assert schema.auto_fill("zero_optimization", "prefetch_bucket_size") is None
    assert schema.auto_fill("zero_optimization", "allgather_bucket_size") is None
