"""Which fitting change is best: the one ranking every piece of advice is chosen by.

The order is published DeepSpeed practice, not the step-time model's:

- one change before several (``steps``): the configured run and every single change (one rung of the ladder,
  one checkpointing level, a smaller micro batch at the same global batch, a Ulysses degree) come before any
  combination of them, and a combination of two before one of three: the Hugging Face DeepSpeed guide's
  out-of-memory procedure tries one remedy at a time (gradient checkpointing, a smaller batch with gradient
  accumulation, the next stage, then offload), moving on only where the last one still runs out. A lower stage
  is never offered together with a smaller micro batch where the lower stage alone fits;
- among those, the stage/offload rung of ``LADDER`` (``tier``), fastest first (the table below);
- within a rung, the activation remedies in the guide's order: no AutoTP before AutoTP (a script change with
  per-layer all-reduces, offered only where nothing else fits), no Ulysses before Ulysses (smallest degree
  first), weaker checkpointing before stronger, the largest micro batch that fits (the same global batch:
  accumulation rises as it falls).

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


@dataclass(frozen=True, slots=True)
class Rung:
    """One rung of the stage/offload ladder: its place (0 fastest; rungs the guidance does not tell apart share
    one) and the ZeRO stage with its optimizer and parameter offload devices."""

    place: int
    stage: int
    optimizer: Device = Device.NONE
    param: Device = Device.NONE

    @property
    def option(self) -> Option:
        return Option(self.stage, self.optimizer, self.param)


_N, _C, _V = Device.NONE, Device.CPU, Device.NVME
# The ladder, fastest first: one table, every stage/offload DeepSpeed runs (memory/options.py enumerate_options)
# in its place. Two published orders are reconciled here (docs/check.md, how the fix is chosen):
# - Hugging Face, "How to choose which ZeRO stage and offloads to use for best performance": "Stage 0 (DDP) >
#   Stage 1 > Stage 2 > Stage 2 + offload > Stage 3 > Stage 3 + offloads" (speed, left faster; GPU memory the
#   other way round), and its OOM procedure in the same order (ZeRO-2, + offload_optimizer, ZeRO-3, + offload);
#   ZeRO paper §7: stages 0-2 move 2Ψ per step, stage 3 3Ψ. The places follow it;
# - issue 36's walk from ZeRO-3 with both offloads, "3 + both offloads -> 3 + optimizer offload -> 2 + optimizer
#   offload -> 1 + optimizer offload -> 3 -> 2 -> 1 -> 0", "ordered as the guidance orders them": the rungs one
#   moves to from a run that has both offloads, each keeping at most the offload configured. That is the
#   second rule, applied by the search and the rules (candidates.py adds_offload): a run that fits is never
#   given an offload it does not have (offload buys capacity with speed, offload-not-needed's reason), so from
#   a fitting ZeRO-3 without offload no "Stage 2 + offload" is offered; from ZeRO-3 with offload the walk's
#   rungs are all there. Where the walk read as a speed order and the guide differ (ZeRO-3 against ZeRO-1/2
#   keeping the optimizer offloaded, both fitting), the guide's order is kept, as the walk defers to it.
# Rungs the guide does not name: ZeRO-1 with the optimizer offloaded shares "Stage 2 + offload"'s place (the same
# volume; fewer keys changed decide, policy_key); at ZeRO-3 the optimizer's offload before the parameters' (they
# cross PCIe in every forward and backward, DS#6834) before both; NVMe after host RAM (ZeRO-Infinity: past host
# RAM), the optimizer's before the parameters'.
LADDER: tuple[Rung, ...] = (
    Rung(0, 0), Rung(1, 1), Rung(2, 2),
    Rung(3, 1, _C), Rung(3, 2, _C),
    Rung(4, 3), Rung(5, 3, _C), Rung(6, 3, _N, _C), Rung(7, 3, _C, _C),
    Rung(8, 1, _V), Rung(8, 2, _V), Rung(8, 3, _V), Rung(8, 3, _V, _C),
    Rung(9, 3, _N, _V), Rung(9, 3, _C, _V), Rung(9, 3, _V, _V),
)
_TIERS = {rung.option: rung.place for rung in LADDER}


@dataclass(frozen=True, slots=True)
class Considered:
    """A fitting candidate as the ranking saw it: the change, its estimate, its step time (a value either way)."""

    change: Change
    stage: StageEstimate
    step_time: StepTime


# (AutoTP, changes made (one at least), tier, Ulysses degree, checkpointing level, -micro batch, keys changed,
# AutoTP degree)
PolicyKey = tuple[bool, int, int, int, int, int, int, int]


def tier(option: Option) -> int:
    """The option's place on ``LADDER``, the published fastest-first order of stages and offloads (0 = ZeRO-0)."""
    return _TIERS[option]


def faster_rungs(option: Option) -> tuple[Option, ...]:
    """The rungs above ``option`` on the ladder (at a faster place), fastest first."""
    return tuple(rung.option for rung in LADDER if rung.place < tier(option))


def steps(change: Change) -> int:
    """How many changes ``change`` makes, a move along the ladder one however many keys it writes (ZeRO-3 with
    both offloads to ZeRO-2 with the optimizer's is one rung): the rung, the checkpointing level, the micro batch,
    Ulysses, AutoTP, a cluster change."""
    rung = change.option != change.was_option
    return (rung + (change.shape.activation_checkpointing != change.was_shape.activation_checkpointing)
            + (change.micro_batch != change.was_micro_batch) + bool(change.sequence_parallel)
            + bool(change.tensor_parallel) + (change.cluster is not None))


def policy_key(change: Change) -> PolicyKey:
    """Smaller is better: the published order in which fitting changes are recommended. The configured run and
    the single changes share the first class (the rung decides between them: a faster rung that fits as
    configured beats the configured run); combinations follow, the fewest changes first."""
    checkpointing = CHECKPOINTING_LEVELS.index(change.shape.activation_checkpointing)
    return (bool(change.tensor_parallel), max(steps(change), 1), tier(change.option), change.sequence_parallel or 0,
            checkpointing, -change.micro_batch, change.changes, change.tensor_parallel or 0)


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
