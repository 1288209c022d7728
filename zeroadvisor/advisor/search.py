"""The advice search: the best change that makes a run fit, written as a merge patch, and when nothing fits,
what binds and the smallest cluster that fits. This module composes the parts, each its own module:

- advisor/estimates.py: the estimates, each made once (keyed by the config's value and the shape);
- advisor/patch.py: the merge patch a candidate writes (stage and offloads, batch keys, bucket sizes, lint fixes);
- advisor/written.py: a candidate as it will be written on the base (the config with its fixes) and its estimate;
- advisor/candidates.py: which candidates to try, and which fit;
- advisor/ranking.py: which fitting candidate is best (the published order, step times outside their error);
- advisor/cluster.py: what binds when nothing fits, and the cluster changes that make something fit.

The configured run is ranked among the candidates; the first in ``ranking.rank``'s order that still fits as
written wins. What a change needs outside the config is an action (advisor/change.py).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from zeroadvisor.advisor.candidates import Candidates
from zeroadvisor.advisor.change import Change
from zeroadvisor.advisor.cluster import ClusterProposal, Shortfall, shortfalls
from zeroadvisor.advisor.estimates import Estimates
from zeroadvisor.advisor.patch import BucketTuning, LintFixes, Outcome
from zeroadvisor.advisor.ranking import Considered, rank
from zeroadvisor.advisor.written import Written
from zeroadvisor.memory.estimate import Cluster, Estimate, StageEstimate, estimate
from zeroadvisor.memory.options import Option
from zeroadvisor.model.spec import ModelSpec, TrainingShape

if TYPE_CHECKING:
    from zeroadvisor.throughput import Hardware, StepTime

# the search's types as the advice imports them (advisor/advice.py)
__all__ = ["BucketTuning", "Considered", "Outcome", "Searcher", "Shortfall"]


class Searcher:
    """Estimates candidate changes of one config as they will be written, and ranks those that fit.

    ``written``: the estimate of ``config`` as given (the check made it already); ``lint_fixes``: the fixes the
    selected lint rules propose for a config as a change leaves it; ``tune_buckets``: large-buckets is selected;
    ``hardware``: candidates are ranked by step time on it (None: the fixed order); ``provision``: the cluster
    is one to provision (its NVMe is hardware to add, so may be used); ``trainer_filled``: ``config`` holds the
    batch values the Trainer filled into the file's "auto" keys (advisor/written.py); ``trainer_accumulation``: the
    Trainer's gradient_accumulation_steps where the config leaves it "auto" (None: not given)."""

    def __init__(self, config: dict[str, Any] | None, model: ModelSpec, shape: TrainingShape, cluster: Cluster,
                 accounting: str, written: Estimate, lint_fixes: LintFixes | None = None,
                 tune_buckets: bool = True, hardware: Hardware | None = None,
                 provision: bool = False, trainer_filled: bool = False,
                 trainer_accumulation: int | None = None) -> None:
        original = config if isinstance(config, dict) else {}
        self.model, self.shape, self.cluster, self.accounting = model, shape, cluster, accounting
        self.hardware = hardware
        self.estimates = Estimates(model, cluster, accounting)
        self.estimates.know(original, shape, written)  # the config as written is estimated already
        self.as_written = Written(original, model, shape, cluster, self.estimates,
                                  lint_fixes or (lambda data, gpus: {}), tune_buckets, trainer_filled,
                                  trainer_accumulation)
        self.search = Candidates(self.as_written, provision)
        self.proposal = ClusterProposal(self.as_written, accounting, self._search_on)

    def _search_on(self, config: dict[str, Any], cluster: Cluster) -> Searcher:
        """The search of ``config`` on another cluster, one to provision."""
        w = self.as_written
        return Searcher(config, self.model, self.shape, cluster, self.accounting,
                        estimate(config, self.model, self.shape, cluster, self.accounting),
                        w.lint_fixes, w.tune, self.hardware, provision=True, trainer_filled=w.trainer_filled,
                        trainer_accumulation=w.accumulation)

    # -- what the search starts from -------------------------------------------------------------
    @property
    def base(self) -> dict[str, Any]:
        """The config as the fixes write it: the lint fixes and the bucket tuning applied."""
        return self.as_written.base

    @property
    def base_estimate(self) -> Estimate:
        return self.as_written.base_estimate

    @property
    def tuning(self) -> BucketTuning | None:
        """The bucket tuning of the config as given (large-buckets' fix)."""
        return self.as_written.tuning

    @property
    def configured(self) -> Option:
        return self.as_written.configured

    def written_with(self, shape: TrainingShape) -> StageEstimate | None:
        """The configured run as written under another training shape: an assumed input's other value."""
        return self.estimates.of(self.as_written.original, shape).configured

    # -- the best change -------------------------------------------------------------------------
    def candidates(self) -> list[tuple[Change, StageEstimate]]:
        return self.search.fitting()

    def step_time(self, change: Change, stage: StageEstimate) -> StepTime:
        return self.as_written.step_time(change, stage, self.hardware)

    @cached_property
    def _ranked(self) -> tuple[Considered, ...]:
        return rank([Considered(change, stage, self.step_time(change, stage))
                                for change, stage in self.candidates()])

    def ranked(self) -> tuple[Considered, ...]:
        """The fitting candidates, best first (``ranking.rank``: by step time where there is one)."""
        return self._ranked

    def configured_step_time(self) -> StepTime:
        """The step time of the configured run as the fixes write it (NoStepTime: no model, or DeepSpeed refuses
        the configured option)."""
        return self._configured_step_time

    @cached_property
    def _configured_step_time(self) -> StepTime:
        from zeroadvisor.throughput import NoStepTime

        change = self.as_written.change(self.configured)
        stage = self.as_written.evaluate(change)
        if stage is None:
            return NoStepTime(f"DeepSpeed does not run the configured {self.configured.words} with this config")
        return self.step_time(change, stage)

    @cached_property
    def _best(self) -> Outcome | None:
        for considered in self.ranked():
            found = self.as_written.outcome(considered.change)
            if found is not None:
                return found
        return None

    def best(self) -> Outcome | None:
        """The best fitting change as it will be written (the configured run when nothing beats it)."""
        return self._best

    def cheapest_fit(self) -> Outcome | None:
        return self.best()

    def outcome(self, change: Change) -> Outcome | None:
        """``change`` as it will be written, if it fits."""
        return self.as_written.outcome(change)

    # -- when nothing fits -----------------------------------------------------------------------
    def shortfalls(self) -> list[Shortfall]:
        """What binds, resource by resource, at the least memory the run allows (advisor/cluster.py)."""
        return shortfalls(self.search.extremes(), self.cluster)

    def cluster_changes(self) -> list[Outcome]:
        """The smallest cluster changes that make something fit, each with the best change there."""
        return self.proposal.changes(self.shortfalls())

    # -- what the rules ask (advisor/candidates.py) -----------------------------------------------
    def stage_change(self, option: Option) -> Change:
        """``option`` with everything else as configured."""
        return self.as_written.change(option)

    def lowest_fitting_lower_stage(self) -> StageEstimate | None:
        return self.search.lowest_fitting_lower_stage()

    def without_offload(self) -> StageEstimate | None:
        return self.search.without_offload()

    def largest_fitting_micro_batch(self) -> int | None:
        return self.search.largest_fitting_micro_batch()

    def checkpointing_outcomes(self) -> list[tuple[Change, StageEstimate]]:
        return self.search.checkpointing_outcomes()

    def flash_attention_outcome(self) -> StageEstimate | None:
        return self.search.flash_attention_outcome()

    def sequence_parallel_outcome(self) -> Outcome | None:
        return self.search.sequence_parallel_outcome()
