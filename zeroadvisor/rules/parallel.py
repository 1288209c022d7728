"""Parallelism rules: pipeline, ZeRO++ and parallel degrees that DeepSpeed rejects or ignores."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from zeroadvisor.config import merge_patch as patch
from zeroadvisor.deepspeed import effective as dsconfig
from zeroadvisor.deepspeed import releases, schema
from zeroadvisor.jsontypes import JSONValue
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context

_ZERO = "/zero_optimization"


def _pipeline_keys(ctx: Context) -> list[str]:
    """Keys of the ``pipeline`` section that DeepSpeed's pipeline config has (get_pipeline_config); they
    are read only by PipelineEngine (runtime/pipe/engine.py), so they say the run uses a PipelineModule."""
    section = ctx.get("/pipeline")
    known = schema.properties(schema.node("pipeline"))
    return [key for key in section if key in known] if isinstance(section, dict) else []


def _pipeline_with_zero(ctx: Context) -> Iterator[Hit]:
    stage = ctx.stage
    keys = _pipeline_keys(ctx)
    if stage is None or stage < 2 or not keys:
        return
    pointer = f"{_ZERO}/stage" if ctx.has(f"{_ZERO}/stage") else _ZERO
    yield Hit(pointer,
              f"ZeRO stage {stage} with a pipeline section ({', '.join(keys)}): if you train with a PipelineModule, "
              "PipelineEngine asserts 'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism'; use "
              "stage 0 or 1 with the pipeline, or drop the pipeline section if the model is not a PipelineModule")


PIPELINE_WITH_ZERO_2_3 = Rule(
    code="ZA901",
    name="pipeline-with-zero-2-3",
    severity=Severity.ERROR,
    summary="A pipeline section together with ZeRO stage 2 or 3.",
    explanation=(
        "DeepSpeed's pipeline parallelism (PipelineEngine, created by deepspeed.initialize for a PipelineModule) "
        "asserts that the ZeRO stage is below 2: gradient and parameter partitioning do not work with its "
        "scheduled all-reduces. The pipeline section is read only by PipelineEngine, so a config that sets "
        "one of its keys (activation_checkpoint_interval, pipe_partitioned, grad_partitioned, use_reentrant, "
        "stages, partition, seed_layers) is meant for a PipelineModule. DeepSpeedConfig itself accepts the "
        "combination; the assertion comes when the engine is built. A pipeline section holding only keys "
        "DeepSpeed does not have is left to the key rules."
    ),
    check=_pipeline_with_zero,
    examples=(
        Example('{"train_batch_size": 8, "pipeline": {"activation_checkpoint_interval": 1}, '
                '"zero_optimization": {"stage": 2}}', fails=True),
        Example('{"train_batch_size": 8, "pipeline": {"activation_checkpoint_interval": 1}, '
                '"zero_optimization": {"stage": 1}}', fails=False),
    ),
    source="deepspeed/runtime/pipe/engine.py PipelineEngine.__init__; deepspeed/__init__.py initialize; "
           "runtime/config.py get_pipeline_config",
)


# ZeRO++ switches and the value that turns each on: all read only by the ZeRO-3 optimizer
# (runtime/engine.py _configure_zero_optimizer passes them to DeepSpeedZeroOptimizer_Stage3 and
# zero.Init; stage_1_and_2.py never reads them).
_ZEROPP: dict[str, Callable[[JSONValue], bool]] = {
    "zero_hpz_partition_size": lambda v: (dsconfig.positive_int(v) or 0) > 1,
    "zero_quantized_weights": lambda v: v is True,
    "zero_quantized_nontrainable_weights": lambda v: v is True,
    "zero_quantized_gradients": lambda v: v is True,
}
_ZEROPP_WHAT = {
    "zero_hpz_partition_size": "hpZ, the secondary parameter partition",
    "zero_quantized_weights": "qwZ, quantized weight all-gather",
    "zero_quantized_nontrainable_weights": "quantized storage of frozen weights",
    "zero_quantized_gradients": "qgZ, quantized gradient all-to-all",
}


def _zeropp_below_stage3(ctx: Context) -> Iterator[Hit]:
    zero = ctx.get(_ZERO)
    if ctx.stage is None or ctx.stage >= 3 or not isinstance(zero, dict):
        return
    for key, is_on in _ZEROPP.items():
        if key in zero and is_on(zero[key]):
            pointer = f"{_ZERO}/{key}"
            yield Hit(pointer, f"{key} ({_ZEROPP_WHAT[key]}) is ZeRO++ and works only at ZeRO stage 3; at stage "
                               f"{ctx.stage} DeepSpeed ignores it without a warning", fix=patch.delete(pointer))


ZEROPP_BELOW_STAGE3 = Rule(
    code="ZA902",
    name="zeropp-below-stage3",
    severity=Severity.WARNING,
    summary="A ZeRO++ switch (hpZ, quantized weights or gradients) at a stage below 3.",
    explanation=(
        "ZeRO++ (zero_hpz_partition_size > 1, zero_quantized_weights, zero_quantized_nontrainable_weights, "
        "zero_quantized_gradients) is implemented in the ZeRO-3 optimizer and zero.Init: the engine hands the "
        "settings only to DeepSpeedZeroOptimizer_Stage3, and the stage 1/2 optimizer never reads them. Below "
        "stage 3 the run goes on without them, so neither the communication savings nor hpZ's extra "
        "secondary-partition memory happen. Delete them or raise the stage."
    ),
    check=_zeropp_below_stage3,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "zero_hpz_partition_size": 8}}',
                fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8}}',
                fails=False),
    ),
    supersedes=("stage3-key-below-stage3",),
    source="deepspeed/runtime/engine.py _configure_zero_optimizer; runtime/zero/stage3.py "
           "(zero_hpz_partition_size, all2all_process_group); runtime/zero/partition_parameters.py Init",
)


def _degrees(ctx: Context) -> Iterator[tuple[str, int, str]]:
    """(pointer, degree, what DeepSpeed does when it does not divide the world size)."""
    layout = ctx.deepspeed.layout
    tp = layout.tensor
    if tp is not None and tp > 1:
        yield ("/tensor_parallel/autotp_size", tp,
               ("AutoTP builds a (world // autotp_size) x autotp_size device mesh (utils/groups.py "
                "_init_tp_mesh_device); the ranks it leaves out fail (measured with gloo: IndexError on 3 ranks "
                "with autotp_size 2, AssertionError when autotp_size exceeds the world)"))
    sp = layout.sequence
    if sp is not None and sp > 1:
        yield ("/sequence_parallel_size", sp,
               ("Ulysses raises 'world_size ({gpus}) is not divisible by sequence_parallel_size {degree}' "
                "(runtime/sequence_parallel/parallel_state_sp.py initialize_sequence_parallel)"))
    hpz = layout.hpz
    if hpz is not None and hpz > 1 and ctx.stage == 3:
        # groups._create_zero_param_parallel_group: _ensure_divisibility(world, min(hpz, world))
        yield (f"{_ZERO}/zero_hpz_partition_size", hpz,
               ("ZeRO-3 asserts '{gpus} is not divisible by {degree}' when it builds the hpZ groups "
                "(utils/groups.py _create_zero_param_parallel_group)"))


def _degree_does_not_divide(ctx: Context) -> Iterator[Hit]:
    gpus = ctx.options.gpus
    if gpus is None:
        return
    for pointer, degree, what in _degrees(ctx):
        if pointer.endswith("zero_hpz_partition_size") and degree >= gpus:
            continue  # DeepSpeed takes min(hpz, world): one group over every rank
        if gpus % degree:
            yield Hit(pointer, f"{pointer.rsplit('/', 1)[-1]} {degree} does not divide the {gpus} GPUs: "
                               f"{what.format(gpus=gpus, degree=degree)}",
                      at="value")
    sp, dp = ctx.deepspeed.layout.sequence, ctx.deepspeed.layout.data
    if sp is not None and dp is not None and dp * sp != gpus:
        yield Hit("/data_parallel_size",
                  f"data_parallel_size {dp} x sequence_parallel_size {sp} is not the {gpus} GPUs: "
                  "deepspeed.initialize builds a (data_parallel_size, sequence_parallel_size) device mesh from "
                  "the two; torch refuses a mesh larger than the world ('Mesh should not be bigger than default "
                  "world size'), and the ranks a smaller one leaves out fail", at="value")


PARALLEL_DEGREE_DOES_NOT_DIVIDE = Rule(
    code="ZA903",
    name="parallel-degree-does-not-divide",
    severity=Severity.ERROR,
    summary="A parallel degree that does not divide the number of GPUs (--gpus).",
    explanation=(
        "Each parallel degree splits the world into groups of that size: tensor_parallel.autotp_size "
        "(AutoTP's device mesh), sequence_parallel_size (Ulysses' groups) and, at stage 3, "
        "zero_hpz_partition_size (hpZ's parameter groups). DeepSpeed fails while building the groups when "
        "the degree does not divide the world size; with both data_parallel_size and sequence_parallel_size "
        "in the config, deepspeed.initialize builds a device mesh of exactly that shape. DeepSpeedConfig "
        "itself accepts all of these, so the error comes at launch. Checked only with --gpus."
    ),
    check=_degree_does_not_divide,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "tensor_parallel": {"autotp_size": 4}}', fails=True,
                options={"gpus": 6}),
        Example('{"train_micro_batch_size_per_gpu": 1, "tensor_parallel": {"autotp_size": 4}}', fails=False,
                options={"gpus": 8}),
    ),
    source="deepspeed/utils/groups.py _init_tp_mesh_device, _create_zero_param_parallel_group; "
           "runtime/sequence_parallel/parallel_state_sp.py initialize_sequence_parallel; deepspeed/__init__.py "
           "initialize (mesh from data_parallel_size and sequence_parallel_size)",
)

def _sum_with_zero3(ctx: Context) -> Iterator[Hit]:
    op = ctx.get("/gradient_allreduce_op")
    if not isinstance(op, str) or op.lower() != "sum" or schema.node("gradient_allreduce_op") is None:
        return  # not given, or a release that does not read the key (ignored-key says so)
    if not releases.behaviour(schema.active_release()).allreduce_sum_zero3_refused:
        return
    reasons = [why for why, on in (("ZeRO stage 3", ctx.stage == 3),
                                   ("ZenFlow", isinstance(ctx.get("/zero_optimization/zenflow"), dict)),
                                   ("DeepCompile", ctx.get("/compile/deepcompile") is True)) if on]
    for why in reasons:
        yield Hit("/gradient_allreduce_op",
                  f"gradient_allreduce_op 'sum' with {why}: {releases.label(schema.active_release())} raises "
                  f"\"gradient_allreduce_op='sum' is not supported with {why}\"; use 'mean' (the default)",
                  at="value", fix=patch.at("/gradient_allreduce_op", "mean"))


ALLREDUCE_SUM_UNSUPPORTED = Rule(
    code="ZA904",
    name="allreduce-sum-unsupported",
    severity=Severity.ERROR,
    summary="gradient_allreduce_op 'sum' with ZeRO-3, ZenFlow or DeepCompile.",
    explanation=(
        "Summing data-parallel gradients instead of averaging them (gradient_allreduce_op, DeepSpeed 0.19.6) "
        "is implemented for ZeRO stages 0-2 only: DeepSpeedConfig refuses it with ZeRO-3, ZenFlow or "
        "DeepCompile. Use 'mean', or a lower stage."
    ),
    check=_sum_with_zero3,
    examples=(
        Example('{"train_batch_size": 8, "gradient_allreduce_op": "sum", "zero_optimization": {"stage": 3}}',
                fails=True),
        Example('{"train_batch_size": 8, "gradient_allreduce_op": "sum", "zero_optimization": {"stage": 2}}',
                fails=False),
    ),
    source="deepspeed/runtime/config.py DeepSpeedConfig._do_error_check (0.19.6+)",
)

RULES = (PIPELINE_WITH_ZERO_2_3, ZEROPP_BELOW_STAGE3, PARALLEL_DEGREE_DOES_NOT_DIVIDE, ALLREDUCE_SUM_UNSUPPORTED)
