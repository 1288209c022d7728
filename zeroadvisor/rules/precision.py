"""Precision rules: fp16 and bf16 blocks and the master-weight options."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from zeroadvisor.config import merge_patch as patch
from zeroadvisor.deepspeed import releases, schema
from zeroadvisor.deepspeed.effective import AUTO
from zeroadvisor.lint.context import Integration
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context


def _bf16_pointer(ctx: Context) -> str | None:
    if isinstance(ctx.get("/bf16"), dict):
        return "/bf16"
    if isinstance(ctx.get("/bfloat16"), dict):
        return "/bfloat16"
    return None


def _truthy(ctx: Context, pointer: str) -> bool:
    """``enabled`` as a release before 0.17 reads it: dict.get and Python truth, so "auto" and "false" are on."""
    value = ctx.get(pointer + "/enabled", False)
    return bool(value) and not (isinstance(value, (int, float)) and value == 0)


def _both_enabled(ctx: Context) -> Iterator[Hit]:
    bf16 = _bf16_pointer(ctx)
    if bf16 and ctx.deepspeed.fp16_enabled is True and ctx.deepspeed.bf16_enabled is True:
        yield Hit(bf16 + "/enabled",
                  "fp16 and bf16 are both enabled: DeepSpeed asserts 'bf16 and fp16 modes cannot be "
                  "simultaneously enabled'; keep bf16 on Ampere or newer GPUs, else fp16")
    elif (bf16 and releases.behaviour(schema.active_release()).precision_auto_enables
          and ctx.options.integration in (Integration.ANY, Integration.DEEPSPEED)
          and _truthy(ctx, "/fp16") and _truthy(ctx, bf16)):
        # before 0.17 runtime/config.py get_fp16_enabled/get_bfloat16_enabled read "enabled" with dict.get:
        # the string "auto" (or "false") is true there, so DeepSpeed itself sees both modes on
        values = " and ".join(f"{p[1:]}.enabled {ctx.get(p + '/enabled')!r}" for p in ("/fp16", bf16))
        yield Hit(bf16 + "/enabled",
                  f"{releases.label(schema.active_release())} reads {values} as true (dict.get before 0.17): "
                  "both modes on, it asserts 'bfloat16 and fp16 modes cannot be simultaneously enabled'; the HF "
                  "Trainer and Accelerate fill \"auto\" first (--integration hf-trainer), plain DeepSpeed does not")


FP16_AND_BF16 = Rule(
    code="ZA501",
    name="fp16-and-bf16",
    severity=Severity.ERROR,
    summary="fp16 and bf16 are both enabled.",
    explanation=(
        "DeepSpeed trains in one 16-bit format and asserts when both blocks are enabled. \"auto\" in "
        "both is fine: the Hugging Face integration enables at most one."
    ),
    check=_both_enabled,
    examples=(
        Example('{"train_batch_size": 8, "fp16": {"enabled": true}, "bf16": {"enabled": true}}', fails=True),
        Example('{"train_batch_size": 8, "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}', fails=False),
    ),
    source="deepspeed/runtime/config.py _do_error_check",
)


def fp16_only_keys() -> set[str]:
    """Keys the fp16 model has and the bf16 model lacks (loss scaling, auto_cast)."""
    fp16 = set(schema.properties(schema.node("fp16")))
    bf16 = set(schema.properties(schema.node("bf16")))
    return fp16 - bf16


def _fp16_keys_in_bf16(ctx: Context) -> Iterator[Hit]:
    if (schema.node("bf16") or {}).get("x-unknown-keys") != "error":
        return  # before 0.17 bf16 is read with dict.get: the fp16 keys are ignored there (ignored-key says so)
    only = fp16_only_keys()
    for pointer in ("/bf16", "/bfloat16"):
        block = ctx.get(pointer)
        if not isinstance(block, dict):
            continue
        for key in block:
            if key in only:
                yield Hit(f"{pointer}/{key}",
                          f"{key!r} is an fp16 setting: bf16 needs no loss scaling, and DeepSpeed >= 0.17.1 "
                          "rejects it in the bf16 block ('Extra inputs are not permitted'); delete it",
                          fix=patch.delete(f"{pointer}/{key}"))


FP16_KEY_IN_BF16 = Rule(
    code="ZA502",
    name="fp16-key-in-bf16",
    severity=Severity.ERROR,
    summary="Loss-scaling keys copied from the fp16 block into the bf16 block.",
    explanation=(
        "Since DeepSpeed 0.17.1 (PR #6976) bf16 is a pydantic model with extra='forbid' and has no "
        "loss_scale, loss_scale_window, initial_scale_power, hysteresis, min_loss_scale or auto_cast; "
        "configs that carried them over from fp16 stopped launching (FlagEmbedding#1487, "
        "llm-rankers#2). Delete them: bf16 does not need loss scaling."
    ),
    check=_fp16_keys_in_bf16,
    examples=(
        Example('{"train_batch_size": 8, "bf16": {"enabled": true, "loss_scale": 0}}', fails=True),
        Example('{"train_batch_size": 8, "bf16": {"enabled": true}}', fails=False),
    ),
    supersedes=("unknown-key",),
    source="deepspeed/runtime/precision_config.py DeepSpeedBF16Config; DS PR #6976",
)

# (block, key): what DeepSpeed requires for it (runtime/config.py _do_error_check).
_MASTER_OPTIONS = (("/fp16", "fp16_master_weights_and_grads"), ("bf16", "bf16_master_weights_and_grads"),
                   ("bf16", "bf16_optimizer_states"))


def _master_weights(ctx: Context) -> Iterator[Hit]:
    bf16 = _bf16_pointer(ctx) or "/bf16"
    for block, key in _MASTER_OPTIONS:
        pointer = f"{bf16 if block == 'bf16' else block}/{key}"
        if ctx.get(pointer) is not True:
            continue
        if ctx.stage == 0:
            yield Hit(pointer, f"{key} needs ZeRO stage 1, 2 or 3: DeepSpeed asserts '{key} is only supported "
                               "with ZeRO Stage 1, 2, or 3'")
        if key == "bf16_optimizer_states" and ctx.get(f"{bf16}/bf16_master_weights_and_grads") is not True:
            yield Hit(pointer, "bf16_optimizer_states requires bf16_master_weights_and_grads: DeepSpeed asserts "
                               "at launch", fix=patch.at(f"{bf16}/bf16_master_weights_and_grads", True))
        if key == "fp16_master_weights_and_grads" and ctx.deepspeed.offload_optimizer.written != "cpu":
            yield Hit(pointer, "fp16_master_weights_and_grads works only with offload_optimizer on the CPU "
                               "(DeepSpeedCPUAdam keeps the fp32 states there); DeepSpeed fails at engine start")


MASTER_WEIGHTS_REQUIREMENTS = Rule(
    code="ZA503",
    name="master-weights-requirements",
    severity=Severity.ERROR,
    summary="16-bit master weights or optimizer states without what they require.",
    explanation=(
        "fp16_master_weights_and_grads, bf16_master_weights_and_grads and bf16_optimizer_states need "
        "ZeRO stage 1-3; bf16_optimizer_states needs bf16_master_weights_and_grads; "
        "fp16_master_weights_and_grads needs optimizer offload to the CPU."
    ),
    check=_master_weights,
    examples=(
        Example('{"train_batch_size": 8, "bf16": {"enabled": true, "bf16_optimizer_states": true}, '
                '"zero_optimization": {"stage": 2}}', fails=True),
        Example('{"train_batch_size": 8, "bf16": {"enabled": true, "bf16_master_weights_and_grads": true, '
                '"bf16_optimizer_states": true}, "zero_optimization": {"stage": 2}}', fails=False),
    ),
    source="deepspeed/runtime/config.py _do_error_check; runtime/engine.py",
)

def _dynamic_loss_scale(ctx: Context) -> Iterator[Hit]:
    fp16 = ctx.get("/fp16")
    if not isinstance(fp16, dict) or ctx.deepspeed.fp16_enabled is not True:
        return
    scale = fp16.get("loss_scale", schema.default("fp16", "loss_scale"))
    if scale == AUTO or isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale != 0:
        return  # a static loss scale: neither key is used (nor checked)
    checked = releases.behaviour(schema.active_release())
    for key, on in (("loss_scale_window", checked.fp16_loss_scale_window_checked),
                    ("min_loss_scale", checked.fp16_min_loss_scale_checked)):
        value = fp16.get(key)
        if not on or value is None or value == AUTO or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # the type rules report a value that is no number
        if value <= 0:
            yield Hit(f"/fp16/{key}",
                      f"fp16.{key} must be > 0 with dynamic loss scaling (loss_scale 0), got {value!r}: "
                      f"{releases.label(schema.active_release())} raises 'fp16.{key} must be > 0 when dynamic loss "
                      "scaling is enabled'", at="value",
                      fix=patch.at(f"/fp16/{key}", schema.default("fp16", key)))


DYNAMIC_LOSS_SCALE = Rule(
    code="ZA504",
    name="dynamic-loss-scale-params",
    severity=Severity.ERROR,
    summary="loss_scale_window or min_loss_scale <= 0 with dynamic fp16 loss scaling.",
    explanation=(
        "With fp16 enabled and loss_scale 0 (dynamic), DeepSpeedFP16Config refuses a loss_scale_window or "
        "min_loss_scale <= 0 since 0.19.3 (the window is a modulus: 0 divides by zero at the first "
        "overflow; a floor of 0 lets the scale collapse). Older releases start and fail or misbehave later. "
        "Use the defaults (1000 and 1)."
    ),
    check=_dynamic_loss_scale,
    examples=(
        Example('{"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 0}}',
                fails=True),
        Example('{"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale": 128, "loss_scale_window": 0}}',
                fails=False),
    ),
    source="deepspeed/runtime/precision_config.py DeepSpeedFP16Config._validate_dynamic_loss_scale_params (0.19.3+)",
)

RULES = (FP16_AND_BF16, FP16_KEY_IN_BF16, MASTER_WEIGHTS_REQUIREMENTS, DYNAMIC_LOSS_SCALE)
