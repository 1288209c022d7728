"""The typed DeepSpeed configuration model (deepspeed/config_model.py): spellings resolved once, DeepSpeed's
defaults per release, "auto" kept as Auto, DeepSpeed's validators, refused values kept as Rejected; and the
memory and step-time models reading only it (never the raw zero_optimization section)."""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import pytest

from zeroadvisor.deepspeed import schema
from zeroadvisor.deepspeed.config_model import (
    Auto,
    OptimizerParams,
    Rejected,
    overlap_comm_at,
    read_bf16,
    read_fp16,
    read_optimizer,
    read_zero,
)
from zeroadvisor.deepspeed.settings import read
from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.settings import read_settings
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.vocab import Device, Precision, Stage

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "zeroadvisor"
SPEC = ModelSpec(parameters=1_000_000_000, num_layers=24, hidden_size=2048, num_attention_heads=16,
                 vocab_size=32000, intermediate_size=8192)


def zero(**section: object) -> dict[str, object]:
    return {"zero_optimization": section}


@pytest.mark.parametrize("field, plain, stage3", [
    ("prefetch_bucket_size", "prefetch_bucket_size", "stage3_prefetch_bucket_size"),
    ("param_persistence_threshold", "param_persistence_threshold", "stage3_param_persistence_threshold"),
    ("model_persistence_threshold", "model_persistence_threshold", "stage3_model_persistence_threshold"),
    ("max_live_parameters", "max_live_parameters", "stage3_max_live_parameters"),
    ("max_reuse_distance", "max_reuse_distance", "stage3_max_reuse_distance"),
])
def test_the_stage3_and_plain_spellings_give_one_typed_value(field, plain, stage3):
    by_plain = getattr(read_zero(zero(**{plain: 1234})), field)
    by_stage3 = getattr(read_zero(zero(**{stage3: "1234"})), field)  # lax mode: "1234" is 1234
    assert by_plain == by_stage3 == 1234
    assert type(by_plain) is int
    both = getattr(read_zero(zero(**{stage3: 7, plain: 9})), field)
    assert both == 7  # the stage3_* spelling is read first


def test_legacy_spellings_resolve_to_the_same_typed_values():
    legacy = read_zero(zero(stage=2, cpu_offload=True, stage3_gather_fp16_weights_on_model_save=True))
    current = read_zero(zero(stage=2, offload_optimizer={"device": "cpu"},
                             stage3_gather_16bit_weights_on_model_save=True))
    assert legacy.offload_optimizer.device is current.offload_optimizer.device is Device.CPU
    assert legacy.gather_16bit_weights_on_model_save is current.gather_16bit_weights_on_model_save is True
    assert (legacy.offload_optimizer.legacy, current.offload_optimizer.legacy) == (True, False)
    assert read_zero(zero(cpu_offload_param=True)).offload_param.device is Device.CPU
    assert read_zero({"zero_optimization": True}).stage is Stage.OPTIMIZER_STATES  # the legacy bool form
    bfloat16 = read_bf16({"bfloat16": {"enabled": True, "bf16_master_weights_and_grads": True}})
    bf16 = read_bf16({"bf16": {"enabled": "true", "bf16_master_weights_and_grads": True}})
    assert (bfloat16.enabled, bfloat16.master_weights_and_grads) == (bf16.enabled, bf16.master_weights_and_grads)
    assert (bfloat16.key, bf16.key) == ("bfloat16", "bf16")
    # DeepSpeed reads bfloat16 only where bf16 is absent
    assert read_bf16({"bf16": {"enabled": False}, "bfloat16": {"enabled": True}}).enabled is False


def test_every_field_is_typed():
    z = read_zero(zero(stage="3", reduce_bucket_size=5e8, overlap_comm="yes", offload_param={"device": "NVMe"}))
    assert z.stage is Stage.WEIGHTS
    assert (z.reduce_bucket_size, type(z.reduce_bucket_size)) == (500_000_000, int)
    assert z.overlap_comm is True
    assert z.offload_param.device is Device.NVME
    assert z.offload_param.written == "NVMe"  # the text as written stays for the rules that compare it
    assert read(None).precision is Precision.FP32
    assert read({"fp16": {"enabled": True}, "bf16": {"enabled": True}}).precision is Precision.FP16  # engine order


@pytest.mark.parametrize("release, pinned", [("0.19.4", False), ("0.19.8", True)])
def test_defaults_are_the_release_s(release, pinned):
    config = zero(stage=3, offload_optimizer={"device": "cpu"})
    with schema.reading_as(release):
        offload = read_zero(config).offload_optimizer
    assert offload.pin_memory is pinned
    assert offload.buffer_count == schema.default("zero_optimization", "offload_optimizer", "buffer_count")


def test_defaults_come_from_the_schema():
    z = read_zero({})
    assert z.stage == schema.default("zero_optimization", "stage")
    assert z.reduce_bucket_size == schema.default("zero_optimization", "reduce_bucket_size")
    assert z.prefetch_bucket_size == schema.default("zero_optimization", "prefetch_bucket_size")
    assert z.model_persistence_threshold == schema.default("zero_optimization", "model_persistence_threshold")
    assert z.overlap_comm is None and z.offload_optimizer.device is Device.NONE


