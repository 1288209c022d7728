"""The recommendation a report names first, decided once where the advisor finishes (check_document).

Every renderer (report/) shows the same lead: the verdict line's "Recommended (...)" sentence, the options
table's recommended column, its own extra column where the run changes more than the option, and the JSON's
``recommended`` marks. They read :class:`Lead` from ``CheckResult.recommendation`` and pick nothing themselves:
the choice among the findings (advice.headline) and the column that is the run are made here, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zeroadvisor import vocab as labels
from zeroadvisor.advisor.advice import Advised, Recommendation, failing_findings, headline

if TYPE_CHECKING:
    from zeroadvisor.lint.findings import Finding
    from zeroadvisor.memory.estimate import Estimate, StageEstimate
    from zeroadvisor.throughput import StepTime


@dataclass(frozen=True, slots=True)
class Lead:
    """The lead recommendation with everything a report shows of it.

    ``option`` is the estimate's column that is the recommended run (one of ``Estimate.stages``, matched by
    identity in the renderers); ``own`` the run's own estimate where no column is it but the run is shown
    (it also moves the micro batch, the checkpointing, the layout or the buckets, on the cluster as given), with
    ``suffix`` saying what it changes besides its option. Both None: a change of cluster, of config keys alone,
    or one whose estimate no column holds (a fix changes what the memory model counts at that option).
    The rest are the words and numbers of the headline sentence."""

    code: str  # the finding that carries it ("ZA802")
    name: str  # ... by name ("lower-stage-fits")
    advice: Advised  # the typed recommendation itself (its patch, actions and reason: advisor/advice.py)
    option: StageEstimate | None = None
    own: StageEstimate | None = None
    suffix: str = ""  # "+mb:1 +ckpt:full" for ``own``; "" otherwise
    # the headline's wording inputs: a change and its peak, or the config keys a KeyChange writes
    change: str | None = None  # the change in words (None: config keys alone, ``keys``)
    keys: tuple[str, ...] = ()
    peak_gpu: int | None = None
    uncounted: tuple[str, ...] = ()  # what its peak does not count, one phrase each (never a plain "fits")
    cost: str = ""
    speed: str = ""  # its step time against the configured run's, in words ("" where not estimated)
    speed_short: str = ""  # the same for the one-screen report
    step_time: StepTime | None = None  # its step time (a Throughput or a NoStepTime); None for config keys
    # why not the next rung of the published order, which fits with more room ("" where none does)
    why_not: str = ""

    @property
    def patch(self) -> dict[str, Any] | None:
        """The merge patch its fix writes (None: nothing in the config: the change is all outside it)."""
        return self.advice.patch

    @property
    def column(self) -> StageEstimate | None:
        """The recommended run as a column of the options table and a bar of the chart (None: no column is)."""
        return self.option if self.option is not None else self.own


@dataclass(frozen=True, slots=True)
class NoFix:
    """The run fails and no change to the config makes it run: the failing finding that says what binds."""

    code: str
    name: str
    # the finding's Finding.stops: the run stops before training whatever its memory (a trainer's refusal, a vLLM
    # that never starts), so what is missing is a change the finding names, not memory
    stops: str = ""
    # the finding names a change that fits, in a file no fix is written to (an Accelerate YAML: advisor/accelerate.py
    # keeps its findings without fixes), so it is made by hand: not "no change fits"
    by_hand: bool = False


def decide(findings: Sequence[Finding], estimate: Estimate | None) -> Lead | None:
    """The lead recommendation of ``findings`` (the most pressing reason first: advice.headline), with the column
    of ``estimate`` that is its run; None when no finding recommends a change."""
    found = headline(findings)
    if found is None:
        return None
    finding, advice = found
    if not isinstance(advice, Recommendation):  # config keys alone (smaller buckets): no estimate of its own
        return Lead(finding.code, finding.name, advice, keys=advice.keys)
    match = _column_of(advice.stage, estimate)
    change = advice.change
    suffix = "" if match is not None else labels.change_suffix(
        change.micro_batch if change.micro_batch != change.was_micro_batch else None,
        str(change.shape.activation_checkpointing)
        if change.shape.activation_checkpointing != change.was_shape.activation_checkpointing else None,
        change.sequence_parallel, change.tensor_parallel, change.buckets is not None)
    # a run with nothing but its option to tell it from the columns is not shown again; nor one on another cluster
    own = advice.stage if match is None and suffix and change.cluster is None else None
    from zeroadvisor.advisor.ranking import step_time_words

    return Lead(finding.code, finding.name, advice,
                option=match if match is not None and not match.configured else None, own=own, suffix=suffix,
                change=advice.description, peak_gpu=advice.peak_gpu,
                uncounted=tuple(advice.stage.uncounted_words()) if advice.stage.uncounted else (),
                cost=advice.cost, speed=advice.step_time_words,
                speed_short=step_time_words(advice.step_time_s, advice.configured_step_time_s, short=True),
                step_time=advice.step_time, why_not=advice.why_not_next())


def _column_of(run: StageEstimate, estimate: Estimate | None) -> StageEstimate | None:
    """The estimate's column that is ``run``: its option at the peak per GPU the headline states (bytes, an
    integer). A change that also moves the micro batch, the layout or the buckets, or a fix that changes what the
    memory model counts at that option, peaks elsewhere: no column is that run. (The train rows may still differ
    where the peak is another phase's: the sentence and the marked column agree on the number they both show.)"""
    if estimate is None:
        return None
    return next((st for st in estimate.stages if st.option == run.option and st.peak_gpu == run.peak_gpu), None)


def no_fix(findings: Sequence[Finding], lead: Lead | None) -> NoFix | None:
    """Where the run fails and no change to the config makes it run, the failing finding to point at (issue 20,
    defect 9): a report says so instead of naming a lesser change. None where there is a lead or nothing fails."""
    failing = failing_findings(findings)
    if lead is not None or not failing:
        return None
    return NoFix(failing[0].code, failing[0].name, failing[0].stops, by_hand=failing[0].recommends is not None)
