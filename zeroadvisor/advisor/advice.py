"""The advice for one config as data: what the advice rules word and every report renders.

:class:`Advice` is what the advisor found for a config, a model and a cluster (``CheckResult.advice``; the
advice rules read it as ``ctx.advice``): the estimate as written, the budget, the options the search
considered (each with its estimate and its step time, a value either way), the best change that fits as it
will be written, and, when nothing fits, the shortfalls and the cluster changes that would fit. Each part is
searched once, on first use (a fitting config never pays for the cluster search).

A rule that recommends a change attaches a :class:`Recommendation` to its finding: the searched change with
its description, cost, actions, option, peaks, step times, patch and the :class:`Reason` it is recommended
for; large-buckets attaches a :class:`KeyChange` (the keys it writes). Messages are worded from these
objects, the JSON "recommends" object is their ``to_dict()``, and a report's verdict line names the
:func:`headline` one, so no report parses a message or re-applies a patch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

from zeroadvisor import vocab as labels
from zeroadvisor.advisor.search import BucketTuning, Considered, Outcome, Searcher, Shortfall
from zeroadvisor.lint.findings import Action, Finding
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.memory.estimate import Estimate, StageEstimate
from zeroadvisor.memory.options import Option
from zeroadvisor.units import DEFAULT_UNIT, format_bytes

if TYPE_CHECKING:
    from zeroadvisor.advisor.change import Change
    from zeroadvisor.advisor.nofit import NothingFits
    from zeroadvisor.throughput import StepTime


class Reason(StrEnum):
    """Why a change is recommended: the situation the advice rule of that name reports."""

    DOES_NOT_FIT = "does-not-fit"  # the configured run needs more GPU memory than there is
    HOST_MEMORY = "host-memory-insufficient"  # ... more host RAM or NVMe per node than given
    TRAINER_REFUSES = "trainer-refuses"  # the trainer's own code refuses the configured option (it stops at load)
    LOWER_STAGE = "lower-stage-fits"  # ZeRO-3 is configured where a lower stage fits
    NO_OFFLOAD = "offload-not-needed"  # offload is configured where the stage fits without it
    SMALLER_BUCKETS = "large-buckets"  # the communication buckets take a large share of the memory
    FASTER = "faster-option-fits"  # another run that fits is estimated much faster


# The recommendation a report names first (its verdict line), most pressing first: a run that fails before one
# that only costs. A faster run is information its own finding words.
HEADLINE = (Reason.DOES_NOT_FIT, Reason.HOST_MEMORY, Reason.TRAINER_REFUSES, Reason.LOWER_STAGE, Reason.NO_OFFLOAD,
            Reason.SMALLER_BUCKETS)


@dataclass(frozen=True, slots=True)
class Budget:
    """The memory a run may use, as the advice rules read it: the cluster's capacities (memory/cluster.py, the one
    type that holds them) and the unit the messages are written in."""

    cluster: Cluster
    unit: str = DEFAULT_UNIT

    @property
    def gpu_memory(self) -> int:
        """Per GPU as the hardware has it."""
        if self.cluster.gpu_memory is None:  # advice is judged against a card: check_document is given one
            raise ValueError("a Budget needs the GPU memory")
        return self.cluster.gpu_memory

    @property
    def usable(self) -> int:
        """Per GPU less the headroom: what a "fits" may use."""
        usable = self.cluster.usable_gpu_memory
        if usable is None:  # as gpu_memory: None only without a card
            raise ValueError("a Budget needs the GPU memory")
        return usable

    @property
    def headroom(self) -> float:
        return self.cluster.headroom

    @property
    def cpu_memory(self) -> int | None:
        return self.cluster.cpu_memory

    @property
    def nvme(self) -> int | None:
        return self.cluster.nvme

    def fmt(self, nbytes: int) -> str:
        return format_bytes(nbytes, self.unit)


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A change advice recommends, and why: the search's outcome (the change, its estimate as it will be written,
    its merge patch) with its step time and the configured run's, each a Throughput or a NoStepTime."""

    reason: Reason
    outcome: Outcome
    step_time: StepTime
    configured_step_time: StepTime
    unit: str = DEFAULT_UNIT  # the unit its actions are worded in
    # the next rung of the published order that fits with more room (None: none does): why not it is said
    next_rung: Considered | None = None

    @property
    def change(self) -> Change:
        return self.outcome.change

    @property
    def stage(self) -> StageEstimate:
        return self.outcome.stage

    @property
    def patch(self) -> dict[str, Any] | None:
        """The merge patch on top of the other findings' fixes (None: nothing to write in the config)."""
        return self.outcome.patch

    @property
    def option(self) -> Option:
        return self.outcome.stage.option

    @property
    def description(self) -> str:
        return self.outcome.change.description

    @property
    def cost(self) -> str:
        return self.outcome.change.cost

    @property
    def actions(self) -> tuple[Action, ...]:
        """What the change needs outside the config, worded in ``unit``."""
        return tuple(self.outcome.change.actions(self.unit))

    @property
    def peak_gpu(self) -> int:
        return int(self.outcome.stage.peak_gpu)

    @property
    def peak_host_per_node(self) -> int:
        return int(self.outcome.stage.peak_host_per_node)

    @property
    def step_time_s(self) -> float | None:
        from zeroadvisor.throughput import seconds_of

        return seconds_of(self.step_time)

    @property
    def configured_step_time_s(self) -> float | None:
        from zeroadvisor.throughput import seconds_of

        return seconds_of(self.configured_step_time)

    @property
    def relative_step_time(self) -> float | None:
        """Its step time over the configured run's, where both are estimated."""
        before, after = self.configured_step_time_s, self.step_time_s
        return after / before if before and after else None

    @property
    def step_time_words(self) -> str:
        """Its step time against the configured run's, within the model's measured error (ranking.py)."""
        from zeroadvisor.advisor.ranking import step_time_words

        return step_time_words(self.step_time_s, self.configured_step_time_s)

    def why_not_next(self) -> str:
        """Why not the next rung, which fits with more room ("" where none does): the published order recommends
        the fastest rung that fits with the headroom, and more room buys nothing once the run fits."""
        other = self.next_rung
        if other is None:
            return ""
        peak = int(other.stage.peak_gpu)
        room, at = format_bytes(self.peak_gpu - peak, self.unit), format_bytes(peak, self.unit)
        name, mine = other.change.option.words, self.option.words
        return (f"not {name}, though it fits with {room} more room ({at} per GPU at peak): it comes after {mine} "
                "in the published order (the fastest rung that fits with "
                "the headroom is recommended; more room buys nothing once the run fits)")

    def to_dict(self) -> dict[str, Any]:
        """The JSON "recommends" object of its finding."""
        return {"change": self.description, "option": labels.option_header(self.option),
                "peak_gpu": self.peak_gpu, "peak_host_per_node": self.peak_host_per_node, "cost": self.cost,
                "step_time_s": self.step_time_s, "configured_step_time_s": self.configured_step_time_s}