def test_auto_stays_auto_with_the_spelling_and_the_default():
    z = read_zero(zero(stage="auto", stage3_prefetch_bucket_size="auto", prefetch_bucket_size=5,
                       reduce_scatter="auto", offload_optimizer={"device": "auto", "pin_memory": "auto"}))
    assert z.stage == Auto("stage", Stage.DISABLED)
    assert z.prefetch_bucket_size == Auto("stage3_prefetch_bucket_size",
                                          schema.default("zero_optimization", "prefetch_bucket_size"))
    assert z.reduce_scatter == Auto("reduce_scatter", True)
    assert z.offload_optimizer.device == Auto("device", Device.NONE)
    assert isinstance(z.offload_optimizer.pin_memory, Auto)
    alias = read_zero(zero(max_live_parameters="auto")).max_live_parameters
    assert alias == Auto("max_live_parameters", schema.default("zero_optimization", "max_live_parameters"))
    assert read_fp16({"fp16": {"enabled": "auto"}}).enabled == Auto("enabled", False)
    assert read({"bf16": {"enabled": "auto"}}).open_precisions == (Precision.BF16,)


def test_overlap_comm_validator_is_true_at_stage_3_only_when_left_unset():
    assert [overlap_comm_at(None, stage) for stage in Stage] == [False, False, False, True]
    assert [overlap_comm_at(False, stage) for stage in Stage] == [False] * 4
    assert [overlap_comm_at(True, stage) for stage in Stage] == [True] * 4
    s = read_settings(zero(stage=2), SPEC, 8)
    assert (s.overlap_comm, s.overlap_comm_at(2), s.overlap_comm_at(3)) == (None, False, True)


@pytest.mark.parametrize("section, field, message", [
    ({"allgather_bucket_size": "lots"}, "allgather_bucket_size",
     "zero_optimization.allgather_bucket_size = 'lots' is not an integer DeepSpeed accepts"),
    ({"stage3_max_live_parameters": 2**70}, "max_live_parameters",
     "zero_optimization.stage3_max_live_parameters = 1180591620717411303424 does not fit torch's int64 sizes"),
    ({"max_live_parameters": None}, "max_live_parameters",
     "zero_optimization.stage3_max_live_parameters = None is not an integer DeepSpeed accepts"),
    ({"prefetch_bucket_size": []}, "prefetch_bucket_size",
     "zero_optimization.prefetch_bucket_size = [] is not an integer DeepSpeed accepts"),
    ({"contiguous_gradients": "maybe"}, "contiguous_gradients",
     "zero_optimization.contiguous_gradients = 'maybe' is not a boolean DeepSpeed accepts"),
])
def test_refused_values_are_kept_as_rejected_and_the_estimate_refuses_them(section, field, message):
    value = getattr(read_zero(zero(**section)), field)
    assert isinstance(value, Rejected) and value.message == message
    with pytest.raises(EstimateError, match="^" + message.replace("[", r"\[").replace("]", r"\]") + "$"):
        read_settings(zero(**section), SPEC, 8)


def test_a_refused_offload_option_and_device():
    ratio = read_zero(zero(offload_optimizer={"device": "cpu", "ratio": float("nan")})).offload_optimizer.ratio
    assert isinstance(ratio, Rejected)
    assert ratio.message == "zero_optimization.offload_optimizer.ratio = nan is not a number DeepSpeed accepts"
    device = read_zero(zero(offload_param={"device": "GPU"})).offload_param.device
    assert device == Rejected("zero_optimization.offload_param.device", "gpu", "is not none/cpu/nvme")
    s = read_settings(zero(stage=3, offload_param={"device": "GPU"}), SPEC, 8)  # costed as none, with a note
    assert s.offload_param is Device.NONE
    note = "zero_optimization.offload_param.device='gpu' is not none/cpu/nvme (DeepSpeed rejects it): costed as none"
    assert note in s.assumptions
    stage = read_zero(zero(stage=7)).stage
    assert isinstance(stage, Rejected) and stage.written == 7


def test_the_optimizer_params_are_typed():
    opt = read_optimizer({"optimizer": {"type": "AdamW", "params": {"amsgrad": True, "foreach": False,
                                                                    "weight_decay": "auto", "torch_adam": 1}}})
    assert (opt.written, opt.type) == ("AdamW", "adamw")
    assert opt.params == OptimizerParams(amsgrad=True, torch_adam=True, foreach=False)
    untyped = read_optimizer({"optimizer": {"params": {}}}), read_optimizer({"optimizer": {"type": ""}})
    assert [opt.written for opt in untyped] == [None, None]  # no type: the client's optimizer
    assert read_optimizer({}).present is False


