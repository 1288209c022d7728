"""Which fitting change is best: the one ranking every piece of advice is chosen by.

The order is published DeepSpeed practice, not the step-time model's:

- the stage/offload tier (``tier``), fastest first: ZeRO-0 > 1 > 2 > 1-2 with the optimizer offloaded >
  3 > 3 with the optimizer offloaded > 3 with parameters offloaded > NVMe (Hugging Face, "How to choose which
  ZeRO stage and offloads to use for best performance": "Stage 0 (DDP) > Stage 1 > Stage 2 > Stage 2 + offload
  > Stage 3 > Stage 3 + offloads"; ZeRO paper §7: stages 0-2 move 2Ψ per step, stage 3 3Ψ; ZeRO-Offload and
  ZeRO-Infinity: offload trades PCIe and CPU time for capacity, NVMe more than host RAM). "Test the lowest
  stage that lets the workload fit";
- within a tier, the activation remedies in the guide's order: no AutoTP before AutoTP (a script change with
  per-layer all-reduces, offered only where nothing else fits), no Ulysses before Ulysses (smallest degree
  first), weaker checkpointing before stronger, the largest micro batch that fits (the same global batch:
  accumulation rises as it falls), then fewer changes.

The step-time model (zeroadvisor/throughput) overrules that order only outside its own measured error: the
recommendation is the first in the published order whose estimated step time is within ``validation.TIE_BAND``
of the fastest candidate's (the median error of the model's estimated ratios on public same-hardware pairs,
benchmarks/throughput/compare.py), so an option is passed over only for one the model puts faster by more than
its error; closer step times are a tie the published order decides. AutoTP competes only where no run without
it fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zeroadvisor.advisor.change import CHECKPOINTING_LEVELS, Change
from zeroadvisor.memory.estimate import StageEstimate
from zeroadvisor.memory.options import Option
from zeroadvisor.throughput.validation import TIE_BAND
from zeroadvisor.vocab import Device

if TYPE_CHECKING:
    from zeroadvisor.throughput import StepTime

# ZeRO-3's tiers by (optimizer device, parameter device) without NVMe: the guide's "Stage 3 > Stage 3 +
# optimizer offload > Stage 3 + parameter offload" (parameters cross PCIe in every forward and backward).
_STAGE3_TIERS = {(Device.NONE, Device.NONE): 4, (Device.CPU, Device.NONE): 5,
                 (Device.NONE, Device.CPU): 6, (Device.CPU, Device.CPU): 6}
_OPTIMIZER_OFFLOAD_TIER = 3  # ZeRO-1/2 with the optimizer on the CPU (ZeRO-Offload)
_NVME_TIERS = {"offload_optimizer": 7, "offload_param": 8}  # ZeRO-Infinity: past host RAM, slowest last


@dataclass(frozen=True, slots=True)
class Considered:
    """A fitting candidate as the ranking saw it: the change, its estimate, its step time (a value either way)."""

    change: Change
    stage: StageEstimate
    step_time: StepTime


# (AutoTP, tier, Ulysses degree, checkpointing level, -micro batch, changes, AutoTP degree)
PolicyKey = tuple[bool, int, int, int, int, int, int]


def tier(option: Option) -> int:
    """The option's place in the published fastest-first order of stages and offloads (0 = ZeRO-0)."""
    nvme = [which for which in ("offload_param", "offload_optimizer") if getattr(option, which) == Device.NVME]
    if nvme:
        return _NVME_TIERS[nvme[0]]
    if option.stage < 3:
        return _OPTIMIZER_OFFLOAD_TIER if option.offload_optimizer != Device.NONE else option.stage
    return _STAGE3_TIERS[(option.offload_optimizer, option.offload_param)]


def policy_key(change: Change) -> PolicyKey:
    """Smaller is better: the published order in which fitting changes are recommended."""
    checkpointing = CHECKPOINTING_LEVELS.index(change.shape.activation_checkpointing)
    return (bool(change.tensor_parallel), tier(change.option), change.sequence_parallel or 0, checkpointing,
            -change.micro_batch, change.changes, change.tensor_parallel or 0)


def overrules(seconds: float | None, first: float | None) -> bool:
    """Whether a step time of ``seconds`` is shorter than ``first`` by more than the model's measured error."""
    return seconds is not None and first is not None and seconds > 0 and seconds * TIE_BAND < first


def step_time_words(seconds: float | None, configured: float | None, short: bool = False) -> str:
    """How a step time compares with the configured run's, said only as far as the model's measured error
    allows: "" without both; inside the tie band "about the configured run's step time (estimated 32.3 s
    against 33.9 s, inside the model's measured error of 17%)", and where the estimate is the slower one, that it
    is and why the run is still recommended (the published order decides inside the error); outside it
    "estimated 2.1x faster (...)". ``short``: the one-screen report's words ("about the same step time (32.3 s
    per step against 33.9 s, within the model's 17% error)", "2.1x faster (...)")."""
    if not seconds or not configured or seconds <= 0 or configured <= 0:
        return ""
    ratio = configured / seconds
    error = f"{TIE_BAND - 1:.0%}"
    if short:
        figures = f"{seconds:.3g} s per step against {configured:.3g} s"
        tied = {True: f"about the same step time ({figures}, within the model's {error} error)",
                False: f"slower by the estimate ({figures}) but within the model's {error} error: recommended in the "
                       "published order"}
        apart = f"{ratio:.1f}x faster ({figures})" if ratio > 1 else f"{1 / ratio:.1f}x slower ({figures})"
    else:
        figures = f"estimated {seconds:.3g} s per step against {configured:.3g} s configured"
        tied = {True: f"about the configured run's step time ({figures}, inside the step-time model's measured "
                      f"error of {error})",
                False: f"slower ({figures}), but inside the step-time model's measured error of {error}, where the "
                       "published order decides (docs/check.md, how the fix is chosen), not the estimate"}
        apart = f"estimated {ratio:.1f}x faster ({figures})" if ratio > 1 else \
            f"estimated {1 / ratio:.1f}x slower ({figures})"
    return tied[not estimated_slower(seconds, configured)] if 1 / TIE_BAND <= ratio <= TIE_BAND else apart


# A step time this much above the configured run's is "slower" in words; closer is the same figure as printed.
SLOWER = 1.01


def estimated_slower(seconds: float | None, configured: float | None) -> bool:
    """Whether the step-time model puts ``seconds`` above the configured run's (its words then say so)."""
    return bool(seconds and configured and seconds > 0 and configured > 0 and seconds > SLOWER * configured)


def rank(timed: Sequence[Considered]) -> tuple[Considered, ...]:
    """The candidates best first: the published order, except that where every candidate has a step time (a
    Throughput; a NoStepTime has none), the first is the first in that order whose step time the model cannot
    tell from the fastest (within ``TIE_BAND`` of it): a candidate loses its place only to one the model puts
    faster by more than its measured error. AutoTP candidates compete only where no run without AutoTP fits."""
    from zeroadvisor.throughput import seconds_of

    ordered = sorted(((c, seconds_of(c.step_time)) for c in timed), key=lambda item: policy_key(item[0].change))
    if not ordered or not all(seconds is not None and seconds > 0 for _, seconds in ordered):
        return tuple(c for c, _ in ordered)
    pool = [item for item in ordered if not item[0].change.tensor_parallel] or ordered
    fastest = min(seconds or 0.0 for _, seconds in pool)
    best, _ = next(item for item in pool if not overrules(fastest, item[1]))
    return (best, *(c for c, _ in ordered if c is not best))
