"""A candidate change as it will be written, and its estimate there.

Every candidate is estimated as it will be written: on the config with the lint fixes and the bucket tuning
of large-buckets applied (``base``), and with that tuning again for the candidate's own stage when its
buffers call for it; the outcome's patch also carries the lint fixes its change makes necessary (e.g.
zero_allow_untested_optimizer when ZeRO is switched on). So a second ``check --fix`` finds nothing more to
change. The patches are advisor/patch.py's, the estimates advisor/estimates.py's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from zeroadvisor.advisor.change import SP_KEY, Change
from zeroadvisor.advisor.estimates import Estimates
from zeroadvisor.advisor.patch import (
    BatchKeys,
    BucketTuning,
    LintFixes,
    Outcome,
    bucket_target,
    bucket_tuning,
    diff,
    lint_closure,
    nvme_path,
    option_patch,
    renamed_keys,
    shared_writes,
    shown_path,
    written_buckets,
    written_patch,
)
from zeroadvisor.advisor.trainer_settings import own_sequence_parallel
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.deepspeed.effective import GAS, MBS, TBS
from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.estimate import Cluster, Estimate, StageEstimate
from zeroadvisor.memory.options import Option
from zeroadvisor.model.spec import ModelSpec, TrainingShape

if TYPE_CHECKING:
    from zeroadvisor.throughput import Hardware, StepTime


def stage_of(result: Estimate, option: Option) -> StageEstimate | None:
    """``option``'s estimate in ``result`` (None: the estimate has no such option)."""
    try:
        return result.stage(option.stage, option.offload_optimizer, option.offload_param)
    except KeyError:
        return None


