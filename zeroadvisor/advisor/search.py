"""Search every change that makes a run fit and pick the best by one ranking key; express it as a merge patch.

The candidates are every combination of ZeRO stage x optimizer offload device x parameter offload device
(what DeepSpeed runs for the config, memory/options.py) x activation checkpointing level (the configured one
or stronger) x micro batch at the same global batch (the largest that fits: memory grows with it) x parallel
layout (none; Ulysses sequence parallel and AutoTP tensor parallel at each degree the model and cluster allow,
searched when no layout-free run without offload fits: a layout change only adds communication). Of those
that fit in every phase with the headroom left free (GPU, and host RAM / NVMe when given), the first in
``ranking.rank``'s order wins: the published order of stages, offloads and activation remedies, which the
step-time model overrules only outside its measured error. The configured run is ranked among them. NVMe
offload is a candidate only where the NVMe space is given (no drive is assumed), AutoTP only on cards whose
GPU-to-GPU links are faster than their host link (NVLink / Infinity Fabric: its per-layer all-reduces).

Every candidate is estimated as it will be written: on the config with the lint fixes and the bucket tuning
of large-buckets applied (``base``), and with that tuning again for the candidate's own stage when its
buffers call for it; the winner's patch also carries the lint fixes its change makes necessary (e.g.
zero_allow_untested_optimizer when ZeRO is switched on). So a second ``check --fix`` finds nothing more to
change. What a change needs outside the config is an action (advisor/change.py).

When nothing fits, ``shortfalls`` says which resource binds in which phase and by how much, and
``cluster_changes`` the smallest cluster that fits: more GPUs (ZeRO-3 partitions over them), more host RAM
or more NVMe per node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from zeroadvisor.advisor.change import (
    CHECKPOINTING_LEVELS,
    NVME_PATH_PLACEHOLDER,
    SP_KEY,
    TP_KEY,
    Change,
    ClusterChange,
)
from zeroadvisor.advisor.ranking import rank
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.deepspeed import effective as dsconfig
from zeroadvisor.deepspeed import schema
from zeroadvisor.deepspeed.effective import AUTO, GAS, MBS, TBS
from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.estimate import MAX_GPUS, MAX_MEMORY_BYTES, Cluster, Estimate, StageEstimate, estimate
from zeroadvisor.memory.options import Option, refusal
from zeroadvisor.memory.step_temporaries import KEY as STEP_TEMPORARY
from zeroadvisor.model.spec import Checkpointing, ModelSpec, TrainingShape
from zeroadvisor.vocab import Device

if TYPE_CHECKING:
    from zeroadvisor.throughput import Hardware, StepTime

# Buffers above this share of the usable memory are worth tuning (DS#1302: 5e8 buckets made
# ZeRO-2 larger than ZeRO-1 on BERT-large; DS#3338: smaller buckets, larger batch).
BUCKET_SHARE = 0.05
BUCKET_KEYS = ("reduce_bucket_size", "allgather_bucket_size")
# Bucket size when the hidden size is unknown: 2e8 elements, the value of DeepSpeed's own ZeRO
# tutorial configs (docs/_tutorials/zero.md), 2.5x below the 5e8 default.
BUCKET_FALLBACK = 200_000_000
# The largest micro batch largest_fitting_micro_batch tries (memory grows with it; beyond a few
# thousand samples per GPU the answer is "all of them").
MICRO_BATCH_SEARCH_LIMIT = 4096
# Ulysses and AutoTP degrees the search tries, the smallest (least communication) first.
SEQUENCE_PARALLEL_DEGREES = (2, 4, 8)
TENSOR_PARALLEL_DEGREES = (2, 4, 8)
# Lint fixes can enable others (a rename, then a value fix); a few rounds settle every real config.
LINT_ROUNDS = 3
# The most GPUs the cluster search proposes (a few hundred nodes); beyond it "add GPUs" is no answer.
CLUSTER_SEARCH_LIMIT = 4096
# GPUs per node when the cluster did not say (Cluster's default: min(gpus, 8)).
DEFAULT_GPUS_PER_NODE = 8

# (data as it would be written, GPUs) -> the lint fixes proposed for it
LintFixes = Callable[[dict[str, Any], int], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Outcome:
    change: Change
    stage: StageEstimate
    # Merge patch of the config as written, on top of the other findings' fixes; None: nothing to write.
    patch: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Considered:
    """A fitting candidate as the ranking saw it: the change, its estimate, its step time (a value either way)."""

    change: Change
    stage: StageEstimate
    step_time: StepTime


@dataclass(frozen=True, slots=True)
class BucketTuning:
    """Smaller reduce/allgather buckets for a stage whose buffers take a large share of the budget."""

    patch: dict[str, Any]
    buffers: int  # bytes per GPU before tuning
    target: int  # elements per bucket

    @property
    def keys(self) -> tuple[str, ...]:
        """The config keys it writes, dotted and sorted ("zero_optimization.reduce_bucket_size")."""
        return tuple(sorted(f"{block}.{key}" for block, keys in self.patch.items() for key in keys))


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A resource that binds for the candidate closest to fitting on it: what it needs, and in which phase."""

    resource: str  # gpu | host | nvme
    phase: str
    need: int
    usable: int  # the capacity less the headroom
    change: Change

    @property
    def missing(self) -> int:
        return self.need - self.usable


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` in ascending order, in O(sqrt n) steps."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def offloads(option: Option) -> bool:
    return option.offload_optimizer != Device.NONE or option.offload_param != Device.NONE


class Searcher:
    """Estimates candidate changes of one config as they will be written, and ranks those that fit."""

    def __init__(self, config: dict[str, Any] | None, model: ModelSpec, shape: TrainingShape, cluster: Cluster,
                 accounting: str, written: Estimate, lint_fixes: LintFixes | None = None,
                 tune_buckets: bool = True, hardware: Hardware | None = None,
                 provision: bool = False) -> None:
        self.original = config if isinstance(config, dict) else {}
        # a cluster to provision (cluster_changes), not the one given: its NVMe is hardware to add, so may be used
        self.provision = provision
        self.model, self.shape, self.cluster, self.accounting = model, shape, cluster, accounting
        self.written = written
        self._lint_fixes = lint_fixes or (lambda data, gpus: {})
        self._tune = tune_buckets
        self.hardware = hardware  # throughput.Hardware: candidates are ranked by step time (None: fixed order)
        self._estimates: dict[tuple[str, TrainingShape], Estimate] = {}
        self._candidates: list[tuple[Change, StageEstimate]] | None = None
        self._ranked: tuple[Considered, ...] | None = None
        self._best: tuple[Outcome | None] | None = None
        self._estimates[(repr(self.original), shape)] = written  # the config as written is estimated already
        self.tuning = self.bucket_tuning(self.original, written.configured)
        fixed = self._lint_closure(self.original)
        self.base = mp.apply(fixed, self.tuning.patch) if self.tuning else fixed
        self.base_estimate = self._estimate(self.base, shape)
        current = self.base_estimate.configured
        self.configured = current.option if current is not None else Option(0)
        # what DeepSpeed reads of the base (deepspeed/settings.py), read once with its estimate: the batch counts,
        # and train_batch_size as DeepSpeed resolves it on the batch world (None: an integration sets it)
        self.deepspeed = self.base_estimate.settings.deepspeed
        self.global_batch = self.base_estimate.settings.global_batch
        # "auto" batch keys: the HF Trainer fills them from its arguments, where a micro batch change is made; the
        # global batch is the configured micro batch on the batch world with the Trainer's default accumulation
        # of 1 (TrainingArguments.gradient_accumulation_steps)
        self.trainer_batch = self.deepspeed.batch.filled_by_integration
        if self.trainer_batch and self.global_batch is None:
            self.global_batch = self.current_micro_batch * int(self.deepspeed.batch_world(cluster.gpus))

    # -- estimating ------------------------------------------------------------------------------

    def written_with(self, shape: TrainingShape) -> StageEstimate | None:
        """The configured run as written under another training shape: an assumed input's other value."""
        return self._estimate(self.original, shape).configured
    def _estimate(self, config: dict[str, Any], shape: TrainingShape) -> Estimate:
        key = (repr(config), shape)
        if key not in self._estimates:
            self._estimates[key] = estimate(config, self.model, shape, self.cluster, self.accounting)
        return self._estimates[key]

    def _lint_closure(self, config: dict[str, Any]) -> dict[str, Any]:
        for _ in range(LINT_ROUNDS):
            fixed = mp.apply(config, self._lint_fixes(config, self.cluster.gpus))
            if _same(fixed, config):
                break
            config = fixed
        return config

    def bucket_tuning(self, config: dict[str, Any], stage: StageEstimate | None, rewritten: bool = False,
                      needed: bool = False) -> BucketTuning | None:
        """The bucket sizes large-buckets proposes for ``stage`` of ``config`` (None: nothing to tune).

        ``rewritten``: the option patch writes the zero_optimization object anew (another stage), so a
        legacy boolean form there does not stop the tuning. ``needed``: the buckets are what keeps the
        stage from fitting, so they are tuned below BUCKET_SHARE too."""
        zero = config.get("zero_optimization", {}) if isinstance(config, dict) else None
        if isinstance(zero, bool) and rewritten:
            zero = {}
        if not self._tune or stage is None or stage.option.stage == 0 or not isinstance(zero, dict):
            return None
        budget = self.cluster.usable_gpu_memory
        # the communication buckets: the buffers row less the optimizer step's temporaries (no bucket shrinks those)
        buffers = stage.per_gpu["buffers"] - sum(t.nbytes for t in stage.terms if t.key == STEP_TEMPORARY)
        if budget is None or (buffers < BUCKET_SHARE * budget and not needed):
            return None
        target = self.bucket_target
        patch = {key: target for key in BUCKET_KEYS if zero.get(key) != AUTO and not _at_most(zero.get(key), target)}
        return BucketTuning({"zero_optimization": patch}, buffers, target) if patch else None

    @property
    def bucket_target(self) -> int:
        """What the Hugging Face integration writes for reduce_bucket_size "auto" (schema x-auto-fill)."""
        fill = schema.auto_fill("zero_optimization", "reduce_bucket_size")
        h = self.model.hidden_size
        return fill.value(h) if fill is not None and h else BUCKET_FALLBACK

    def _config(self, change: Change) -> dict[str, Any]:
        """The base config with the change's batch keys and layout keys (not yet its option)."""
        delta = mp.merge(self.batch_patch(change.micro_batch, change.config_patch) or None, change.config_patch)
        return mp.apply(self.base, delta) if delta else self.base

    def evaluate(self, change: Change) -> StageEstimate | None:
        """The estimate of ``change`` with its bucket tuning; None where DeepSpeed does not run the option."""
        result = self._evaluate(change)
        return result[0] if result is not None else None

    def _evaluate(self, change: Change) -> tuple[StageEstimate, BucketTuning | None] | None:
        config = self._config(change)
        stage = _stage_of(self._estimate(config, change.shape), change.option)
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
        return _stage_of(self._estimate(mp.apply(config, tuning.patch), change.shape), change.option)

    def _fits(self, change: Change) -> bool:
        stage = self.evaluate(change)
        return bool(stage is not None and stage.comfortable)

    def outcome(self, change: Change) -> Outcome | None:
        """``change`` as it will be written, if it fits: the config with every fix applied is estimated again."""
        evaluated = self._evaluate(change)
        if evaluated is None or not evaluated[0].comfortable:
            return None
        _, tuning = evaluated
        batch = self.batch_patch(change.micro_batch, change.config_patch)
        if batch is None:
            return None
        delta = mp.merge(self.option_patch(change.option) if change.option != self.configured else None,
                         batch or None, change.config_patch, tuning.patch if tuning is not None else None)
        final = self._lint_closure(mp.apply(self.base, delta)) if delta else self.base
        checked = _stage_of(self._estimate(final, change.shape), change.option)
        if checked is None or not checked.comfortable:
            return None  # a lint fix the change needs costs memory after all
        patch = _diff(self.base, final)
        change = replace(change, buckets=tuning.target if tuning is not None else None,
                         nvme_path=_nvme_path(final), nvme_space=checked.peak_nvme_per_node or None)
        return Outcome(change, checked, patch or None)

    # -- the search --------------------------------------------------------------------------------
    def candidates(self) -> list[tuple[Change, StageEstimate]]:
        """Every fitting combination on the frontier: per layout, checkpointing level and option, the largest
        micro batch that fits. Layout changes are searched only when no layout-free run without offload fits."""
        if self._candidates is None:
            found = [c for c in self._frontier(None) if self._may_recommend(c[0].option)]
            plain = any(not offloads(c.option) for c, _ in found)
            done: set[str] = set()  # a larger degree of a layout that fits without offload only costs more
            for layout in self.layouts() if not plain else ():
                kind = next(iter(layout))
                if kind in done:
                    continue
                more = [c for c in self._frontier(layout) if self._may_recommend(c[0].option)]
                found += more
                if any(not offloads(c.option) for c, _ in more):
                    done.add(kind)
            self._candidates = found
        return self._candidates

    def _may_recommend(self, option: Option) -> bool:
        """NVMe offload only where the NVMe space is given, the config already offloads there, or the cluster is
        one to provision (where the drive is named as hardware to add): a drive nobody declared is not a fix."""
        nvme = Device.NVME in (option.offload_optimizer, option.offload_param)
        return not nvme or self.provision or self.cluster.nvme is not None or option == self.configured

    def ranked(self) -> tuple[Considered, ...]:
        """The fitting candidates, best first (``ranking.rank``: by step time where there is one)."""
        from zeroadvisor.throughput import seconds_of

        if self._ranked is None:
            timed = [Considered(change, stage, self.step_time(change, stage)) for change, stage in self.candidates()]
            order = rank([(c.change, c.stage, seconds_of(c.step_time)) for c in timed])
            by_change = {id(c.change): c for c in timed}
            self._ranked = tuple(by_change[id(change)] for change, _ in order)
        return self._ranked

    def step_time(self, change: Change, stage: StageEstimate) -> StepTime:
        """The step time of ``change`` at the configured global batch: a Throughput, or the NoStepTime saying why
        there is none (no machine to time it on, or an input the step-time model lacks)."""
        from zeroadvisor.throughput import NoStepTime, NoThroughput, step_time_of

        if self.hardware is None:
            return NoStepTime("no GPU named (--gpu): the step time needs its peak TFLOPS and links")
        config = self._config(change)
        try:
            return step_time_of(self._estimate(config, change.shape), stage, self.hardware,
                                self.global_batch)
        except (NoThroughput, EstimateError, ValueError, ZeroDivisionError) as err:
            return NoStepTime(str(err) or type(err).__name__)

    def configured_step_time(self) -> StepTime:
        """The step time of the configured run as the fixes write it (NoStepTime: no model, or DeepSpeed refuses
        the configured option)."""
        from zeroadvisor.throughput import NoStepTime

        change = self._change(self.configured)
        stage = self.evaluate(change)
        if stage is None:
            return NoStepTime(f"DeepSpeed does not run the configured {self.configured.words} with this config")
        return self.step_time(change, stage)

    def best(self) -> Outcome | None:
        """The best fitting change as it will be written (the configured run when nothing beats it)."""
        if self._best is None:
            found = None
            for considered in self.ranked():
                found = self.outcome(considered.change)
                if found is not None:
                    break
            self._best = (found,)
        return self._best[0]

    def cheapest_fit(self) -> Outcome | None:
        return self.best()

    def _frontier(self, layout: dict[str, Any] | None) -> list[tuple[Change, StageEstimate]]:
        current = self.current_micro_batch
        sizes = [m for m in divisors(current) if self.batch_patch(m, layout) is not None]
        if not sizes:
            return []
        out: list[tuple[Change, StageEstimate]] = []
        settled: set[Option] = set()  # fits at the largest micro batch: a stronger level only costs

        def fits(option: Option, shape: TrainingShape, micro_batch: int) -> bool:
            return self._fits(self._change(option, shape, micro_batch, layout))

        for level in CHECKPOINTING_LEVELS[CHECKPOINTING_LEVELS.index(self.shape.activation_checkpointing):]:
            shape = replace(self.shape, activation_checkpointing=level)
            for option in self._options(shape, layout, sizes[-1]):
                if option in settled:
                    continue
                largest = _largest_true(sizes, partial(fits, option, shape))
                if largest is None:
                    continue
                change = self._change(option, shape, largest, layout)
                stage = self.evaluate(change)
                assert stage is not None  # it fits (_largest_true tested it)
                out.append((change, stage))
                if largest == sizes[-1]:
                    settled.add(option)
        return out

    def _options(self, shape: TrainingShape, layout: dict[str, Any] | None, micro_batch: int) -> list[Option]:
        """The stage/offload options DeepSpeed runs for the config (the configured one even when refused)."""
        result = self._estimate(self._config(self._change(self.configured, shape, micro_batch, layout)), shape)
        return [s.option for s in result.stages
                if s.option == self.configured or refusal(result.settings, s.option) is None]

    def layouts(self) -> list[dict[str, Any]]:
        """The layout patches the search may add: Ulysses, then AutoTP, each smallest degree first."""
        # a layout change always has its config_patch
        return [*(c.config_patch for c in self.sequence_parallel_changes() if c.config_patch is not None),
                *(c.config_patch for c in self.tensor_parallel_changes() if c.config_patch is not None)]

    # -- what the rules ask ------------------------------------------------------------------------
    def lowest_fitting_lower_stage(self) -> StageEstimate | None:
        """The lowest stage below the configured one that fits without offload, as configured otherwise."""
        for stage in range(self.configured.stage):
            found = self.evaluate(self._change(Option(stage)))
            if found is not None and found.comfortable:
                return found
        return None

    def stage_change(self, option: Option) -> Change:
        """``option`` with everything else as configured."""
        return self._change(option)

    def without_offload(self) -> StageEstimate | None:
        """The configured stage without offload, as configured otherwise, if it fits."""
        found = self.evaluate(self._change(Option(self.configured.stage)))
        return found if found is not None and found.comfortable else None

    def largest_fitting_micro_batch(self, limit: int = MICRO_BATCH_SEARCH_LIMIT) -> int | None:
        """The largest micro batch up to ``limit`` at the configured option that fits (memory grows with it)."""
        def fits(micro_batch: int) -> bool:
            return self._fits(self._change(self.configured, micro_batch=micro_batch, free_batch=True))

        if not fits(1):
            return None
        low, high = 1, 2
        while high <= limit and fits(high):
            low, high = high, high * 2
        high = min(high, limit + 1)
        while high - low > 1:  # invariant: low fits, high does not (or is past the limit)
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle) else (low, middle)
        return low

    def checkpointing_outcomes(self) -> list[tuple[Change, StageEstimate]]:
        """The configured option with each stronger activation checkpointing level, fitting or not."""
        pairs = [(change, self.evaluate(change)) for change in self.checkpointing_changes()]
        return [(change, stage) for change, stage in pairs if stage is not None]

    def checkpointing_changes(self) -> Iterator[Change]:
        levels = CHECKPOINTING_LEVELS[CHECKPOINTING_LEVELS.index(self.shape.activation_checkpointing) + 1:]
        for level in levels:
            yield self._change(self.configured, replace(self.shape, activation_checkpointing=level))

    def flash_attention_outcome(self) -> StageEstimate | None:
        """The configured option with FlashAttention (None when it is already on)."""
        if self.shape.flash_attention:
            return None
        return self.evaluate(self._change(self.configured, replace(self.shape, flash_attention=True)))

    def sequence_parallel_outcome(self) -> Outcome | None:
        """The smallest Ulysses degree that fits at the configured option, shape and micro batch (None: none
        offered or fits): what splits one sample's activations without any other change."""
        for change in self.sequence_parallel_changes():
            found = self.outcome(change)
            if found is not None:
                return found
        return None

    # -- when nothing fits -----------------------------------------------------------------------
    def _extremes(self) -> list[tuple[Change, StageEstimate]]:
        """Every option and layout at the least memory the run allows: full checkpointing, the smallest
        micro batch the batch keys allow."""
        full = replace(self.shape, activation_checkpointing=Checkpointing.FULL)
        out = []
        for layout in (None, *self.layouts()):
            sizes = [m for m in divisors(self.current_micro_batch) if self.batch_patch(m, layout) is not None]
            if not sizes:
                continue
            for option in self._options(full, layout, sizes[0]):
                change = self._change(option, full, sizes[0], layout)
                stage = self.evaluate(change)
                if stage is not None:
                    out.append((change, stage))
        return out

    def shortfalls(self) -> list[Shortfall]:
        """What binds, resource by resource: the GPU for the candidate with the smallest GPU peak; host RAM for the
        one with the smallest host peak among those the GPU holds; NVMe likewise among those GPU and host hold."""
        usable = self._usable()
        pool = self._extremes()
        out: list[Shortfall] = []
        for resource in ("gpu", "host", "nvme"):
            capacity = usable[resource]
            if capacity is None or not pool:
                continue
            change, stage = min(pool, key=lambda pair: _peak(pair[1], resource))
            need = _peak(stage, resource)
            if need > capacity:
                phase = max(stage.phases.values(), key=lambda p: p.of(resource)).phase if stage.phases else "train"
                out.append(Shortfall(resource, phase, need, capacity, change))
            pool = [pair for pair in pool if _peak(pair[1], resource) <= capacity]
        return out

    def _usable(self) -> dict[str, int | None]:
        keep = 1 - self.cluster.headroom
        return {"gpu": self.cluster.usable_gpu_memory,
                "host": None if self.cluster.cpu_memory is None else int(self.cluster.cpu_memory * keep),
                "nvme": None if self.cluster.nvme is None else int(self.cluster.nvme * keep)}

    def cluster_changes(self) -> list[Outcome]:
        """The smallest cluster changes that make something fit, each with the best change there: more host RAM
        or NVMe per node (the GPUs already hold a candidate), or more GPUs (ZeRO-3 partitions over them)."""
        out: list[Outcome] = []
        keep = 1 - self.cluster.headroom
        binding = {s.resource: s for s in self.shortfalls()}
        if "gpu" not in binding:
            grown: dict[str, int] = {}
            for resource, key in (("host", "cpu_memory"), ("nvme", "nvme")):
                if resource in binding:
                    grown[key] = _round_up_gb(binding[resource].need / keep)
            # more than any machine has (memory/cluster.py's bound) is no change to recommend
            if grown and max(grown.values()) <= MAX_MEMORY_BYTES:
                larger = replace(self.cluster, cpu_memory=grown.get("cpu_memory", self.cluster.cpu_memory),
                                 nvme=grown.get("nvme", self.cluster.nvme))
                found = self._on_cluster(larger, ClusterChange(**grown))
                if found is not None:
                    out.append(found)
        gpus = self._gpus_that_fit()
        if gpus is not None:
            per_node = self._per_node(gpus)
            found = self._on_cluster(replace(self.cluster, gpus=gpus, gpus_per_node=per_node),
                                     ClusterChange(gpus=gpus, gpus_per_node=per_node))
            if found is not None:
                out.append(found)
        return out

    def _per_node(self, gpus: int) -> int:
        given = self.cluster.gpus_per_node
        assert given is not None  # Cluster.__post_init__ sets it
        return min(gpus, DEFAULT_GPUS_PER_NODE) if given == min(self.cluster.gpus, DEFAULT_GPUS_PER_NODE) else given

    def _gpu_counts(self) -> list[int]:
        """More GPUs: filling the node, then whole nodes, up to CLUSTER_SEARCH_LIMIT."""
        gpus, node = self.cluster.gpus, max(self._per_node(self.cluster.gpus), DEFAULT_GPUS_PER_NODE)
        counts = list(range(gpus + 1, min(node, CLUSTER_SEARCH_LIMIT) + 1))
        start = max(gpus, node) // node + 1
        counts += [n * node for n in range(start, min(CLUSTER_SEARCH_LIMIT, MAX_GPUS) // node + 1)]
        return counts

    def _probe(self, gpus: int) -> bool:
        """Whether some ZeRO-3 option fits on ``gpus`` GPUs at the least memory the run allows (full
        checkpointing, micro batch 1 where the keys allow it); the batch keys that only set the global batch are
        left out (memory does not depend on them)."""
        cluster = replace(self.cluster, gpus=gpus, gpus_per_node=self._per_node(gpus))
        batch = self.deepspeed.batch
        micro = 1 if batch.micro_batch is not None or TBS in batch.present else self.current_micro_batch
        config = {k: v for k, v in self.base.items() if k not in (TBS, GAS)}
        if MBS in config and config[MBS] != AUTO:
            config[MBS] = micro
        full = replace(self.shape, activation_checkpointing=Checkpointing.FULL)
        try:
            result = estimate(config, self.model, full, cluster, self.accounting)
        except EstimateError:
            return False
        return any(s.option.stage == 3 and s.comfortable for s in result.stages)

    def _gpus_that_fit(self) -> int | None:
        counts = self._gpu_counts()
        found = _largest_true(counts[::-1], lambda n: not self._probe(n))  # the largest count that does not fit
        index = 0 if found is None else counts.index(found) + 1
        for gpus in counts[index:index + 8]:  # the batch keys may rule out a count: the next ones
            if self._on_cluster(replace(self.cluster, gpus=gpus, gpus_per_node=self._per_node(gpus)), None):
                return gpus
        return None

    def _on_cluster(self, cluster: Cluster, grown: ClusterChange | None) -> Outcome | None:
        """The best change on ``cluster``, with the batch keys kept at the global batch (None: nothing fits, or
        the global batch cannot be kept there). Its patch is against this searcher's base."""
        config = self.base
        tbs, mbs = self.deepspeed.batch.train_batch_size, self.current_micro_batch
        if tbs is not None and cluster.gpus != self.cluster.gpus:
            world = self.deepspeed.batch_world(cluster.gpus)
            if not float(world).is_integer() or tbs % (mbs * int(world)):
                return None
            config = mp.apply(self.base, {MBS: mbs, GAS: tbs // (mbs * int(world))})
        try:
            other = Searcher(config, self.model, self.shape, cluster, self.accounting,
                             estimate(config, self.model, self.shape, cluster, self.accounting),
                             self._lint_fixes, self._tune, self.hardware, provision=True)
        except EstimateError:
            return None
        found = other.best()
        if found is None or grown is None:
            return found
        final = mp.apply(other.base, found.patch) if found.patch else other.base
        return Outcome(replace(found.change, cluster=grown), found.stage, _diff(self.base, final) or None)

    # -- candidates ------------------------------------------------------------------------------
    @property
    def current_micro_batch(self) -> int:
        return self.base_estimate.settings.micro_batch

    def _change(self, option: Option, shape: TrainingShape | None = None, micro_batch: int | None = None,
                layout: dict[str, Any] | None = None, free_batch: bool = False) -> Change:
        """A candidate; ``free_batch``: a micro batch estimated without keeping the global batch (limits)."""
        micro_batch = self.current_micro_batch if micro_batch is None else micro_batch
        batch = self.batch_patch(micro_batch, layout)
        shape = shape or self.shape
        accumulation = (batch or {}).get(GAS)
        trainer = self.trainer_batch and micro_batch != self.current_micro_batch and not free_batch
        if trainer:  # estimated at that micro batch (TrainingShape fills "auto"); the Trainer writes it
            shape = replace(shape, micro_batch_size=micro_batch)
            accumulation = self.current_micro_batch // micro_batch
        if free_batch and micro_batch != self.current_micro_batch:
            layout = mp.merge(layout, {MBS: micro_batch, GAS: None, TBS: None})
            batch = {}
        return Change(option, shape, micro_batch, accumulation, self.configured, self.shape,
                      self.current_micro_batch, layout, trainer_batch=trainer)

    def sequence_parallel_changes(self) -> Iterator[Change]:
        """Ulysses at each degree of SEQUENCE_PARALLEL_DEGREES at the configured option. The degree divides the
        data-parallel ranks (the Ulysses groups are carved from them, runtime/sequence_parallel/
        parallel_state_sp.py) and the attention and kv heads (the all-to-all scatters heads, sequence/layer.py
        _SeqAllToAll); no pipeline, whose batch world differs; not with "auto" batch keys (the integration fills
        them from its own world size)."""
        layout = self.base_estimate.parallel
        heads = self.model.num_attention_heads
        sequence_length = self.shape.sequence_length
        if layout.sequence > 1 or layout.pipeline > 1 or not heads or not sequence_length:
            return
        kv_heads = self.model.num_key_value_heads or heads
        if self.deepspeed.batch.auto:
            return
        for sp in SEQUENCE_PARALLEL_DEGREES:
            if layout.data % sp or heads % sp or kv_heads % sp or sequence_length % sp:
                continue
            yield self._change(self.configured, layout={SP_KEY: sp})

    def tensor_parallel_changes(self) -> Iterator[Change]:
        """AutoTP at each degree of TENSOR_PARALLEL_DEGREES. The degree divides the GPUs per node (the
        all-reduces stay on NVLink), the attention and kv heads and the MLP width (auto_tp.py shards heads and
        columns evenly); no other parallel degree is set (their groups would have to be re-formed)."""
        layout = self.base_estimate.parallel
        heads = self.model.num_attention_heads
        width = self.model.intermediate_size
        if not layout.trivial or not heads or not width or (isinstance(self.base.get(TP_KEY), dict)
                                                             and self.base[TP_KEY].get("autotp_size") == AUTO):
            return
        kv_heads = self.model.num_key_value_heads or heads
        gpu = self.cluster.gpu
        if gpu is None or gpu.intra_node_gb_s <= gpu.host_link_gb_s:
            return  # no NVLink / Infinity Fabric known: AutoTP's per-layer all-reduces would cross PCIe
        per_node = self.cluster.gpus_per_node or self.cluster.gpus
        for tp in TENSOR_PARALLEL_DEGREES:
            if per_node % tp or self.cluster.gpus % tp or heads % tp or kv_heads % tp or width % tp:
                continue
            yield self._change(self.configured, layout={TP_KEY: {"autotp_size": tp}})

    # -- patches -----------------------------------------------------------------------------------
    def batch_patch(self, micro_batch: int, layout: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The batch keys for ``micro_batch`` under ``layout`` at the same global batch ({}: none to write; None:
        not possible). DeepSpeed asserts tbs == micro · accumulation · world (runtime/config.py
        _batch_assertion), its world the GPUs / sequence_parallel_size (DeepSpeedConfig.__init__), so accumulation
        rises by the factor the micro batch or the world falls. Without train_batch_size DeepSpeed derives it
        from the micro batch, accumulation and world, so the same factors keep it."""
        sp = (layout or {}).get(SP_KEY)
        current = self.current_micro_batch
        if micro_batch == current and not sp:
            return {}
        batch = self.deepspeed.batch
        tbs, mbs, gas = batch.counts
        if (sp and batch.auto) or (self.trainer_batch and not self._trainer_divides(micro_batch)):
            return None
        if self.trainer_batch:  # the Trainer's arguments change (an action), not the config's "auto" keys
            return {}
        if tbs is not None:  # the layout's sequence_parallel_size, else the base's
            return self._train_batch_patch(tbs, micro_batch, sp)
        if mbs is None or current % micro_batch or (GAS in batch.present and gas is None):
            return None  # "auto" or absent: an integration sets them and would contradict a written value
        # sp GPUs share one sample's tokens: sp times the accumulation keeps the samples per step
        return {MBS: micro_batch, GAS: (gas or 1) * (current // micro_batch) * (sp or 1)}

    def _train_batch_patch(self, tbs: int, micro_batch: int, sp: int | None) -> dict[str, Any] | None:
        """batch_patch with train_batch_size written: the accumulation that keeps it on the batch world."""
        world = self.cluster.gpus / sp if sp else self.deepspeed.batch_world(self.cluster.gpus)
        if not float(world).is_integer() or tbs % (micro_batch * int(world)):
            return None
        return {MBS: micro_batch, GAS: tbs // (micro_batch * int(world))}

    def _trainer_divides(self, micro_batch: int) -> bool:
        """The Trainer keeps the global batch at ``micro_batch``: it divides the configured one, on whole ranks."""
        world = self.deepspeed.batch_world(self.cluster.gpus)
        return self.current_micro_batch % micro_batch == 0 and float(world).is_integer()

    def micro_batch_patch(self, micro_batch: int) -> dict[str, Any] | None:
        """The batch keys for a smaller micro batch at the same global batch (None: not possible)."""
        found = self.batch_patch(micro_batch)
        return found if found != {} else None

    def option_patch(self, option: Option) -> dict[str, Any]:
        """Merge patch that makes the base config run ``option`` (stage and offload devices). An NVMe offload
        keeps an nvme_path the config has (in either block), else writes NVME_PATH_PLACEHOLDER, which an action
        asks to point at a local NVMe mount."""
        zero: dict[str, Any] = {"stage": option.stage}
        current = self.base.get("zero_optimization")
        current = current if isinstance(current, dict) else {}
        known = _nvme_path(self.base, any_device=True)
        for which, device in (("offload_optimizer", option.offload_optimizer), ("offload_param", option.offload_param)):
            block = current.get(which)
            legacy = dsconfig.LEGACY_OFFLOAD[which]
            if device == Device.NONE:
                if block is not None:
                    zero[which] = None
                if legacy in current:
                    zero[legacy] = None
            else:
                existing = block.get("device") if isinstance(block, dict) else None
                if existing != device:
                    zero[which] = {"device": device.value, "pin_memory": True}  # the config holds plain text
                    has_path = isinstance(block, dict) and isinstance(block.get("nvme_path"), str)
                    if device == Device.NVME and not has_path:
                        zero[which]["nvme_path"] = known or NVME_PATH_PLACEHOLDER
                if legacy in current:
                    zero[legacy] = None
        if isinstance(self.base.get("zero_optimization"), bool):
            return {"zero_optimization": {k: v for k, v in zero.items() if v is not None}}
        if option.stage < 3:  # stage-3-only settings would do nothing (stage3-key-below-stage3)
            zero.update({key: None for key in current if key not in zero and schema.min_stage(key) == 3})
        return {"zero_optimization": zero}


# --------------------------------------------------------------------------- helpers


def _peak(stage: StageEstimate, resource: str) -> int:
    return {"gpu": stage.peak_gpu, "host": stage.peak_host_per_node, "nvme": stage.peak_nvme_per_node}[resource]


def _round_up_gb(nbytes: float) -> int:
    """Up to whole decimal GB: what a person provisions."""
    return math.ceil(nbytes / 10**9) * 10**9


def _nvme_path(config: dict[str, Any], any_device: bool = False) -> str | None:
    """The nvme_path of an offload block on NVMe (``any_device``: of any block), None when there is none."""
    zero = config.get("zero_optimization") if isinstance(config, dict) else None
    if not isinstance(zero, dict):
        return None
    for which in ("offload_optimizer", "offload_param"):
        block = zero.get(which)
        if not isinstance(block, dict) or not (any_device or block.get("device") == Device.NVME):
            continue
        path = block.get("nvme_path")
        if isinstance(path, str):
            return path
    return None


def _stage_of(result: Estimate, option: Option) -> StageEstimate | None:
    try:
        return result.stage(option.stage, option.offload_optimizer, option.offload_param)
    except KeyError:
        return None


def _largest_true(values: list[int], test: Callable[[int], bool]) -> int | None:
    """The largest of ascending ``values`` for which the monotone ``test`` holds (true, then false)."""
    if not values or not test(values[0]):
        return None
    low, high = 0, len(values)  # values[low] passes; values[high] fails or is past the end
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if test(values[middle]) else (low, middle)
    return values[low]


def _at_most(value: Any, target: int) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value <= target


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1, 1.0 and true are different values in a config file."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _diff(source: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns ``source`` into ``target`` (RFC 7396)."""
    patch: dict[str, Any] = {key: None for key in source if key not in target}
    for key, value in target.items():
        old = source.get(key, _diff)
        if old is not _diff and _same(old, value):
            continue
        if isinstance(value, dict) and isinstance(old, dict):
            patch[key] = _diff(old, value)
        else:
            patch[key] = value
    return patch
