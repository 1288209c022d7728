"""Batch-size rules: DeepSpeed's train_batch_size = micro x accumulation x world size.

The counts are the document's (deepspeed/settings.py read_batch, through ``ctx.deepspeed.batch``)."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import TYPE_CHECKING

from zeroadvisor.config import merge_patch as patch
from zeroadvisor.deepspeed import releases, schema
from zeroadvisor.deepspeed.config_model import overlap_comm_at
from zeroadvisor.deepspeed.settings import GAS, MBS, TBS, BatchCounts
from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context

# Without --gpus, try every world size up to this many GPUs for a consistent reading.
_MAX_WORLD = 1 << 16


def consistent(batch: BatchCounts, world: float) -> bool:
    """DeepSpeedConfig._batch_assertion: all positive and tbs == mbs * gas * world."""
    derived = batch.resolve(world)
    if derived is None:
        return False
    t, m, g = derived
    try:
        return t > 0 and m > 0 and g > 0 and t == m * g * world
    except OverflowError:  # counts past the float range (derive_batch's exact fallback): compare exactly
        return t > 0 and m > 0 and g > 0 and t == m * g * Fraction(world)


def world_size(ctx: Context) -> float | None:
    """The world size DeepSpeed's batch assertion divides by: --gpus over sequence_parallel_size.

    Not over tensor_parallel.autotp_size: deepspeed.initialize builds DeepSpeedConfig with the caller's
    mpu (None for AutoTP) before the engine creates the tensor-parallel groups (deepspeed/__init__.py
    initialize; runtime/engine.py _configure_tensor_parallel_states), so config.py divides by the whole
    world even though each tensor-parallel group shares one micro batch."""
    if ctx.options.gpus is None:
        return None
    world = ctx.deepspeed.batch_world(ctx.options.gpus)
    # a sequence_parallel_size past the float range makes it 0.0, which DeepSpeed's batch arithmetic divides by
    # (ZeroDivisionError there); the parallel rules report the degree, and the batch is judged on no world size
    return world if world > 0 else None


def _mismatch(ctx: Context) -> Iterator[Hit]:
    batch = ctx.deepspeed.batch
    if any(v is not None and v <= 0 for v in batch.written):
        return  # batch-size-not-positive reports it
    tbs, mbs, gas = batch.counts
    if tbs is None and mbs is None:
        return
    where = "/" + next(k for k, v in zip((TBS, MBS, GAS), batch.counts, strict=True) if v is not None)
    world = world_size(ctx)
    if world is not None:
        if not consistent(batch, world):
            resolved = batch.resolve(world)
            assert resolved is not None  # None only without train_batch_size and micro batch (returned above)
            t, m, g = resolved
            yield Hit(where,
                      f"on {ctx.options.gpus} GPUs DeepSpeed asserts 'train_batch_size is not equal to "
                      f"micro_batch_per_gpu * gradient_acc_step * world_size {t} != {m} * {g} * {_n(world)}'"
                      f"{_implied(tbs, mbs, gas)}{_autotp_note(ctx, batch, world)}",
                      fix=_fix(tbs, mbs, gas, world))
        return
    if tbs is not None and not any(consistent(batch, w) for w in range(1, min(tbs, _MAX_WORLD) + 1)):
        product = " x ".join(str(v) for v in (mbs, gas) if v is not None)
        yield Hit(where, f"train_batch_size {tbs} is not {product} times any number of GPUs: DeepSpeed's "
                         "batch assertion fails on every cluster size; fix one of the three")


def _autotp_note(ctx: Context, batch: BatchCounts, world: float) -> str:
    tp = ctx.deepspeed.layout.tensor
    if tp is None or tp < 2 or not consistent(batch, world / tp):
        return ""
    return (f"; the file counts the {_n(world / tp)} data-parallel groups of AutoTP, but DeepSpeed 0.19.8 "
            "checks the batch before it forms the tensor-parallel groups and divides by every GPU")


def _n(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _implied(tbs: int | None, mbs: int | None, gas: int | None) -> str:
    if tbs is None or mbs is None or gas is None or tbs % (mbs * gas):
        return ""
    return f" (the file implies {tbs // (mbs * gas)} GPUs)"


def _fix(tbs: int | None, mbs: int | None, gas: int | None, world: float) -> JSONObject | None:
    if not float(world).is_integer():
        return None
    ranks = int(world)
    if tbs is not None and mbs is not None and tbs % (mbs * ranks) == 0:
        return patch.at("/" + GAS, tbs // (mbs * ranks))
    if mbs is not None and gas is not None:
        return patch.at("/" + TBS, mbs * gas * ranks)
    return None


BATCH_SIZE_MISMATCH = Rule(
    code="ZA401",
    name="batch-size-mismatch",
    severity=Severity.ERROR,
    summary="train_batch_size is not micro batch x accumulation x world size.",
    explanation=(
        "DeepSpeed derives the missing member of (train_batch_size, micro batch, accumulation) with "
        "floor division and asserts train_batch_size == micro * accumulation * world_size. Without "
        "--gpus the linter reports only what no world size can satisfy; with --gpus N it checks "
        "exactly and proposes the accumulation that keeps the global batch."
    ),
    check=_mismatch,
    examples=(
        Example('{"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1}',
                fails=True),
        Example('{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}',
                fails=True, options={"gpus": 4}),
        Example('{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}',
                fails=False, options={"gpus": 8}),
    ),
    source="deepspeed/runtime/config.py _configure_train_batch_size, _batch_assertion; DS#6914",
)


def _not_positive(ctx: Context) -> Iterator[Hit]:
    for key, value in zip((TBS, MBS, GAS), ctx.deepspeed.batch.written, strict=True):
        if value is not None and value <= 0:
            yield Hit("/" + key, f"{key} is {value}: DeepSpeed asserts it 'has to be greater than 0'", at="value")


BATCH_SIZE_NOT_POSITIVE = Rule(
    code="ZA402",
    name="batch-size-not-positive",
    severity=Severity.ERROR,
    summary="A batch size or accumulation of 0 or less.",
    explanation="DeepSpeed asserts that train_batch_size, the micro batch and the accumulation steps are > 0.",
    check=_not_positive,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 0}', fails=True),
        Example('{"train_micro_batch_size_per_gpu": 1}', fails=False),
    ),
    supersedes=("out-of-range",),
    source="deepspeed/runtime/config.py _batch_assertion",
)


def _missing(ctx: Context) -> Iterator[Hit]:
    # {} too: DeepSpeed asserts on it like on any config without a batch size, and no integration
    # adds a missing key (transformers fill_match and accelerate deepspeed_config_process fill "auto" only).
    if not isinstance(ctx.data, dict) or ctx.foreign:
        return
    if ctx.deepspeed.batch.present & {TBS, MBS}:
        return
    yield Hit("", "neither train_batch_size nor train_micro_batch_size_per_gpu is set: DeepSpeed asserts "
                  "at launch unless your launcher injects one", position=(1, 1))


NO_BATCH_SIZE = Rule(
    code="ZA403",
    name="no-batch-size",
    severity=Severity.WARNING,
    summary="Neither train_batch_size nor train_micro_batch_size_per_gpu is given.",
    explanation=(
        "DeepSpeedConfig asserts 'Either train_batch_size or train_micro_batch_size_per_gpu needs to "
        "be provided'. Partial configs that a script completes (DeepSpeed's own autotuning templates) "
        "are fine; anything launched as is fails."
    ),
    check=_missing,
    examples=(
        Example('{"zero_optimization": {"stage": 2}}', fails=True),
        Example('{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}', fails=False),
    ),
    source="deepspeed/runtime/config.py _configure_train_batch_size",
)

def _unmanaged(ctx: Context) -> Iterator[Hit]:
    """managed_gradient_accumulation false: the engine's asserts, in every release that reads the key (0.19.4+,
    each checked in its runtime/engine.py _do_sanity_check)."""
    if ctx.get("/managed_gradient_accumulation") is not False or schema.node("managed_gradient_accumulation") is None:
        return  # the default (true), or a release that does not read the key (ignored-key says so)
    release = releases.label(schema.active_release())
    overlap = ctx.get("/zero_optimization/overlap_comm")
    # as written (a value pydantic would coerce is the value rules' to report); unset: DeepSpeed's validator
    overlap = overlap if isinstance(overlap, bool) else overlap_comm_at(None, ctx.stage or 0)
    if overlap and (ctx.stage or 0) < 2:
        yield Hit("/managed_gradient_accumulation",
                  f"managed_gradient_accumulation false with overlap_comm at ZeRO stage {ctx.stage or 0}: {release} "
                  "asserts \"managed_gradient_accumulation=False supports ZeRO overlap_comm only with ZeRO stage 2\" "
                  "at launch; set zero_optimization.overlap_comm to false, or use stage 2", at="value")
    if ctx.get("/compile/deepcompile") is True:
        yield Hit("/managed_gradient_accumulation",
                  f"managed_gradient_accumulation false with DeepCompile: {release} asserts "
                  "\"managed_gradient_accumulation=False is not supported with DeepCompile\" at launch", at="value")
    refuses = releases.behaviour(schema.active_release())  # checks only some of these releases make
    offloaded = [name for name, on in (("optimizer state", ctx.deepspeed.offload_optimizer.on),
                                       ("parameter", ctx.deepspeed.offload_param.on)) if on]
    if offloaded and refuses.unmanaged_accumulation_offload_refused:
        yield Hit("/managed_gradient_accumulation",
                  f"managed_gradient_accumulation false with ZeRO {offloaded[0]} offload: {release} asserts "
                  f"\"managed_gradient_accumulation=False is not supported with ZeRO {offloaded[0]} offload\" at "
                  "launch", at="value")
    amp = ctx.get("/amp")
    if isinstance(amp, dict) and amp.get("enabled") is True and refuses.unmanaged_accumulation_amp_refused:
        yield Hit("/managed_gradient_accumulation",
                  f"managed_gradient_accumulation false with Apex AMP: {release} asserts "
                  "\"managed_gradient_accumulation=False is not supported with Apex AMP\" at launch", at="value")


UNMANAGED_ACCUMULATION_REFUSED = Rule(
    code="ZA404",
    name="unmanaged-accumulation-refused",
    severity=Severity.ERROR,
    summary="managed_gradient_accumulation false with a feature the engine refuses it with (overlap_comm below "
            "ZeRO-2, DeepCompile, ...).",
    explanation=(
        "With managed_gradient_accumulation false (DeepSpeed 0.19.4) the training script accumulates gradients "
        "itself; the engine then asserts that overlap_comm is used only at ZeRO stage 2 or 3 and that DeepCompile "
        "is off (and that there is no pipeline, which the config does not show); 0.19.4 also refuses ZeRO "
        "offload, and 0.19.4-0.19.7 Apex AMP. DeepSpeedConfig accepts the config: the run fails when "
        "deepspeed.initialize builds the engine."
    ),
    check=_unmanaged,
    examples=(
        Example('{"train_batch_size": 8, "managed_gradient_accumulation": false, '
                '"zero_optimization": {"stage": 1, "overlap_comm": true}}', fails=True),
        Example('{"train_batch_size": 8, "managed_gradient_accumulation": false, '
                '"zero_optimization": {"stage": 2, "overlap_comm": true}}', fails=False),
    ),
    source="deepspeed/runtime/engine.py _do_sanity_check (0.19.4+)",
)

RULES = (BATCH_SIZE_MISMATCH, BATCH_SIZE_NOT_POSITIVE, NO_BATCH_SIZE, UNMANAGED_ACCUMULATION_REFUSED)