@dataclass(frozen=True, slots=True)
class KeyChange:
    """A recommendation that is its fix alone: config keys to write, at the configured option (large-buckets'
    smaller buckets). The JSON names no recommended change for it: its fix is the whole of it."""

    reason: Reason
    tuning: BucketTuning

    @property
    def keys(self) -> tuple[str, ...]:
        return self.tuning.keys

    @property
    def patch(self) -> dict[str, Any]:
        return self.tuning.patch

    def to_dict(self) -> None:
        return None


Advised = Recommendation | KeyChange


def headline(findings: Iterable[Finding]) -> tuple[Finding, Advised] | None:
    """The finding whose recommendation a report names first, with it (None: no finding recommends one): one
    whose fix writes the change, or whose change is wholly outside the config (training-script checkpointing,
    the Trainer's batch arguments: its actions say what to do). A change in a file no fix is written to (an
    Accelerate YAML) is worded by its finding alone."""
    findings = list(findings)
    offered = [(f, f.recommends) for f in findings
               if (f.fix is not None or _outside_the_config(f.recommends))
               and isinstance(f.recommends, (Recommendation, KeyChange)) and f.recommends.reason in HEADLINE]
    # A run that fails (does-not-fit, host-memory-insufficient) is headlined only by a change that makes it run:
    # where nothing fits, a smaller bucket is no answer (issue 20, defect 9) and the verdict line says so.
    failing = {f.name for f in failing_findings(findings)}
    if TRAINER_REFUSES in failing:  # any stage below the refused ZeRO-3 is a run the trainer starts (candidates.py
        failing.add(Reason.LOWER_STAGE.value)  # recommends no option the trainer refuses)
    if failing:
        offered = [pair for pair in offered if pair[1].reason in failing]
    if not offered:
        return None
    return min(offered, key=lambda pair: HEADLINE.index(pair[1].reason))


