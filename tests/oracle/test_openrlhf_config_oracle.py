"""Oracle: the config zeroadvisor builds from OpenRLHF's flags (config/openrlhf_config.py) reads in DeepSpeed as the one
OpenRLHF's own get_train_ds_config returns: the same ZeRO config object, although ours leaves out the "auto" entries
OpenRLHF writes (DeepSpeed's config model drops them). OpenRLHF's dict is transcribed here from
openrlhf/utils/deepspeed/deepspeed_utils.py get_train_ds_config @ v0.8.5 (OpenRLHF itself needs Ray and vLLM)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from zeroadvisor.config.openrlhf_config import OpenRLHFFlags, train_config

pytest.importorskip("deepspeed")
pytestmark = [pytest.mark.oracle]


def _openrlhf_v085(offload: bool, adam_offload: bool, stage: int, bf16: bool, max_norm: float, zpg: int,
                   overlap_comm: bool) -> dict:
    """get_train_ds_config(offload, adam_offload, stage, bf16, max_norm, zpg, grad_accum_dtype=None, overlap_comm)
    as v0.8.5 writes it."""
    zero_opt_dict = {
        "stage": stage, "offload_param": {"device": "cpu" if offload else "none"},
        "offload_optimizer": {"device": "cpu" if adam_offload else "none", "pin_memory": True},
        "sub_group_size": "auto", "stage3_max_live_parameters": "auto", "stage3_max_reuse_distance": "auto",
        "stage3_param_persistence_threshold": "auto", "stage3_prefetch_bucket_size": "auto",
        "reduce_bucket_size": "auto", "zero_hpz_partition_size": zpg, "zero_quantized_weights": False,
        "zero_quantized_gradients": False,
    }
    if overlap_comm:
        zero_opt_dict["overlap_comm"] = True
        zero_opt_dict["contiguous_gradients"] = True
    if stage == 3:
        zero_opt_dict["reduce_scatter"] = True
    return {"steps_per_print": 100, "zero_optimization": zero_opt_dict, "bf16": {"enabled": bf16},
            "gradient_clipping": max_norm, "prescale_gradients": False, "wall_clock_breakdown": False,
            "data_types": {"grad_accum_dtype": None}, "checkpoint": {"load_universal": False},
            "compile": {"deepcompile": False}, "tensor_parallel": {"autotp_size": 1}}


@pytest.mark.parametrize(("flags", "stage", "adam_offload", "bf16", "zpg", "overlap"), [
    ({"zero_stage": "3", "bf16": None, "adam_offload": None}, 3, True, True, 1, False),
    ({"zero_stage": "2", "bf16": None, "overlap_comm": None, "max_norm": "0.5"}, 2, False, True, 1, True),
    ({"zero_stage": "1", "zpg": "8"}, 1, False, False, 8, False),
])
def test_deepspeed_reads_the_built_config_as_openrlhf_s(flags, stage, adam_offload, bf16, zpg, overlap):
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    ours = train_config(OpenRLHFFlags("openrlhf.cli.train_sft", flags), Version("0.8.5"))
    theirs = _openrlhf_v085(False, adam_offload, stage, bf16, float(flags.get("max_norm", 1.0)), zpg, overlap)
    assert DeepSpeedZeroConfig(**ours["zero_optimization"]).model_dump() == \
        DeepSpeedZeroConfig(**theirs["zero_optimization"]).model_dump()
    for key in ("bf16", "gradient_clipping", "data_types", "tensor_parallel"):
        assert ours[key] == theirs[key], key
    assert ours["fp16"] == {"enabled": False}  # 0.8 sets no fp16 section: fp16 off either way
