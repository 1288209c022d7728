"""The step-time model: seconds per training step for each ZeRO stage/offload option.

Pipeline position: after memory/ (which options fit) and before advisor/ (which fitting option is
fastest). ``step_time`` takes what the memory model has per option; ``step_time_of`` takes an
estimate's option directly. Between layers a step time is a value, never an exception: a
:data:`StepTime` is the :class:`Throughput`, or a :class:`NoStepTime` saying why there is none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zeroadvisor.hardware.machine import DEFAULTS, Hardware
from zeroadvisor.throughput.comm import ZeroPlusPlus
from zeroadvisor.throughput.step import NoThroughput, StepTerm, Throughput, step_time

if TYPE_CHECKING:
    from zeroadvisor.memory.estimate import Estimate, StageEstimate
    from zeroadvisor.memory.options import Option

__all__ = ["DEFAULTS", "Hardware", "NoStepTime", "NoThroughput", "StepTerm", "StepTime", "Throughput",
           "ZeroPlusPlus", "per_option", "seconds_of", "step_time", "step_time_of"]


@dataclass(frozen=True, slots=True)
class NoStepTime:
    """No step time for an option, and why (the missing input, e.g. "no GPU named (--gpu): ...")."""

    reason: str

    def __str__(self) -> str:
        return self.reason


StepTime = Throughput | NoStepTime


def seconds_of(step: StepTime) -> float | None:
    """The step time in seconds, None where there is none."""
    return step.step_time_s if isinstance(step, Throughput) else None


def step_time_of(estimate: Estimate, stage: StageEstimate, hw: Hardware, global_batch: int | None = None) -> Throughput:
    """``step_time`` for one option of a memory estimate (memory/estimate.py Estimate, StageEstimate).

    ``global_batch`` None: the estimated config's, as DeepSpeed resolves it (train_batch_size, micro batch,
    accumulation on the batch world: ``Settings.global_batch``); the ZeRO++ switches are the estimate's own
    (Settings, Parallel.hpz)."""
    if global_batch is None:
        global_batch = estimate.settings.global_batch
    return step_time(estimate.model, estimate.shape, estimate.cluster, stage.option, estimate.settings, hw,
                     layout=estimate.parallel, global_batch=global_batch)


def per_option(estimate: Estimate, hw: Hardware) -> dict[Option, StepTime]:
    """Every option of ``estimate`` (memory/options.py Option) -> its StepTime: the Throughput, or the
    NoStepTime saying why there is none."""
    out: dict[Option, StepTime] = {}
    for stage in estimate.stages:
        try:
            out[stage.option] = step_time_of(estimate, stage, hw)
        except NoThroughput as err:
            out[stage.option] = NoStepTime(str(err))
    return out


def json_fields(result: StepTime) -> dict[str, Any]:
    """JSON per option: ``throughput`` {step_time_s, tokens_per_s, bound} or null with the reason."""
    if isinstance(result, Throughput):
        return {"throughput": result.to_dict()}
    return {"throughput": None, "throughput_unavailable": result.reason}