# The share of its peak a later rung must save for its room to be named ("why not ZeRO-2?"): less is noise.
NEXT_RUNG_ROOM = 0.05

# A colocated vLLM's share of the card below its floor: the run stops when the trainer starts vLLM. Its rule
# recommends no change (the fix is the trainer's argument: the ways out price it, advisor/nofit.py), so it is no
# Reason; its name is here, where the failing findings are listed.
VLLM_BELOW_FLOOR = "vllm-below-floor"
# The trainer's own refusal of the configured option (memory/method.py trainer_refusal): the run stops at load; its
# rule recommends the best option the trainer runs, where one fits (candidates.py leaves the refused ones out).
TRAINER_REFUSES = Reason.TRAINER_REFUSES.value
# the run stops: the names of its findings
_FAILING = (Reason.DOES_NOT_FIT.value, Reason.HOST_MEMORY.value, VLLM_BELOW_FLOOR, TRAINER_REFUSES)


def failing_findings(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that say the configured run stops (does-not-fit first, then host-memory-insufficient)."""
    return sorted((f for f in findings if f.name in _FAILING), key=lambda f: _FAILING.index(f.name))


def _outside_the_config(advised: object) -> bool:
    """A recommended change with nothing to write to the config and something to do outside it."""
    return isinstance(advised, Recommendation) and advised.patch is None and bool(advised.actions)


@dataclass(eq=False)
class Advice:
    """What the advisor found for one config (the module docstring): searched on first use, then kept."""

    estimate: Estimate  # the config as written
    budget: Budget
    search: Searcher  # answers "what fits?" for the config as the fixes will write it
    # each outcome's step time, timed once (step_time_of): id(outcome) -> (outcome, its step time)
    _step_times: dict[int, tuple[Outcome, StepTime]] = field(default_factory=dict, init=False, repr=False)

    @property
    def configured(self) -> StageEstimate | None:
        """The configured stage and offload as written (None when no config was given)."""
        return self.estimate.configured

    def fmt(self, nbytes: int) -> str:
        return self.budget.fmt(nbytes)

    # -- the search ----------------------------------------------------------------------------------
    @cached_property
    def configured_step_time(self) -> StepTime:
        """The configured run's step time as the fixes write it."""
        return self.search.configured_step_time()

    @cached_property
    def options(self) -> tuple[Considered, ...]:
        """Every fitting candidate the search considered, best first, each with its estimate and step time."""
        return self.search.ranked()

    @cached_property
    def step_time_decided(self) -> bool:
        """Whether the step-time model overruled the published order (ranking.rank): the first candidate is not
        the first in that order. Only then can the step time's assumed machine facts change the advice."""
        from zeroadvisor.advisor.ranking import policy_key

        options = self.options
        return len(options) > 1 and options[0] is not min(options, key=lambda c: policy_key(c.change))

    @cached_property
    def best(self) -> Outcome | None:
        """The best fitting change as it will be written (the configured run when nothing beats it)."""
        return self.search.best()

    @cached_property
    def shortfalls(self) -> tuple[Shortfall, ...]:
        """When nothing fits: which resource binds in which phase, and by how much (() when something fits)."""
        return () if self.best is not None else tuple(self.search.shortfalls())

    @cached_property
    def cluster_changes(self) -> tuple[Outcome, ...]:
        """When nothing fits: the smallest cluster changes that make something fit, each with its best change
        (() when something fits)."""
        return () if self.best is not None else tuple(self.search.cluster_changes())

    @cached_property
    def nothing_fits(self) -> NothingFits | None:
        """When nothing fits: the ways out, cheapest first, each priced (advisor/nofit.py; None when something
        fits)."""
        if self.best is not None:
            return None
        from zeroadvisor.advisor.nofit import ways_out

        return ways_out(self.search, self.cluster_changes, self.budget.unit)

    def recommend(self, outcome: Outcome, reason: Reason) -> Recommendation:
        """``outcome`` recommended for ``reason``: with its step time on this cluster's machine and the
        configured run's. The rules that recommend the best change (does-not-fit, lower-stage-fits,
        offload-not-needed, faster-option-fits) share its step time: it is timed once (``step_time_of``)."""
        return Recommendation(reason, outcome, self.step_time_of(outcome), self.configured_step_time,
                              self.budget.unit, self.next_rung(outcome))

    def next_rung(self, outcome: Outcome) -> Considered | None:
        """The first fitting candidate after ``outcome``'s rung in the published order (ranking.tier) that runs
        as it does otherwise (micro batch, checkpointing, layout, cluster) and peaks lower: the rung a reader
        asks about ("why not ZeRO-2, which has more room?"). None where no such rung fits."""
        from zeroadvisor.advisor.ranking import policy_key, tier

        mine = outcome.change
        if mine.cluster is not None:
            return None
        room = NEXT_RUNG_ROOM * outcome.stage.peak_gpu  # less is no question a reader asks
        later = [c for c in self.options if tier(c.change.option) > tier(mine.option)
                 and c.stage.peak_gpu < outcome.stage.peak_gpu - room and c.change.micro_batch == mine.micro_batch
                 and c.change.shape == mine.shape and c.change.config_patch == mine.config_patch]
        return min(later, key=lambda c: policy_key(c.change)) if later else None

    def timed(self, outcome: Outcome) -> Considered:
        """``outcome`` with its step time, named but not recommended."""
        return Considered(outcome.change, outcome.stage, self.step_time_of(outcome))

    def step_time_of(self, outcome: Outcome) -> StepTime:
        """The step time of one of the search's outcomes (``best``, ``cluster_changes``, a lower stage's), timed
        on first use and kept. Kept by the outcome itself (an Outcome holds a dict patch, so it has no hash): the
        entry holds the outcome, so the identity it is found by is never reused while the entry stands."""
        kept = self._step_times.get(id(outcome))
        if kept is None or kept[0] is not outcome:
            kept = (outcome, self.search.step_time(outcome.change, outcome.stage))
            self._step_times[id(outcome)] = kept
        return kept[1]

    # -- what the rules name besides the best change ---------------------------------------------------
    @property
    def tuning(self) -> BucketTuning | None:
        """The smaller buckets large-buckets proposes for the configured stage (None: none needed)."""
        return self.search.tuning

    @cached_property
    def lower_stage(self) -> StageEstimate | None:
        """The fastest rung at a lower stage than the configured one that fits as configured otherwise, adding no
        offload (ZeRO-0, 1 or 2; from a run that offloads its optimizer, ZeRO-1 or 2 keeping it)."""
        return self.search.lowest_fitting_lower_stage()

    @cached_property
    def lower_stage_run(self) -> Considered | None:
        """That lower stage as it will be written, timed (None: no lower stage fits, or not once written)."""
        if self.lower_stage is None:
            return None
        found = self.search.outcome(self.search.stage_change(self.lower_stage.option))
        return self.timed(found) if found is not None else None

    @cached_property
    def without_offload(self) -> StageEstimate | None:
        """The fastest rung with less offload than the configured one that fits as configured otherwise (the same
        stage or a lower one; from ZeRO-3 with both offloads, the optimizer's alone too); None without offload."""
        return self.search.without_offload()

    @cached_property
    def largest_micro_batch(self) -> int | None:
        """The largest micro batch that fits at the configured option (None: not even 1)."""
        return self.search.largest_fitting_micro_batch()

    @cached_property
    def checkpointing_savings(self) -> tuple[tuple[str, int], ...]:
        """(level, activation bytes per GPU it saves) for each stronger checkpointing level."""
        acts = self._configured_activations
        return tuple((change.shape.activation_checkpointing, acts - stage.per_gpu["activations"])
                     for change, stage in self.search.checkpointing_outcomes())

    @cached_property
    def flash_attention_saving(self) -> int | None:
        """The activation bytes per GPU FlashAttention saves (None: it is on already)."""
        flash = self.search.flash_attention_outcome()
        return None if flash is None else self._configured_activations - flash.per_gpu["activations"]

    @cached_property
    def ulysses(self) -> Outcome | None:
        """The smallest Ulysses degree that fits with nothing else changed (None: none offered or fits)."""
        return self.search.sequence_parallel_outcome()

    @property
    def _configured_activations(self) -> int:
        current = self.configured
        return current.per_gpu["activations"] if current is not None else 0
