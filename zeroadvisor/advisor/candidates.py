"""Which candidate runs the advice search tries, and which of them fit.

The candidates are every combination of ZeRO stage x optimizer offload device x parameter offload device
(what DeepSpeed runs for the config, memory/options.py) x activation checkpointing level (the configured one
or stronger) x micro batch at the same global batch (the largest that fits: memory grows with it) x parallel
layout (none; Ulysses sequence parallel and AutoTP tensor parallel at each degree the model and cluster allow,
searched wherever the ranking could recommend one: where neither the configured run nor a single change at its
rung or a faster one fits without it). NVMe offload
is a candidate only where the NVMe space is given (no drive is assumed), AutoTP only on cards whose GPU-to-GPU
links are faster than their host link (NVLink / Infinity Fabric: its per-layer all-reduces). Each is estimated
as it will be written (advisor/written.py); which fitting one wins is advisor/ranking.py's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

from zeroadvisor.advisor.change import CHECKPOINTING_LEVELS, SP_KEY, TP_KEY, Change
from zeroadvisor.advisor.patch import Outcome
from zeroadvisor.advisor.ranking import faster_rungs, steps, tier
from zeroadvisor.advisor.trainer_settings import can_set, offers_sequence_parallel
from zeroadvisor.advisor.written import Written
from zeroadvisor.deepspeed.effective import AUTO
from zeroadvisor.memory.estimate import StageEstimate
from zeroadvisor.memory.options import Option, refusal
from zeroadvisor.model.spec import Checkpointing, TrainingShape
from zeroadvisor.vocab import Device

# The largest micro batch largest_fitting_micro_batch tries (memory grows with it; beyond a few
# thousand samples per GPU the answer is "all of them").
MICRO_BATCH_SEARCH_LIMIT = 4096


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


def less_offload(option: Option, than: Option) -> bool:
    """Whether ``option`` offloads less than ``than``: at its stage or a lower one, each offload device kept or
    dropped, one dropped at least."""
    kept = [(getattr(option, which), getattr(than, which)) for which in ("offload_optimizer", "offload_param")]
    return (option.stage <= than.stage and all(mine in (Device.NONE, theirs) for mine, theirs in kept)
            and any(mine != theirs for mine, theirs in kept))


def adds_offload(option: Option, than: Option) -> bool:
    """Whether ``option`` offloads something ``than`` keeps on the GPU, or moves it further (host RAM to NVMe)."""
    depth = (Device.NONE, Device.CPU, Device.NVME)
    return any(depth.index(getattr(option, which)) > depth.index(getattr(than, which))
               for which in ("offload_optimizer", "offload_param"))


def largest_true(values: list[int], test: Callable[[int], bool]) -> int | None:
    """The largest of ascending ``values`` for which the monotone ``test`` holds (true, then false)."""
    if not values or not test(values[0]):
        return None
    low, high = 0, len(values)  # values[low] passes; values[high] fails or is past the end
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if test(values[middle]) else (low, middle)
    return values[low]


class Candidates:
    """The candidate changes of one config (``written``) on its cluster, and the fitting ones among them.

    ``provision``: the cluster is one to provision (advisor/cluster.py), not the one given: its NVMe is
    hardware to add, so it may be used."""

    def __init__(self, written: Written, provision: bool = False) -> None:
        self.written = written
        self.provision = provision
        self._fitting: list[tuple[Change, StageEstimate]] | None = None

    @property
    def configured(self) -> Option:
        return self.written.configured

    # -- which changes ---------------------------------------------------------------------------
    def sequence_parallel_changes(self) -> Iterator[Change]:
        """Ulysses at each degree the model's heads and the GPUs allow, the smallest (least communication) first,
        at the configured option. The degree divides the data-parallel ranks (the Ulysses groups are carved from
        them, runtime/sequence_parallel/parallel_state_sp.py), the attention and kv heads (the all-to-all scatters
        heads, sequence/layer.py _SeqAllToAll) and the sequence; no pipeline, whose batch world differs; with
        "auto" batch keys only where the HF Trainer fills them (the accumulation that keeps the global batch is
        then its argument, advisor/patch.py BatchKeys)."""
        w = self.written
        layout = w.base_estimate.parallel
        heads = w.model.num_attention_heads
        sequence_length = w.shape.sequence_length
        if layout.sequence > 1 or layout.pipeline > 1 or not heads or not sequence_length:
            return
        if not offers_sequence_parallel(w.shape.method.trainer):  # its trainer splits no sequence
            return
        kv_heads = w.model.num_key_value_heads or heads
        if w.deepspeed.batch.auto and not w.trainer_batch:
            return
        for sp in divisors(math.gcd(int(layout.data), heads, kv_heads))[1:]:
            if sequence_length % sp == 0:
                yield w.change(self.configured, layout={SP_KEY: sp})

    def tensor_parallel_changes(self) -> Iterator[Change]:
        """AutoTP at each degree the model and the node allow, the smallest first. The degree divides the GPUs per
        node (the all-reduces stay on NVLink), the attention and kv heads and the MLP width (auto_tp.py shards heads
        and columns evenly); no other parallel degree is set (their groups would have to be re-formed)."""
        w = self.written
        layout = w.base_estimate.parallel
        heads = w.model.num_attention_heads
        width = w.model.intermediate_size
        if not layout.trivial or not heads or not width or (isinstance(w.base.get(TP_KEY), dict)
                                                             and w.base[TP_KEY].get("autotp_size") == AUTO):
            return
        kv_heads = w.model.num_key_value_heads or heads
        gpu = w.cluster.gpu
        if gpu is None or gpu.intra_node_gb_s <= gpu.host_link_gb_s:
            return  # no NVLink / Infinity Fabric known: AutoTP's per-layer all-reduces would cross PCIe
        per_node = w.cluster.gpus_per_node or w.cluster.gpus
        for tp in divisors(math.gcd(per_node, w.cluster.gpus, heads, kv_heads, width))[1:]:
            yield w.change(self.configured, layout={TP_KEY: {"autotp_size": tp}})

    def layouts(self) -> list[dict[str, Any]]:
        """The layout patches the search may add: Ulysses, then AutoTP, each smallest degree first."""
        # a layout change always has its config_patch
        return [*(c.config_patch for c in self.sequence_parallel_changes() if c.config_patch is not None),
                *(c.config_patch for c in self.tensor_parallel_changes() if c.config_patch is not None)]

    def checkpointing_changes(self) -> Iterator[Change]:
        """The configured option with each stronger activation checkpointing level."""
        shape = self.written.shape
        for level in CHECKPOINTING_LEVELS[CHECKPOINTING_LEVELS.index(shape.activation_checkpointing) + 1:]:
            yield self.written.change(self.configured, replace(shape, activation_checkpointing=level))

    def _options(self, shape: TrainingShape, layout: dict[str, Any] | None, micro_batch: int) -> list[Option]:
        """The stage/offload options DeepSpeed and the trainer run for the config (the configured one even where
        DeepSpeed refuses it; never one the trainer refuses: its refusal's rule recommends another), and that the
        trainer's flags can set where it builds the DeepSpeed config from them (advisor/trainer_settings.py
        can_set: OpenRLHF never offloads the parameters)."""
        w = self.written
        trainer = w.shape.method.trainer
        result = w.estimates.of(w.config(w.change(self.configured, shape, micro_batch, layout)), shape)
        return [s.option for s in result.stages
                if s.trainer_refusal is None and (s.option == self.configured
                                                  or (refusal(result.settings, s.option) is None
                                                      and can_set(trainer, s.option)))]

    def _micro_batches(self, layout: dict[str, Any] | None) -> list[int]:
        """The micro batches that keep the global batch under ``layout`` and that the trainer runs, ascending: TRL's
        GRPO refuses a batch that holds no whole groups of num_generations (memory/method.py
        grpo_batch_refusal), at every stage."""
        w = self.written
        return [m for m in divisors(w.micro_batch) if w.batch.patch(m, layout) is not None
                and w.batch_refusal(m) is None]

    def may_recommend(self, option: Option) -> bool:
        """NVMe offload only where the NVMe space is given, the config already offloads there, or the cluster is
        one to provision (where the drive is named as hardware to add): a drive nobody declared is not a fix."""
        nvme = Device.NVME in (option.offload_optimizer, option.offload_param)
        return not nvme or self.provision or self.written.cluster.nvme is not None or option == self.configured

    # -- which fit -------------------------------------------------------------------------------
    def fitting(self) -> list[tuple[Change, StageEstimate]]:
        """Every fitting combination on the frontier: per layout, checkpointing level and option, the largest
        micro batch that fits. Layout changes (Ulysses, AutoTP) are searched wherever one could be recommended
        (ranking.policy_key): unless the configured run, or a single change at its rung or a faster one, fits
        without a layout. A layout is a change of its own, so it could then only lose: alone it keeps the
        configured rung and loses to a layout-free change there; with anything else it is a combination, and
        combinations come after single changes."""
        if self._fitting is None:
            found = [c for c in self._frontier(None) if self.may_recommend(c[0].option)]
            if any(steps(c) == 0 for c, _ in found):
                # the configured run fits: no offload it does not have (ranking.py LADDER, the second rule)
                found = [c for c in found if not adds_offload(c[0].option, self.configured)]
            rung = tier(self.configured)
            settled = any(steps(c) <= 1 and tier(c.option) <= rung for c, _ in found)
            # a larger degree of a layout that fits alone (the configured run with that layout) could only lose:
            # the same rung, a larger degree
            done: set[str] = set()
            for layout in self.layouts() if not settled else ():
                kind = next(iter(layout))
                if kind in done:
                    continue
                more = [c for c in self._frontier(layout) if self.may_recommend(c[0].option)]
                found += more
                if any(steps(c) == 1 for c, _ in more):
                    done.add(kind)
            self._fitting = found
        return self._fitting

    def _frontier(self, layout: dict[str, Any] | None) -> list[tuple[Change, StageEstimate]]:
        w = self.written
        sizes = self._micro_batches(layout)
        if not sizes:
            return []
        out: list[tuple[Change, StageEstimate]] = []
        settled: set[Option] = set()  # fits at the largest micro batch: a stronger level only costs

        def fits(option: Option, shape: TrainingShape, micro_batch: int) -> bool:
            return w.fits(w.change(option, shape, micro_batch, layout))

        for level in CHECKPOINTING_LEVELS[CHECKPOINTING_LEVELS.index(w.shape.activation_checkpointing):]:
            shape = replace(w.shape, activation_checkpointing=level)
            for option in self._options(shape, layout, sizes[-1]):
                if option in settled:
                    continue
                largest = largest_true(sizes, partial(fits, option, shape))
                if largest is None:
                    continue
                change = w.change(option, shape, largest, layout)
                stage = w.evaluate(change)
                assert stage is not None  # it fits (largest_true tested it)
                out.append((change, stage))
                if largest == sizes[-1]:
                    settled.add(option)
        return out

    def extremes(self) -> list[tuple[Change, StageEstimate]]:
        """Every option and layout at the least memory the run allows: full checkpointing, the smallest
        micro batch the batch keys allow (fitting or not: what binds when nothing fits)."""
        w = self.written
        full = replace(w.shape, activation_checkpointing=Checkpointing.FULL)
        out = []
        for layout in (None, *self.layouts()):
            sizes = self._micro_batches(layout)
            if not sizes:
                continue
            for option in self._options(full, layout, sizes[0]):
                change = w.change(option, full, sizes[0], layout)
                stage = w.evaluate(change)
                if stage is not None:
                    out.append((change, stage))
        return out

    # -- what the rules ask ------------------------------------------------------------------------
    def fastest_fitting_rung(self, among: Callable[[Option], bool]) -> StageEstimate | None:
        """The fastest rung of the ladder above the configured one (ranking.LADDER) that ``among`` admits, adds
        no offload, fits with the headroom and that the trainer runs, as configured otherwise: one change, the rung
        alone."""
        for option in faster_rungs(self.configured):
            if not among(option) or not self.may_recommend(option) or adds_offload(option, self.configured):
                continue
            found = self.written.evaluate(self.written.change(option))
            # a rung the trainer refuses stops before training whatever its memory (memory/method.py)
            if found is not None and found.comfortable and found.trainer_refusal is None:
                return found
        return None

    def lowest_fitting_lower_stage(self) -> StageEstimate | None:
        """The fastest rung at a lower stage than the configured one that fits, as configured otherwise: ZeRO-0,
        1 or 2, then ZeRO-1 or 2 keeping the optimizer offloaded (from ZeRO-3 with offload, the lower stage that
        keeps the optimizer's offload where none without it fits)."""
        return self.fastest_fitting_rung(lambda option: option.stage < self.configured.stage)

    def without_offload(self) -> StageEstimate | None:
        """The fastest rung with less offload than the configured one (each offload device kept or dropped, one
        dropped at least; the stage the configured one or lower) that fits, as configured otherwise: from ZeRO-3
        with both offloads, ZeRO-3 keeping the optimizer's offload alone, or ZeRO-2 keeping it, or no offload."""
        return self.fastest_fitting_rung(lambda option: less_offload(option, self.configured))

    def largest_fitting_micro_batch(self, limit: int = MICRO_BATCH_SEARCH_LIMIT) -> int | None:
        """The largest micro batch up to ``limit`` at the configured option that fits (memory grows with it)."""
        w = self.written

        def fits(micro_batch: int) -> bool:
            return w.fits(w.change(self.configured, micro_batch=micro_batch, free_batch=True))

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
        pairs = [(change, self.written.evaluate(change)) for change in self.checkpointing_changes()]
        return [(change, stage) for change, stage in pairs if stage is not None]

    def flash_attention_outcome(self) -> StageEstimate | None:
        """The configured option with FlashAttention (None when it is already on)."""
        shape = self.written.shape
        if shape.flash_attention:
            return None
        return self.written.evaluate(self.written.change(self.configured, replace(shape, flash_attention=True)))

    def sequence_parallel_outcome(self) -> Outcome | None:
        """The smallest Ulysses degree that fits at the configured option, shape and micro batch (None: none
        offered or fits): what splits one sample's activations without any other change."""
        for change in self.sequence_parallel_changes():
            found = self.written.outcome(change)
            if found is not None:
                return found
        return None
