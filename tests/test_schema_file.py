"""The committed DeepSpeed config schema (zeroadvisor/schemas/ds_config.schema.json), without DeepSpeed.

Checks that the generated file is a valid 2020-12 schema, follows the conventions the linter
walks by (x-unknown-keys, x-alias-of, x-replaced-by, x-removed, x-auto, x-min-stage), carries
DeepSpeed's code defaults rather than its docs' (reference §8), and accepts or rejects
hand-written configs the way DeepSpeed 0.19.8 does. Drift against the installed DeepSpeed is
tests/oracle/test_schema_drift.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import zeroadvisor

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "zeroadvisor" / "schemas" / "ds_config.schema.json"

# Reference §9.1: every top-level name DeepSpeed 0.19.8 reads (60, including the 11 removed),
# plus the two read by deepspeed.initialize for the device mesh.
TOP_LEVEL_NAMES = ["activation_checkpointing", "aio", "amp", "autotuning", "bf16", "bfloat16", "checkpoint", "comet",
                   "comms_logger", "communication_data_type", "compile", "compression_training", "csv_monitor",
                   "curriculum_learning", "data_efficiency", "data_types", "dataloader_drop_last", "datastates_ckpt",
                   "disable_allgather", "disable_python_gc", "dump_state", "eigenvalue", "elasticity",
                   "expert_parallel", "flops_profiler", "fp16", "gradient_accumulation_steps", "gradient_allreduce_op",
                   "gradient_clipping", "gradient_predivide_factor", "graph_harvesting", "hybrid_engine", "log_level",
                   "managed_gradient_accumulation", "memory_breakdown", "nebula", "optimizer", "pipeline",
                   "prescale_gradients", "progressive_layer_drop", "quantize_training", "scheduler",
                   "seq_parallel_communication_data_type", "sparse_attention", "sparse_gradients", "steps_per_print",
                   "tensor_parallel", "tensorboard", "timers", "torch_autocast", "train_batch_size",
                   "train_micro_batch_size_per_gpu", "use_data_before_expert_parallelism", "vocabulary_size",
                   "wall_clock_breakdown", "wandb", "weight_quantization", "zero_allow_untested_optimizer",
                   "zero_force_ds_cpu_optimizer", "zero_optimization", "sequence_parallel_size", "data_parallel_size"]

# Reference §7.1 / runtime/config.py _REMOVED_TOP_LEVEL_CONFIG_KEYS, _REMOVED_ZERO_CONFIG_KEYS.
REMOVED_TOP_LEVEL = ["nebula", "compression_training", "amp", "quantize_training", "sparse_gradients", "eigenvalue",
                     "sparse_attention", "elasticity", "graph_harvesting", "curriculum_learning",
                     "progressive_layer_drop"]
REMOVED_ZERO = ["mics_shard_size", "mics_hierarchical_params_gather", "zeropp_loco_param"]

# Reference §4: sections DeepSpeed validates with pydantic (extra="forbid").
STRICT_SECTIONS = ["/zero_optimization", "/zero_optimization/offload_param", "/zero_optimization/offload_optimizer",
                   "/zero_optimization/zenflow", "/zero_optimization/leaf_module", "/fp16", "/bf16", "/bfloat16",
                   "/comms_logger", "/tensorboard", "/wandb", "/csv_monitor", "/comet", "/hybrid_engine", "/compile",
                   "/timers/throughput", "/tensor_parallel", "/weight_quantization"]
LOOSE_SECTIONS = ["", "/optimizer", "/scheduler", "/activation_checkpointing", "/flops_profiler", "/autotuning", "/aio",
                  "/checkpoint", "/data_types", "/data_efficiency", "/pipeline", "/torch_autocast", "/expert_parallel",
                  "/datastates_ckpt", "/timers"]

@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text("utf-8"))


@pytest.fixture(scope="module")
def validator(schema) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema)


def node_at(schema: dict, pointer: str) -> dict:
    node = schema
    for part in filter(None, pointer.split("/")):
        node = node["properties"][part]
    return node


def object_nodes(node: dict, pointer: str = "") -> Iterator[tuple[str, dict]]:
    """(pointer, node) for every node with properties, $defs entries and map values included."""
    if "properties" in node:
        yield pointer, node
        for key, child in node["properties"].items():
            yield from object_nodes(child, f"{pointer}/{key}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from object_nodes(node["additionalProperties"], f"{pointer}/*")
    for defs_name, entries in node.get("$defs", {}).items():
        for name, entry in entries.items():
            yield from object_nodes(entry, f"#/$defs/{defs_name}/{name}")


def property_maps(schema: dict) -> Iterator[tuple[str, dict]]:
    for pointer, node in object_nodes(schema):
        yield pointer, node["properties"]


def all_properties(schema: dict) -> Iterator[tuple[str, dict]]:
    for pointer, props in property_maps(schema):
        for key, child in props.items():
            yield f"{pointer}/{key}", child


def resolve_pointer(schema: dict, pointer: str) -> dict | None:
    try:
        return node_at(schema, pointer)
    except KeyError:
        return None


def errors(validator, config: dict) -> list[str]:
    return sorted(f"{e.json_path}: {e.message}" for e in validator.iter_errors(config))


# --------------------------------------------------------------------------------------------
# Shape of the file
# --------------------------------------------------------------------------------------------


def test_is_a_valid_draft_2020_12_schema(schema):
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "https://raw.githubusercontent.com/zeroadvisor/zeroadvisor/main/schemas/ds_config.schema.json"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_schema_key_is_for_editors_only(schema):
    """A config may name its schema ("$schema"); DeepSpeed ignores the key, so it is no DeepSpeed key."""
    from zeroadvisor.deepspeed.kind import deepspeed_keys

    node = schema["properties"]["$schema"]
    assert node["type"] == "string" and node["x-editor-only"] is True
    assert "$schema" not in deepspeed_keys() and "zero_optimization" in deepspeed_keys()


def test_records_what_it_was_generated_from(schema):
    assert schema["x-generator"] == "tools/gen_schema.py"
    assert schema["x-deepspeed-version"] == zeroadvisor.DEEPSPEED_TARGET
    assert schema["x-pydantic-version"].startswith("2.")
    assert SCHEMA_PATH.read_text("utf-8").endswith("}\n")


def test_file_is_pretty_printed_with_indent_2(schema):
    text = SCHEMA_PATH.read_text("utf-8")
    assert text == json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("name", TOP_LEVEL_NAMES)
def test_every_reference_top_level_name_is_present(schema, name):
    assert name in schema["properties"]


REMOVED = [f"/{k}" for k in REMOVED_TOP_LEVEL] + [f"/zero_optimization/{k}" for k in REMOVED_ZERO]


@pytest.mark.parametrize("pointer", REMOVED)
def test_removed_keys_carry_deepspeeds_message_and_reject_everything(schema, pointer):
    node = node_at(schema, pointer)
    assert "has been removed" in node["x-removed"]  # DeepSpeedConfigError text, verbatim
    assert node["not"] == {}
    assert "type" not in node and "default" not in node


def test_every_alias_points_to_an_existing_sibling(schema):
    aliases = 0
    for pointer, props in property_maps(schema):
        for key, child in props.items():
            target = child.get("x-alias-of")
            if target is not None:
                aliases += 1
                assert target in props, f"{pointer}/{key} is an alias of missing {target}"
                assert "x-alias-of" not in props[target]
    assert aliases >= 11  # 9 stage3_* aliases, tensor_parallel.tp, kernel_inject


def test_stage3_aliases_are_both_spellings(schema):
    zero = node_at(schema, "/zero_optimization")["properties"]
    assert zero["stage3_prefetch_bucket_size"]["x-alias-of"] == "prefetch_bucket_size"
    assert zero["stage3_gather_16bit_weights_on_model_save"]["x-alias-of"] == "gather_16bit_weights_on_model_save"
    assert node_at(schema, "/tensor_parallel/tp")["x-alias-of"] == "tensor_parallel"


def test_every_replaced_by_pointer_resolves(schema):
    seen = 0
    for pointer, child in all_properties(schema):
        for holder in [child, *child.get("x-legacy-forms", {}).values()]:
            if "x-replaced-by" in holder:
                seen += 1
                target = holder["x-replaced-by"]
                assert target is None or resolve_pointer(schema, target) is not None, f"{pointer}: {target}"
    assert seen >= 6


def test_deprecations(schema):
    zero = node_at(schema, "/zero_optimization")["properties"]
    expected = {
        "cpu_offload": "/zero_optimization/offload_optimizer",
        "cpu_offload_param": "/zero_optimization/offload_param",
        "cpu_offload_use_pin_memory": None,
        "stage3_gather_fp16_weights_on_model_save": "/zero_optimization/gather_16bit_weights_on_model_save",
    }
    for key, replacement in expected.items():
        assert zero[key]["deprecated"] is True
        assert zero[key]["x-replaced-by"] == replacement
        assert zero[key]["x-deprecation"].startswith(f"Config parameter {key} is deprecated")
    bfloat16 = node_at(schema, "/bfloat16")
    assert bfloat16["deprecated"] is True and bfloat16["x-replaced-by"] == "/bf16"
    legacy = node_at(schema, "/zero_optimization")
    assert legacy["type"] == ["object", "boolean"]
    assert legacy["x-legacy-forms"]["boolean"]["deprecated"] is True


def test_every_property_has_a_description(schema):
    missing = [p for p, child in all_properties(schema) if not child.get("description", "").strip()]
    assert not missing


def test_every_leaf_has_a_type_and_a_default_or_a_reason(schema):
    problems = []
    for pointer, node in object_nodes(schema):
        required = set(node.get("required", []))
        for key, child in node["properties"].items():
            if "x-unknown-keys" in child or "x-removed" in child or "x-rejected" in child:  # sections, removed keys
                continue
            if "type" not in child and not any("type" in branch for branch in child.get("anyOf", [])):
                problems.append(f"{pointer}/{key}: no type")
            if "default" not in child and "x-no-default" not in child and key not in required:
                problems.append(f"{pointer}/{key}: no default")
    assert not problems


def test_x_unknown_keys_conventions(schema):
    for pointer in STRICT_SECTIONS:
        node = node_at(schema, pointer)
        assert node["x-unknown-keys"] == "error", pointer
        assert node["additionalProperties"] is False, pointer
    for pointer in LOOSE_SECTIONS:
        node = node_at(schema, pointer) if pointer else schema
        assert node["x-unknown-keys"] == "ignored", pointer
        assert "additionalProperties" not in node or not pointer, pointer
    # the top level: DeepSpeed ignores an unknown key, an editor flags it; '_' keys are comments
    assert schema["additionalProperties"] is False
    assert list(schema["patternProperties"]) == ["^_"]
    assert node_at(schema, "/optimizer/params")["x-unknown-keys"] == "kwargs"
    assert node_at(schema, "/scheduler/params")["x-unknown-keys"] == "kwargs"
    for defs_name in ("optimizer_params", "scheduler_params"):
        for name, entry in schema["$defs"][defs_name].items():
            assert entry["x-unknown-keys"] in ("kwargs", "ignored"), name
            assert isinstance(entry["required"], list)


def test_optional_sections_are_nullable_on_the_same_node(schema):
    for pointer in ("/zero_optimization/offload_param", "/zero_optimization/offload_optimizer",
                    "/zero_optimization/zenflow", "/bf16", "/aio", "/expert_parallel"):
        node = node_at(schema, pointer)
        assert node["type"] == ["object", "null"], pointer
        assert "properties" in node and "anyOf" not in node, pointer


# --------------------------------------------------------------------------------------------
# Facts: code defaults, auto, stages, precision sections
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pointer, value", [
    # reference §8: the code, not the docs
    ("/zero_optimization/prefetch_bucket_size", 50000000),
    ("/zero_optimization/stage3_prefetch_bucket_size", 50000000),
    ("/zero_optimization/param_persistence_threshold", 100000),
    ("/zero_optimization/stage3_param_persistence_threshold", 100000),
    ("/zero_optimization/sub_group_size", 1000000000),
    ("/zero_optimization/overlap_comm", None),
    ("/zero_optimization/reduce_bucket_size", 500000000),
    ("/zero_optimization/allgather_bucket_size", 500000000),
    ("/zero_optimization/model_persistence_threshold", sys.maxsize),
    ("/zero_optimization/stage", 0),
    ("/zero_optimization/offload_param/buffer_size", 100000000),
    ("/zero_optimization/offload_optimizer/ratio", 1.0),
    ("/bf16/immediate_grad_update", False),
    ("/bf16/check_grad_overflow", True),
    ("/gradient_clipping", 1.0),
    ("/seq_parallel_communication_data_type", "fp32"),
    ("/pipeline/stages", "auto"),
    ("/data_types/keep_in_fp32_modules", "auto"),
    ("/checkpoint/tag_validation", "WARN"),
    ("/zero_optimization/zenflow/select_strategy", "auto"),
])
def test_defaults_are_deepspeeds_code_defaults(schema, pointer, value):
    node = node_at(schema, pointer)
    assert node["default"] == value and type(node["default"]) is type(value)


def test_integer_fields_use_integer_type(schema):
    for key in ("reduce_bucket_size", "allgather_bucket_size", "sub_group_size", "prefetch_bucket_size"):
        node = node_at(schema, f"/zero_optimization/{key}")
        branch = node["anyOf"][0] if "anyOf" in node else node
        assert branch["type"] == "integer"


HF_BOTH = ["/train_batch_size", "/train_micro_batch_size_per_gpu", "/gradient_accumulation_steps", "/gradient_clipping",
           "/fp16/enabled", "/bf16/enabled", "/zero_optimization/reduce_bucket_size",
           "/zero_optimization/stage3_prefetch_bucket_size", "/zero_optimization/stage3_param_persistence_threshold"]
ACCELERATE_ONLY = ["/zero_optimization/stage", "/zero_optimization/offload_optimizer/device",
                   "/zero_optimization/offload_param/device", "/zero_optimization/offload_optimizer/nvme_path",
                   "/zero_optimization/stage3_gather_16bit_weights_on_model_save"]


@pytest.mark.parametrize("pointer", HF_BOTH + ACCELERATE_ONLY)
def test_integration_auto_keys_admit_auto(schema, pointer):
    node = node_at(schema, pointer)
    assert node["x-auto"] == (["accelerate"] if pointer in ACCELERATE_ONLY else ["hf-trainer", "accelerate"])
    assert {"const": "auto"} in node["anyOf"]
    assert "default" in node and "description" in node and "type" not in node


def test_auto_is_only_on_the_spelling_integrations_fill(schema):
    zero = node_at(schema, "/zero_optimization")["properties"]
    assert "x-auto" not in zero["prefetch_bucket_size"]  # HF/Accelerate look up the stage3_* spelling only
    assert "x-auto" not in zero["allgather_bucket_size"]
    assert "x-auto" not in node_at(schema, "/bfloat16/enabled")


def test_deepspeed_native_auto_has_no_x_auto(schema):
    zenflow = "/zero_optimization/zenflow"
    for pointer in ("/pipeline/stages", "/data_types/keep_in_fp32_modules", f"{zenflow}/select_strategy",
                    f"{zenflow}/select_interval", f"{zenflow}/update_interval"):
        node = node_at(schema, pointer)
        assert "x-auto" not in node and "anyOf" not in node, pointer


def test_params_auto_in_defs(schema):
    opt, sched = schema["$defs"]["optimizer_params"], schema["$defs"]["scheduler_params"]
    for key in ("lr", "betas", "eps", "weight_decay"):
        assert opt["adamw"]["properties"][key]["x-auto"] == ["hf-trainer", "accelerate"]
    for key in ("warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "total_num_steps"):
        assert sched["WarmupDecayLR"]["properties"][key]["x-auto"] == ["hf-trainer", "accelerate"]
    assert "x-auto" not in sched["OneCycle"]["properties"]["cycle_min_lr"]


def test_stage3_only_keys_are_marked(schema):
    zero = node_at(schema, "/zero_optimization")["properties"]
    stage3 = [k for k in zero if k.startswith("stage3_")]
    stage3 += [zero[k]["x-alias-of"] for k in stage3 if "x-alias-of" in zero[k]]
    stage3 += ["offload_param", "sub_group_size", "zero_quantized_weights", "zero_hpz_partition_size", "leaf_module"]
    for key in stage3:
        assert zero[key].get("x-min-stage") == 3, key
    for key in ("stage", "reduce_bucket_size", "overlap_comm", "contiguous_gradients"):
        assert "x-min-stage" not in zero[key], key
    # ZeRO-Offload is built only by the ZeRO optimizers (engine._configure_zero_optimizer): stage 1 and up
    assert zero["offload_optimizer"]["x-min-stage"] == 1 and zero["cpu_offload"]["x-min-stage"] == 1


def test_fp16_only_keys_are_absent_from_bf16(schema):
    fp16 = set(node_at(schema, "/fp16")["properties"])
    for pointer in ("/bf16", "/bfloat16"):
        bf16 = set(node_at(schema, pointer)["properties"])
        assert {"loss_scale", "loss_scale_window", "initial_scale_power", "hysteresis", "min_loss_scale",
                "auto_cast"} <= fp16 - bf16
        assert "check_overflow" not in bf16  # stale constants.py name; the field is check_grad_overflow


def test_optimizer_annotations(schema):
    assert schema["x-deepspeed-optimizers"] == ["adagrad", "adam", "adamw", "lamb", "muadam", "muadamw", "musgd",
                                                "lion", "muon"]
    supported = schema["x-zero-supported-optimizers"]
    for mode in ("without_offload", "with_offload"):
        assert {"adam", "adamw", "adagrad", "lion"} <= set(supported[mode])
        assert "lamb" not in supported[mode] and "SGD" not in supported[mode]
    assert set(schema["x-deepspeed-schedulers"]) == {"LRRangeTest", "OneCycle", "WarmupLR", "WarmupDecayLR",
                                                     "WarmupCosineLR"}
    defs = schema["$defs"]["optimizer_params"]
    assert set(schema["x-deepspeed-optimizers"]) <= set(defs)
    assert "SGD" in defs and "Adam" not in defs  # "Adam" lower-cases to DeepSpeed's "adam"
    assert defs["adam"]["properties"]["torch_adam"]["default"] is False
    assert defs["adam"]["properties"]["adam_w_mode"]["default"] is True
    assert defs["adam"]["properties"]["max_grad_norm"]["x-replaced-by"] == "/gradient_clipping"


def test_scheduler_required_parameters(schema):
    sched = schema["$defs"]["scheduler_params"]
    assert sched["WarmupDecayLR"]["required"] == ["total_num_steps"]
    assert sched["WarmupCosineLR"]["required"] == ["total_num_steps"]
    assert sched["OneCycle"]["required"] == ["cycle_min_lr", "cycle_max_lr"]
    assert sched["WarmupLR"]["required"] == []
    assert "LambdaLR" not in sched  # lr_lambda cannot be written in JSON


# --------------------------------------------------------------------------------------------
# Hand-written configs: accepted / rejected as DeepSpeed 0.19.8 does (reference §6)
# --------------------------------------------------------------------------------------------

VALID = {
    "empty": {},
    "the schema an editor reads": {"$schema": "https://example.com/ds_config.schema.json",
                                   "train_micro_batch_size_per_gpu": 4},
    "comment-like keys": {"_comment": "x", "train_micro_batch_size_per_gpu": 4},
    "legacy boolean zero": {"zero_optimization": True},
    "bf16 null": {"bf16": None},
    "float integer literal": {"zero_optimization": {"reduce_bucket_size": 5e8, "stage": 2.0}},
    "zero values are allowed": {"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
                                                      "sub_group_size": 0}},
    "HF auto": {
        "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto", "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"},
        "optimizer": {"type": "AdamW",
                      "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
        "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                          "warmup_num_steps": "auto", "total_num_steps": "auto"}},
        "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                              "stage3_param_persistence_threshold": "auto",
                              "stage3_gather_16bit_weights_on_model_save": True},
    },
    "offload stage 3": {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
                                              "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"}}},
    "partial offload at stage 3": {"zero_optimization": {"stage": 3,
                                                         "offload_optimizer": {"device": "cpu", "ratio": 0.3}}},
    "deprecated alone": {"zero_optimization": {"cpu_offload": True}},
    "case-insensitive values": {"communication_data_type": "FP16", "gradient_allreduce_op": "Mean",
                                "checkpoint": {"tag_validation": "Warn"}, "log_level": "INFO"},
    "DeepSpeed optimizer name in any case": {"optimizer": {"type": "Lamb", "params": {"lr": 1e-3, "max_coeff": 10.0}},
                                             "fp16": {"enabled": True, "loss_scale": 0}},
    "torch optimizer": {"optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9, "nesterov": True}}},
    "torch scheduler": {"scheduler": {"type": "StepLR", "params": {"step_size": 10, "gamma": 0.5}}},
    "torch_adam kwargs": {"optimizer": {"type": "adam", "params": {"torch_adam": True, "foreach": False}}},
    "muon ignores unknown settings": {"optimizer": {"type": "muon", "params": {"muon_lr": 0.02, "custom": 1}}},
    "dict.get sections ignore typos": {"activation_checkpointing": {"partition_activation": True},
                                       "flops_profiler": {"enabeld": True}, "timers": {"foo": 1}},
    "native auto": {"pipeline": {"stages": "auto"}, "data_types": {"keep_in_fp32_modules": "auto"},
                    "zero_optimization": {"zenflow": {"select_interval": "auto", "update_interval": 4}}},
    "compute_grad_norm at stage 2": {"zero_optimization": {"stage": 2, "compute_grad_norm": False}},
    "datastates": {"datastates_ckpt": {"host_cache_size": 16}},
}

INVALID = {
    "zero typo": ({"zero_optimization": {"stage": 2, "overlap_com": True}}, "$.zero_optimization"),
    "stage 4": ({"zero_optimization": {"stage": 4}}, "$.zero_optimization.stage"),
    "stage as a word": ({"zero_optimization": {"stage": "two"}}, "$.zero_optimization.stage"),
    "zero null": ({"zero_optimization": None}, "$.zero_optimization"),
    "alias and field together": ({"zero_optimization": {"prefetch_bucket_size": 1, "stage3_prefetch_bucket_size": 2}},
                                 "$.zero_optimization"),
    "deprecated and replacement together": ({"zero_optimization": {"cpu_offload": True,
                                                                   "offload_optimizer": {"device": "cpu"}}},
                                            "$.zero_optimization"),
    "fractional integer": ({"zero_optimization": {"stage3_prefetch_bucket_size": 15099494.4}},
                           "$.zero_optimization.stage3_prefetch_bucket_size"),
    "string number": ({"zero_optimization": {"reduce_bucket_size": "5e8"}}, "$.zero_optimization.reduce_bucket_size"),
    "reduce bucket 0": ({"zero_optimization": {"reduce_bucket_size": 0}}, "$.zero_optimization.reduce_bucket_size"),
    "offload to gpu": ({"zero_optimization": {"offload_optimizer": {"device": "gpu"}}},
                       "$.zero_optimization.offload_optimizer.device"),
    "offload typo": ({"zero_optimization": {"offload_optimizer": {"pin_memmory": True}}},
                     "$.zero_optimization.offload_optimizer"),
    "buffer_size in offload_optimizer": ({"zero_optimization": {"offload_optimizer": {"buffer_size": 1}}},
                                         "$.zero_optimization.offload_optimizer"),
    "partial offload at stage 2": ({"zero_optimization": {"stage": 2,
                                                          "offload_optimizer": {"device": "cpu", "ratio": 0.5}}},
                                   "$.zero_optimization"),
    "compute_grad_norm at stage 3": ({"zero_optimization": {"stage": 3, "compute_grad_norm": False}},
                                     "$.zero_optimization"),
    "nvme without path": ({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}},
                          "$.zero_optimization.offload_param"),
    "removed key": ({"amp": {"enabled": False}}, "$.amp"),
    "removed zero key": ({"zero_optimization": {"mics_shard_size": 8}}, "$.zero_optimization.mics_shard_size"),
    "fp16 keys in bf16": ({"bf16": {"enabled": True, "loss_scale": 0}}, "$.bf16"),
    "check_overflow in bf16": ({"bf16": {"check_overflow": True}}, "$.bf16"),
    "fp16 and bf16 both enabled": ({"fp16": {"enabled": True}, "bf16": {"enabled": True}}, "$"),
    "negative loss scale": ({"fp16": {"loss_scale": -1}}, "$.fp16.loss_scale"),
    "fractional min_loss_scale": ({"fp16": {"min_loss_scale": 0.5}}, "$.fp16.min_loss_scale"),
    "zero loss window under dynamic scaling": ({"fp16": {"enabled": True, "loss_scale_window": 0}}, "$.fp16"),
    "bf16 optimizer states without master weights": ({"bf16": {"bf16_optimizer_states": True},
                                                      "zero_optimization": {"stage": 2}}, "$.bf16"),
    "fp16 master weights at stage 0": ({"fp16": {"enabled": True, "fp16_master_weights_and_grads": True}}, "$"),
    "sum with ZeRO-3": ({"gradient_allreduce_op": "sum", "zero_optimization": {"stage": 3}}, "$"),
    "bad communication dtype": ({"communication_data_type": "int8"}, "$.communication_data_type"),
    "bad tag validation": ({"checkpoint": {"tag_validation": "bogus"}}, "$.checkpoint.tag_validation"),
    "pipeline_stage not bool": ({"checkpoint": {"parallel_write": {"pipeline_stage": "yes"}}},
                                "$.checkpoint.parallel_write.pipeline_stage"),
    "keep_in_fp32_modules wrong": ({"data_types": {"keep_in_fp32_modules": "all"}},
                                   "$.data_types.keep_in_fp32_modules"),
    "max_grad_norm in optimizer params": ({"optimizer": {"type": "AdamW", "params": {"max_grad_norm": 1.0}}},
                                          "$.optimizer.params.max_grad_norm"),
    "unknown optimizer kwarg": ({"optimizer": {"type": "adam", "params": {"betaz": [0.9, 0.99]}}},
                                "$.optimizer.params"),
    "1-bit optimizer is gone": ({"optimizer": {"type": "OneBitAdam"}}, "$.optimizer.type"),
    "lamb with a static loss scale": ({"optimizer": {"type": "LAMB"}, "fp16": {"enabled": True, "loss_scale": 128}},
                                      "$.fp16.loss_scale"),
    "torch name is case-sensitive": ({"optimizer": {"type": "sgd"}}, "$.optimizer.type"),
    "unknown scheduler": ({"scheduler": {"type": "WarmupCosine", "params": {}}}, "$.scheduler.type"),
    "scheduler missing required": ({"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10}}},
                                   "$.scheduler.params"),
    "scheduler without params": ({"scheduler": {"type": "WarmupLR"}}, "$.scheduler"),
    "non-positive warmup": ({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 0}}},
                            "$.scheduler.params.warmup_num_steps"),
    "strict section typo": ({"wandb": {"projct": "x"}}, "$.wandb"),
    "timers.throughput typo": ({"timers": {"throughput": {"enabeld": True}}}, "$.timers.throughput"),
    "tensor_parallel dtype from JSON": ({"tensor_parallel": {"dtype": "bf16"}}, "$.tensor_parallel.dtype"),
    "zenflow interval word": ({"zero_optimization": {"zenflow": {"select_interval": "often"}}},
                              "$.zero_optimization.zenflow.select_interval"),
    "micro batch 0": ({"train_micro_batch_size_per_gpu": 0}, "$.train_micro_batch_size_per_gpu"),
    "micro batch as string": ({"train_micro_batch_size_per_gpu": "4"}, "$.train_micro_batch_size_per_gpu"),
}


# DeepSpeed accepts these (it ignores an unknown top-level key), and the schema flags them, so that an editor
# shows what DeepSpeed would silently drop (tests/oracle/test_schema_drift.py checks that DeepSpeed accepts them).
IGNORED_BY_DEEPSPEED = {
    "unknown top-level key": ({"zero_optimisation": {"stage": 3}}, "$"),
    "another tool's key": ({"train_micro_batch_size_per_gpu": 8, "foo_bar": 1}, "$"),
    "schema key misspelt": ({"$schemas": "x"}, "$"),
}


@pytest.mark.parametrize("config, where", IGNORED_BY_DEEPSPEED.values(), ids=IGNORED_BY_DEEPSPEED.keys())
def test_keys_deepspeed_ignores_fail_for_the_editor(validator, config, where):
    found = list(validator.iter_errors(config))
    assert [(e.json_path, e.validator) for e in found] == [(where, "additionalProperties")], errors(validator, config)


@pytest.mark.parametrize("config", VALID.values(), ids=VALID.keys())
def test_configs_deepspeed_accepts_validate(validator, config):
    assert errors(validator, config) == []


@pytest.mark.parametrize("config, where", INVALID.values(), ids=INVALID.keys())
def test_configs_deepspeed_rejects_fail(validator, config, where):
    found = list(validator.iter_errors(config))
    assert found, "expected a validation error"
    assert any(e.json_path == where or e.json_path.startswith(where + ".") for e in found), errors(validator, config)