class Written:
    """One config's candidates as they will be written: the base (the config with its lint fixes and bucket
    tuning), the change each candidate makes to it, and the estimate of each on the config it writes."""

    def __init__(self, config: dict[str, Any], model: ModelSpec, shape: TrainingShape, cluster: Cluster,
                 estimates: Estimates, lint_fixes: LintFixes, tune_buckets: bool = True,
                 trainer_filled: bool = False, trainer_accumulation: int | None = None) -> None:
        self.original, self.model, self.shape, self.cluster = config, model, shape, cluster
        self.estimates = estimates
        self.lint_fixes = lint_fixes
        self.tune = tune_buckets
        self.tuning = self.bucket_tuning(config, estimates.of(config, shape).configured)
        self.fixed = lint_closure(config, lint_fixes, cluster.gpus)  # the lint fixes alone (their keys are worded)
        self.base = mp.apply(self.fixed, self.tuning.patch) if self.tuning else self.fixed
        self.base_estimate = estimates.of(self.base, shape)
        current = self.base_estimate.configured
        self.configured = current.option if current is not None else Option(0)
        # the option DeepSpeed runs the config as given with (a lint fix can change it: a misspelt
        # zero_optimization runs ZeRO-0): a fix that changes it names it, though the search starts from the base
        as_given = estimates.of(config, shape).configured
        self.given_option = as_given.option if as_given is not None else Option(0)
        # what DeepSpeed reads of the base (deepspeed/settings.py), read once with its estimate: the batch counts,
        # and train_batch_size as DeepSpeed resolves it on the batch world (None: an integration sets it)
        self.deepspeed = self.base_estimate.settings.deepspeed
        self.micro_batch = self.base_estimate.settings.micro_batch
        # "auto" batch keys: the HF Trainer fills them from its arguments, where a micro batch change is made; the
        # global batch is the configured micro batch on the batch world times the accumulation below
        self.trainer_batch = self.deepspeed.batch.filled_by_integration or trainer_filled
        # ``trainer_filled``: the file's batch keys are "auto" and ``config`` holds what the Trainer filled them
        # with from the arguments given (advisor/trainer.py trainer_filled), so a micro batch change is estimated
        # on the values the changed arguments would fill (trainer_fill) and the config's keys stay as written
        self.trainer_filled = trainer_filled
        global_batch = self.base_estimate.settings.global_batch
        # the accumulation the run steps with where the config leaves it "auto": the Trainer's argument (given, else
        # TrainingArguments' 1), which Accelerate's or the Trainer's fill puts there at launch
        self.accumulation = self.deepspeed.batch.counts[2] or trainer_accumulation or 1
        if self.trainer_batch and global_batch is None:
            global_batch = self.micro_batch * int(self.deepspeed.batch_world(cluster.gpus)) * self.accumulation
        self.global_batch = global_batch
        self.batch = BatchKeys(self.deepspeed, cluster.gpus, self.micro_batch, self.trainer_batch)

    def bucket_tuning(self, config: dict[str, Any], stage: StageEstimate | None, rewritten: bool = False,
                      needed: bool = False) -> BucketTuning | None:
        """advisor/patch.py bucket_tuning on this cluster and model; None where large-buckets is not selected."""
        if not self.tune:
            return None
        return bucket_tuning(config, stage, self.cluster.usable_gpu_memory, bucket_target(self.model), rewritten,
                             needed)

    def change(self, option: Option, shape: TrainingShape | None = None, micro_batch: int | None = None,
               layout: dict[str, Any] | None = None, free_batch: bool = False) -> Change:
        """A candidate; ``free_batch``: a micro batch estimated without keeping the global batch (limits)."""
        micro_batch = self.micro_batch if micro_batch is None else micro_batch
        batch = self.batch.patch(micro_batch, layout)
        shape = shape or self.shape
        accumulation = (batch or {}).get(GAS)
        sp = (layout or {}).get(SP_KEY) or 1
        trainer = self.trainer_batch and (micro_batch != self.micro_batch or sp > 1) and not free_batch
        if trainer:  # estimated at that micro batch (TrainingShape fills "auto"); the Trainer writes it, with sp
            # times the accumulation under Ulysses (sp GPUs share one sample: the samples per step stay), on the
            # accumulation its arguments give (filled; else TrainingArguments' default of 1)
            shape = replace(shape, micro_batch_size=micro_batch)
            accumulation = self.accumulation * (self.micro_batch // micro_batch) * sp
        if free_batch and micro_batch != self.micro_batch:
            layout = mp.merge(layout, {MBS: micro_batch, GAS: None, TBS: None})
            batch = {}
        return Change(option, shape, micro_batch, accumulation, self.configured, self.shape,
                      self.micro_batch, layout, trainer_batch=trainer)

    def config(self, change: Change) -> dict[str, Any]:
        """The base config with the change's batch keys and layout keys (not yet its option)."""
        delta = mp.merge(self.batch.patch(change.micro_batch, change.config_patch) or None, change.config_patch,
                         self.trainer_fill(change))
        return mp.apply(self.base, delta) if delta else self.base

    def trainer_fill(self, change: Change) -> JSONObject | None:
        """What the trainer's own settings bring into the estimate of ``change`` beyond the config as written: the
        batch keys the Trainer fills for its arguments where the config holds its filled values (``trainer_filled``:
        the micro batch and accumulation the action sets; train_batch_size left to DeepSpeed, which derives it from
        them on its batch world, runtime/config.py _configure_train_batch_size), and the sequence degree of a
        trainer that sets it itself. None: the config's own keys stand."""
        fill: JSONObject = {}
        if self.trainer_filled and change.trainer_batch:
            fill.update({MBS: change.micro_batch, GAS: change.accumulation, TBS: None})
        if change.sequence_parallel and own_sequence_parallel(change.shape.method.trainer):
            fill[SP_KEY] = change.sequence_parallel  # the trainer's own degree, priced as the layout it is
        return fill or None

    def evaluate(self, change: Change) -> StageEstimate | None:
        """The estimate of ``change`` with its bucket tuning; None where DeepSpeed does not run the option."""
        result = self.evaluate_tuned(change)
        return result[0] if result is not None else None

    def evaluate_tuned(self, change: Change) -> tuple[StageEstimate, BucketTuning | None] | None:
        """evaluate, with the bucket tuning the estimate includes (None: none)."""
        config = self.config(change)
        stage = stage_of(self.estimates.of(config, change.shape), change.option)
        if stage is None:
            return None
        rewritten = change.option != self.configured
        tuning = self.bucket_tuning(config, stage, rewritten)
        if tuning is None and not stage.comfortable:
            # Smaller buckets are part of a change they make fit (a second check would find it otherwise).
            tuning = self.bucket_tuning(config, stage, rewritten, needed=True)
            tuned = self._tuned(config, tuning, change)
            if tuned is None or not tuned.comfortable:
                return stage, None
            return tuned, tuning
        if tuning is not None:
            stage = self._tuned(config, tuning, change)
            if stage is None:
                return None
        return stage, tuning

    def _tuned(self, config: dict[str, Any], tuning: BucketTuning | None, change: Change) -> StageEstimate | None:
        if tuning is None:
            return None
        return stage_of(self.estimates.of(mp.apply(config, tuning.patch), change.shape), change.option)

    def fits(self, change: Change) -> bool:
        stage = self.evaluate(change)
        return bool(stage is not None and stage.comfortable)

    def batch_refusal(self, micro_batch: int) -> str | None:
        """Why the trainer refuses ``micro_batch`` with the global batch kept (the accumulation grows to keep it),
        whatever the stage: its GRPO batch checks (memory/method.py grpo_batch_refusal); None where it runs."""
        from zeroadvisor.memory.method import grpo_batch_refusal

        accumulation = max(1, self.micro_batch * self.accumulation // micro_batch)
        return grpo_batch_refusal(self.shape.method, micro_batch, accumulation, self.cluster.gpus)

    def outcome(self, change: Change) -> Outcome | None:
        """``change`` as it will be written, if it fits: the config with every fix applied is estimated again."""
        evaluated = self.evaluate_tuned(change)
        # a run the trainer refuses (memory/method.py trainer_refusal: at this stage, or TRL's GRPO at this micro
        # batch) stops before training: no fix, whatever its memory
        if evaluated is None or not evaluated[0].comfortable or evaluated[0].trainer_refusal is not None:
            return None
        _, tuning = evaluated
        batch = self.batch.patch(change.micro_batch, change.config_patch)
        if batch is None:
            return None
        delta = mp.merge(option_patch(self.base, change.option) if change.option != self.configured else None,
                         batch or None, self._written_layout(change), tuning.patch if tuning is not None else None)
        final = lint_closure(mp.apply(self.base, delta), self.lint_fixes, self.cluster.gpus) if delta else self.base
        # The fix is the whole run from the config as given (the lint fixes and buckets the search started from,
        # then the change), and the price is the estimate of exactly that patch written on it: what a user who
        # writes this one finding's fix, and checks again, gets.
        patch = written_patch(self.original, self.base, final)
        written = mp.apply(self.original, patch) if patch else self.original
        refilled = self.trainer_fill(change)  # the Trainer fills the changed arguments into the file's "auto"
        checked = stage_of(self.estimates.of(mp.apply(written, refilled) if refilled else written, change.shape),
                           change.option)
        if checked is None or not checked.comfortable:
            return None  # a lint fix the change needs costs memory after all
        change = replace(change, buckets=written_buckets(patch), nvme_path=nvme_path(written),
                         nvme_space=checked.peak_nvme_per_node or None, written_option=self.given_option,
                         lint_keys=self.lint_keys(patch))
        return Outcome(change, checked, patch or None)

    @staticmethod
    def _written_layout(change: Change) -> JSONObject | None:
        """The layout keys the fix writes into the config: not the sequence degree of a trainer that sets it
        itself (its action says the setting; trainer_fill prices it)."""
        layout = change.config_patch
        if layout and SP_KEY in layout and own_sequence_parallel(change.shape.method.trainer):
            layout = {key: value for key, value in layout.items() if key != SP_KEY} or None
        return layout

    def lint_keys(self, patch: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        """What ``patch`` writes as the lint fixes do, as (verb, key) pairs: ("renames", "zero_optimisation to
        zero_optimization"), ("sets", ...), ("deletes", ...). The words of a fix name them: a change is never said
        to be less than the fix writes; a key the change itself rewrites, a batch key or the stage, is the
        change's words."""
        renames = renamed_keys(self.original, self.fixed)
        shared = shared_writes(diff(self.original, self.fixed), patch)
        moved = {renames[path] for path, deletes in shared if deletes and path in renames}
        out: list[tuple[str, str]] = []
        for path, deletes in shared:
            if deletes and path in renames:
                out.append(("renames", f"{shown_path(path)} to {shown_path(renames[path])}"))
            elif not any(path == new or path.startswith(f"{new}.") for new in moved):
                out.append(("deletes" if deletes else "sets", shown_path(path)))
        return tuple(out)

    def step_time(self, change: Change, stage: StageEstimate, hardware: Hardware | None) -> StepTime:
        """The step time of ``change`` at the configured global batch: a Throughput, or the NoStepTime saying why
        there is none (no machine to time it on, or an input the step-time model lacks)."""
        from zeroadvisor.throughput import NoStepTime, NoThroughput, step_time_of

        if hardware is None:
            return NoStepTime("no GPU named (--gpu): the step time needs its peak TFLOPS and links")
        config = self.config(change)
        try:
            return step_time_of(self.estimates.of(config, change.shape), stage, hardware, self.global_batch)
        except (NoThroughput, EstimateError, ValueError, ZeroDivisionError) as err:
            return NoStepTime(str(err) or type(err).__name__)