def test_the_model_is_frozen():
    z = read_zero(zero(stage=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        z.stage = Stage.WEIGHTS  # type: ignore[misc]


def test_settings_types_precision_stage_and_devices_as_vocab_enums():
    s = read_settings({"bf16": {"enabled": True}, **zero(stage="2", offload_optimizer={"device": "cpu"})}, SPEC, 8)
    assert (type(s.stage), type(s.precision), type(s.offload_optimizer), type(s.offload_param)) == \
        (Stage, Precision, Device, Device)
    assert s.mixed_precision and not read_settings({}, SPEC, 8).mixed_precision
    filled = read_settings(zero(stage="auto"), SPEC, 8, TrainingShape(zero_stage=3, precision="bf16"))
    assert (filled.stage, filled.precision) == (Stage.WEIGHTS, Precision.FP32)  # the config writes no 16-bit format


# ---------------------------------------------------------------- memory/ and throughput/ read only the typed model

RAW_NAMES = ("ds_default", "zget", "_zero_value")
RAW_ATTRIBUTES = ("zero", "block")


def _sources() -> list[pathlib.Path]:
    return sorted([*(PACKAGE / "memory").rglob("*.py"), *(PACKAGE / "throughput").rglob("*.py")])


def _raw_reads(path: pathlib.Path, root: pathlib.Path = PACKAGE) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and node.slice.value == "zero_optimization":
            found.append(f"{where} [\"zero_optimization\"]")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "zero_optimization":
            found.append(f"{where} .get(\"zero_optimization\")")
        if isinstance(node, ast.Attribute) and node.attr in RAW_ATTRIBUTES:
            found.append(f"{where} .{node.attr}")
        if isinstance(node, ast.Name) and node.id in RAW_NAMES:
            found.append(f"{where} {node.id}")
    return found


def test_memory_and_throughput_never_read_the_raw_zero_section():
    assert _sources()
    offending = [hit for path in _sources() for hit in _raw_reads(path)]
    assert offending == []


def test_the_raw_read_check_finds_a_raw_read(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('def f(config, ds):\n    return config["zero_optimization"], ds.zero, ds_default("x"), '
                     'config.get("zero_optimization"), ds.offload_param.block\n', encoding="utf-8")
    hits = _raw_reads(probe, tmp_path)
    assert sorted(hit.split(" ", 1)[1] for hit in hits) == sorted(
        ['["zero_optimization"]', ".zero", "ds_default", '.get("zero_optimization")', ".block"])


def test_data_types_read_as_canonical_names_auto_and_refused_spellings():
    from zeroadvisor.deepspeed.config_model import read_data_types

    spelled = [read_data_types({"data_types": {"grad_accum_dtype": name}}).grad_accum_dtype
               for name in ("fp32", "float32", "torch.float32", " FLOAT ")]
    assert spelled == ["fp32"] * 4
    assert read_data_types({"communication_data_type": "bfloat16"}).communication_data_type == "bf16"
    assert read_data_types({}).grad_accum_dtype is None  # DeepSpeed's default: the model's dtype
    assert read_data_types({"data_types": {"grad_accum_dtype": "auto"}}).grad_accum_dtype == \
        Auto("grad_accum_dtype", None)
    refused = read_data_types({"data_types": {"grad_accum_dtype": "fp64"}}).grad_accum_dtype
    assert refused == Rejected("data_types.grad_accum_dtype", "fp64", "is not a dtype DeepSpeed knows")
    s = read_settings({"bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp64"},
                       "communication_data_type": "fp64"}, SPEC, 8)
    assert (s.grad_accum_dtype, s.communication_dtype) == ("bf16", "bf16")  # the model dtype, noted once
    assert [note for note in s.assumptions if "fp64" in note] == [
        "data_types.grad_accum_dtype='fp64' not understood; assumed the model dtype"]


def test_gradient_clipping_is_typed_and_auto_is_the_trainer_s_max_grad_norm():
    from zeroadvisor.deepspeed.config_model import read_gradient_clipping

    assert read_gradient_clipping({"gradient_clipping": "0.5"}) == 0.5
    assert read_gradient_clipping({}) is None and read_gradient_clipping({"gradient_clipping": None}) is None
    with schema.reading_as("0.19.2"):
        assert read_gradient_clipping({"gradient_clipping": "auto"}) == Auto("gradient_clipping", 0.0)
    assert isinstance(read_gradient_clipping({"gradient_clipping": True}), Rejected)
    clipping = {value: read_settings({"gradient_clipping": value}, SPEC, 8).gradient_clipping
                for value in ("auto", 2, True)}
    assert clipping == {"auto": 1.0, 2: 2.0, True: 0.0}


@pytest.mark.parametrize("value, degree", [
    (None, None), (4, 4), (4.0, 4), (0, 1), ("auto", Auto("autotp_size", None)),
    (True, Rejected("tensor_parallel.autotp_size", True, "is not a parallel degree DeepSpeed accepts")),
    ("4", Rejected("tensor_parallel.autotp_size", "4", "is not a parallel degree DeepSpeed accepts")),
    (2.5, Rejected("tensor_parallel.autotp_size", 2.5, "is not a parallel degree DeepSpeed accepts")),
])
def test_parallel_degrees_are_typed(value, degree):
    from zeroadvisor.deepspeed.config_model import parallel_degree

    assert parallel_degree(value, "tensor_parallel.autotp_size") == degree
    layout = read({"tensor_parallel": {"autotp_size": value}}).layout
    assert layout.set_degrees["tensor"] == degree
