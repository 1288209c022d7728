"""Offload and stage rules: settings that do nothing, or fail, at the configured stage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from zeroadvisor.config import merge_patch as patch
from zeroadvisor.deepspeed import effective as dsconfig
from zeroadvisor.deepspeed import releases, schema
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context

_ZERO = "/zero_optimization"


def _offload_ignored(ctx: Context) -> Iterator[Hit]:
    stage = ctx.stage
    if stage is None:
        return
    for which in ("offload_param", "offload_optimizer"):
        legacy = dsconfig.LEGACY_OFFLOAD[which]
        needed = schema.min_stage(which)  # None: the key takes effect at every stage
        if needed is None or stage >= needed or ctx.deepspeed.offload(which).written in ("none", dsconfig.AUTO):
            continue
        pointer = f"{_ZERO}/{which}" if ctx.has(f"{_ZERO}/{which}") else f"{_ZERO}/{legacy}"
        what = "parameter offload exists only in ZeRO-3" if which == "offload_param" else \
            "optimizer offload (ZeRO-Offload) needs stage 1, 2 or 3"
        yield Hit(pointer, f"{pointer.rsplit('/', 1)[-1]} is ignored at ZeRO stage {stage}: {what}, and DeepSpeed "
                           "drops it without a warning; delete it or raise the stage", fix=patch.delete(pointer))


OFFLOAD_IGNORED = Rule(
    code="ZA601",
    name="offload-ignored",
    severity=Severity.WARNING,
    summary="Offload configured at a stage that ignores it.",
    explanation=(
        "offload_param only works at stage 3 and offload_optimizer only at stages 1-3; elsewhere "
        "DeepSpeed ignores them without a warning (measured: the same 16 bytes/param as without), so "
        "the memory you planned on is not saved. DeepSpeed's own hybrid-engine test sets offload_param "
        "at stage 0, hence a warning, not an error."
    ),
    check=_offload_ignored,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}',
                fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}',
                fails=False),
    ),
    supersedes=("stage3-key-below-stage3",),
    source="deepspeed/runtime/engine.py (offload_param read only by stage 3); wenet PR#2499",
)


def _nvme_without_path(ctx: Context) -> Iterator[Hit]:
    for which in ("offload_optimizer", "offload_param"):
        pointer = f"{_ZERO}/{which}"
        block = ctx.get(pointer)
        if isinstance(block, dict) and block.get("device") == "nvme" and not block.get("nvme_path"):
            yield Hit(pointer + "/device",
                      f"{which} goes to NVMe but has no nvme_path: DeepSpeed fails when it creates the swap "
                      "files; set nvme_path to a directory on a fast local NVMe drive")


NVME_WITHOUT_PATH = Rule(
    code="ZA602",
    name="nvme-without-path",
    severity=Severity.ERROR,
    summary="NVMe offload without nvme_path.",
    explanation=(
        "ZeRO-Infinity swaps tensors to files under nvme_path. The config model accepts a missing path, "
        "and the engine fails when it builds the swapper. Accelerate fills nvme_path: \"auto\" from its "
        "own config."
    ),
    check=_nvme_without_path,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}',
                fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", '
                '"nvme_path": "/local_nvme"}}}', fails=False),
    ),
    source="deepspeed/runtime/swap_tensor/partitioned_param_swapper.py",
)


def _partial_offload(ctx: Context) -> Iterator[Hit]:
    if not releases.behaviour(schema.active_release()).partial_offload_stage_checked:
        return  # before 0.15 nothing checks it: the ratio is not used below stage 3
    ratio = ctx.get(f"{_ZERO}/offload_optimizer/ratio")
    if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and ratio < 1 and ctx.stage is not None \
            and ctx.stage < 3:
        yield Hit(f"{_ZERO}/offload_optimizer/ratio",
                  f"offload_optimizer.ratio {ratio} (partial offload) needs ZeRO stage 3: DeepSpeed raises "
                  "'Partial offloading only supported for ZeRO Stage 3'",
                  fix=patch.delete(f"{_ZERO}/offload_optimizer/ratio"))


PARTIAL_OFFLOAD_BELOW_STAGE3 = Rule(
    code="ZA603",
    name="partial-offload-below-stage3",
    severity=Severity.ERROR,
    summary="offload_optimizer.ratio below 1 at stage 1 or 2.",
    explanation=("Partial optimizer offload (ratio < 1) exists only in ZeRO-3; the zero config validator raises "
                 "otherwise."),
    check=_partial_offload,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", '
                '"ratio": 0.3}}}', fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", '
                '"ratio": 0.3}}}', fails=False),
    ),
    source="deepspeed/runtime/zero/config.py offload_ratio_check",
)


def _stage3_keys(ctx: Context) -> Iterator[Hit]:
    zero = ctx.get(_ZERO)
    if ctx.stage is None or ctx.stage >= 3 or not isinstance(zero, dict):
        return
    for key in zero:
        if schema.min_stage(key) == 3:
            yield Hit(f"{_ZERO}/{key}",
                      f"{key} only takes effect at ZeRO stage 3; at stage {ctx.stage} it does nothing")


STAGE3_KEY_BELOW_STAGE3 = Rule(
    code="ZA604",
    name="stage3-key-below-stage3",
    severity=Severity.INFO,
    summary="A stage-3-only setting in a config that runs below stage 3.",
    explanation=(
        "stage3_* settings (prefetch, persistence, live parameters, 16-bit gather on save) are read only "
        "by the ZeRO-3 engine. Harmless, but often a sign that the file is not the stage you think "
        "(several real ds_config_zero3.json files run at stage 2)."
    ),
    check=_stage3_keys,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "stage3_max_live_parameters": 1e9}}',
                fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_max_live_parameters": 1e9}}',
                fails=False),
    ),
    source="deepspeed/runtime/zero/stage3.py, partition_parameters.py",
)

RULES = (OFFLOAD_IGNORED, NVME_WITHOUT_PATH, PARTIAL_OFFLOAD_BELOW_STAGE3, STAGE3_KEY_BELOW_STAGE3)
