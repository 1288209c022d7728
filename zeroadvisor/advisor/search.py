"""Search the changes that make a run fit, cheapest first, and express each as a merge patch.

The order is the expected throughput cost (ZeRO paper §7, field reports in DS#1635,
DS#6834): a ZeRO stage without offload, the lowest first (ZeRO-0/1/2 move the data-parallel
volume, 2Ψ per step; ZeRO-3 1.5x that), activation checkpointing (recompute), a smaller micro
batch with more accumulation (same global batch, smaller kernels), Ulysses sequence parallelism
when even one sample's activations do not fit (an all-to-all per attention layer), AutoTP tensor parallelism
when even ZeRO-3 at that micro batch does not fit for one layer's working set (all-reduces in every sharded
layer, within a node), optimizer offload to the CPU,
parameter offload to the CPU, and NVMe (steps 10x-50x slower in user reports). The first
candidate whose every phase fits with the headroom left free (GPU, and host RAM / NVMe when given) wins.

Every candidate is estimated as it will be written: on the config with the lint fixes and the
bucket tuning of large-buckets applied (``base``), and with that tuning again for the candidate's
own stage when its buffers call for it; the winner's patch also carries the lint fixes its change
makes necessary (e.g. zero_allow_untested_optimizer when ZeRO is switched on). So a second
``check --fix`` finds nothing more to change.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

from zeroadvisor.deepspeed import effective as dsconfig
from zeroadvisor.deepspeed import schema
from zeroadvisor.deepspeed.effective import AUTO, GAS, MBS, TBS
from zeroadvisor.fix import merge_patch as mp
from zeroadvisor.memory.estimate import Cluster, Estimate, StageEstimate, estimate
from zeroadvisor.memory.options import Option
from zeroadvisor.model.spec import ModelSpec, TrainingShape

NVME_PATH_PLACEHOLDER = "/local_nvme"

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
# Ulysses degrees the search tries, the smallest (least communication) first.
SEQUENCE_PARALLEL_DEGREES = (2, 4, 8)
SP_KEY = "sequence_parallel_size"
# What the config key alone does not do: DeepSpeed's batch arithmetic reads it (runtime/config.py), but the
# tokens are split only by an attention the training script wraps.
SP_SCRIPT_ACTION = ("and in the training script the attention wrapped in deepspeed.sequence.layer."
                    "DistributedAttention, or with the HF Trainer accelerate's ParallelismConfig(sp_backend="
                    "\"deepspeed\", sp_size={sp}) (DeepSpeed's UlyssesSPAttentionHF); the config key alone "
                    "splits nothing")
# AutoTP degrees the search tries, the smallest (fewest all-reduce participants, largest data degree) first.
TENSOR_PARALLEL_DEGREES = (2, 4, 8)
TP_KEY = "tensor_parallel"
# deepspeed/__init__.py initialize reads tensor_parallel.autotp_size (set_autotp_mode(training=True)), but the
# model is sharded only on DeepSpeed's AutoTP training path: transformers' deepspeed_init (integrations/
# deepspeed.py) calls deepspeed.tp_model_init when autotp_size > 1, and accelerate's Accelerator reads the key.
TP_SCRIPT_ACTION = ("and the training script on DeepSpeed's AutoTP training path: deepspeed.initialize with this "
                    "config (or deepspeed.tp_model_init first), or the HF Trainer / accelerate, which call "
                    "deepspeed.tp_model_init when tensor_parallel.autotp_size > 1; each group of {tp} GPUs shares "
                    "one micro batch, so the distinct samples per step become train_batch_size / {tp}")
# Lint fixes can enable others (a rename, then a value fix); a few rounds settle every real config.
LINT_ROUNDS = 3

COSTS = {
    "config-fixes": "none beyond the other fixes reported for this file (smaller communication buckets overlap "
                    "slightly less with compute)",
    "no-offload": "none: the optimizer step stays on the GPU, nothing crosses PCIe",
    "lower-stage": "less communication than ZeRO-3 (1x instead of 1.5x the data-parallel volume)",
    "other-stage": "the same communication volume: ZeRO-0, 1 and 2 all move 2Ψ per step (ZeRO paper §7)",
    "higher-stage": "ZeRO-3 moves 1.5x the data-parallel volume per step (ZeRO paper §7)",
    "checkpointing": "recomputes activations in the backward pass (full: about +33% compute; selective: a few %)",
    "micro-batch": "the same global batch in more, smaller steps (lower GPU efficiency)",
    "sequence-parallel": "all-to-alls of q, k, v and the attention output in every attention layer, 4Nh/P per link: "
                         "O(N/P) per GPU, constant when the sequence and the GPUs grow together (DeepSpeed-Ulysses, "
                         "arXiv:2309.14509); the same global batch in more accumulation steps",
    "tensor-parallel": "AutoTP all-reduces the activations of every sharded layer: 2 all-reduces per layer in forward "
                       "and 2 in backward over the intra-node link (Megatron-LM, arXiv:1909.08053 §3), so the "
                       "degree stays within a node; the data-parallel degree shrinks by the tensor degree",
    "offload-optimizer": "the optimizer step runs on the CPU and gradients/parameters cross PCIe every step "
                         "(users report steps several times slower)",
    "offload-param": "parameters cross PCIe in every forward and backward (steps 10x-50x slower in user reports)",
    "nvme": "optimizer state and parameters stream from NVMe every step (the slowest option)",
}

LintFixes = Callable[[dict], dict]


@dataclass(frozen=True, slots=True)
class Change:
    """One candidate: the option, shape and micro batch to run with (None: the micro batch stays)."""

    kind: str  # key of COSTS
    option: Option
    shape: TrainingShape
    micro_batch: int | None
    description: str
    # Merge patch of other config keys the change needs (sequence_parallel_size), estimated with it.
    config_patch: dict[str, Any] | None = None

    @property
    def cost(self) -> str:
        return COSTS[self.kind]

    @property
    def sequence_parallel(self) -> int | None:
        """The Ulysses degree the change sets (None: it leaves the layout)."""
        return (self.config_patch or {}).get(SP_KEY)

    @property
    def tensor_parallel(self) -> int | None:
        """The AutoTP degree the change sets (None: it leaves the layout)."""
        block = (self.config_patch or {}).get(TP_KEY)
        return block.get("autotp_size") if isinstance(block, dict) else None

    @property
    def in_training_script(self) -> bool:
        """Checkpointing and FlashAttention are set in the training script, not in ds_config."""
        return self.kind == "checkpointing"


@dataclass(frozen=True, slots=True)
class Outcome:
    change: Change
    stage: StageEstimate
    # Merge patch of the config as written, on top of the other findings' fixes; None: nothing to write.
    patch: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class BucketTuning:
    """Smaller reduce/allgather buckets for a stage whose buffers take a large share of the budget."""

    patch: dict[str, Any]
    buffers: int  # bytes per GPU before tuning
    target: int  # elements per bucket


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
    return option.offload_optimizer != "none" or option.offload_param != "none"


class Searcher:
    """Estimates candidate changes of one config as they will be written, cheapest first."""

    def __init__(self, config: dict | None, model: ModelSpec, shape: TrainingShape, cluster: Cluster,
                 accounting: str, written: Estimate, lint_fixes: LintFixes | None = None,
                 tune_buckets: bool = True):
        self.original = config if isinstance(config, dict) else {}
        self.model, self.shape, self.cluster, self.accounting = model, shape, cluster, accounting
        self.written = written
        self._lint_fixes = lint_fixes or (lambda data: {})
        self._tune = tune_buckets
        self._estimates: dict[tuple[str, TrainingShape], Estimate] = {}
        self.tuning = self.bucket_tuning(self.original, written.configured)
        fixed = self._lint_closure(self.original)
        self.base = mp.apply(fixed, self.tuning.patch) if self.tuning else fixed
        self.base_estimate = self._estimate(self.base, shape)
        current = self.base_estimate.configured
        self.configured = current.option if current is not None else Option(0)

    # -- estimating ------------------------------------------------------------------------------
    def _estimate(self, config: dict, shape: TrainingShape) -> Estimate:
        key = (repr(config), shape)
        if key not in self._estimates:
            self._estimates[key] = estimate(config, self.model, shape, self.cluster, self.accounting)
        return self._estimates[key]

    def _lint_closure(self, config: dict) -> dict:
        for _ in range(LINT_ROUNDS):
            fixed = mp.apply(config, self._lint_fixes(config))
            if _same(fixed, config):
                break
            config = fixed
        return config

    def bucket_tuning(self, config: dict, stage: StageEstimate | None, rewritten: bool = False,
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
        buffers = stage.per_gpu["buffers"]
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

    def evaluate(self, change: Change) -> StageEstimate | None:
        """The estimate of ``change`` with its bucket tuning; None where DeepSpeed does not run the option."""
        result = self._evaluate(change)
        return result[0] if result is not None else None

    def _evaluate(self, change: Change) -> tuple[StageEstimate, BucketTuning | None] | None:
        config = self.base if change.micro_batch is None else mp.apply(self.base, {MBS: change.micro_batch})
        if change.config_patch is not None:
            config = mp.apply(config, change.config_patch)
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

    def _tuned(self, config: dict, tuning: BucketTuning | None, change: Change) -> StageEstimate | None:
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
        stage, tuning = evaluated
        if change.in_training_script:
            return Outcome(change, stage, None)
        delta = mp.merge(self.option_patch(change.option) if change.option != self.configured else None,
                         self.micro_batch_patch(change.micro_batch) if change.micro_batch is not None else None,
                         change.config_patch,
                         tuning.patch if tuning is not None else None)
        final = self._lint_closure(mp.apply(self.base, delta))
        checked = _stage_of(self._estimate(final, change.shape), change.option)
        if checked is None or not checked.comfortable:
            return None  # a lint fix the change needs costs memory after all
        patch = _diff(self.base, final)
        if tuning is not None:
            change = replace(change, description=f"{change.description}, reduce/allgather buckets of "
                                                 f"{tuning.target:,} elements")
        return Outcome(change, checked, patch or None)

    # -- the search --------------------------------------------------------------------------------
    def cheapest_fit(self) -> Outcome | None:
        """The first change that fits, in order of expected throughput cost."""
        for change in self._stage_changes():
            found = self.outcome(change)
            if found is not None:
                return found
        for change in self.checkpointing_changes():
            found = self.outcome(change)
            if found is not None:
                return found
        found = self._smaller_micro_batch()
        if found is not None:
            return found
        for change in (*self.sequence_parallel_changes(), *self.tensor_parallel_changes(), *self._offload_changes(),
                       *self._last_resort()):
            found = self.outcome(change)
            if found is not None:
                return found
        return None

    def closest(self) -> tuple[Change, StageEstimate] | None:
        """The candidate with the smallest GPU total, for "what is missing and by how much"."""
        best: tuple[Change, StageEstimate] | None = None
        smallest = [self._change("micro-batch", option, micro_batch=1)
                    for option in self._micro_batch_options()] if self.current_micro_batch > 1 else []
        for change in (*self._stage_changes(), *self.checkpointing_changes(), *smallest, *self._offload_changes(),
                       *self._last_resort()):
            stage = self.evaluate(change)
            if stage is not None and (best is None or stage.per_gpu["total"] < best[1].per_gpu["total"]):
                best = (change, stage)
        return best

    def lowest_fitting_lower_stage(self) -> Outcome | None:
        """The lowest stage below the configured one that fits without offload."""
        for stage in range(0, self.configured.stage):
            found = self.outcome(self._change("lower-stage", Option(stage)))
            if found is not None:
                return found
        return None

    def without_offload(self) -> Outcome | None:
        """The configured stage without offload, if it fits."""
        return self.outcome(self._change("no-offload", Option(self.configured.stage)))

    def largest_fitting_micro_batch(self, limit: int = MICRO_BATCH_SEARCH_LIMIT) -> int | None:
        """The largest micro batch up to ``limit`` at the configured option that fits (memory grows with it)."""
        def fits(micro_batch: int) -> bool:
            return self._fits(self._change("micro-batch", self.configured, micro_batch=micro_batch))

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

    def flash_attention_outcome(self) -> StageEstimate | None:
        """The configured option with FlashAttention (None when it is already on)."""
        if self.shape.flash_attention:
            return None
        change = Change("checkpointing", self.configured, replace(self.shape, flash_attention=True), None,
                        "FlashAttention (in the training script, e.g. attn_implementation=\"flash_attention_2\")")
        return self.evaluate(change)

    # -- candidates ------------------------------------------------------------------------------
    @property
    def current_micro_batch(self) -> int:
        return self.base_estimate.settings.micro_batch

    def _kind(self, option: Option) -> str:
        if option == self.configured:
            return "config-fixes"
        if option.stage == self.configured.stage:
            return "no-offload"
        if option.stage == 3:
            return "higher-stage"
        return "lower-stage" if self.configured.stage == 3 else "other-stage"

    def _stage_changes(self) -> Iterator[Change]:
        """Each stage without offload, the lowest first, then the configured option as the fixes leave it."""
        for stage in range(4):
            yield self._change(self._kind(Option(stage)), Option(stage))
        if offloads(self.configured):
            yield self._change("config-fixes", self.configured)

    def checkpointing_changes(self) -> Iterator[Change]:
        levels = {"none": ("selective", "full"), "selective": ("full",), "full": ()}
        for level in levels[self.shape.activation_checkpointing]:
            yield Change("checkpointing", self.configured, replace(self.shape, activation_checkpointing=level), None,
                         f"{level} activation checkpointing (in the training script, e.g. "
                         "model.gradient_checkpointing_enable(); not a ds_config setting)")

    def _micro_batch_options(self) -> list[Option]:
        return [Option(stage) for stage in range(4)] + ([self.configured] if offloads(self.configured) else [])

    def _smaller_micro_batch(self) -> Outcome | None:
        """The largest smaller micro batch that fits at some option (the lowest stage at it first)."""
        current = self.current_micro_batch
        sizes = [m for m in divisors(current) if m < current and self.micro_batch_patch(m) is not None]
        best: tuple[int, Option] | None = None
        for option in self._micro_batch_options():
            fitting = _largest_true(sizes, lambda m: self._fits(self._change("micro-batch", option, micro_batch=m)))
            if fitting is not None and (best is None or fitting > best[0]):
                best = (fitting, option)
        return self.outcome(self._change("micro-batch", best[1], micro_batch=best[0])) if best else None

    def sequence_parallel_changes(self) -> Iterator[Change]:
        """Ulysses at each degree of SEQUENCE_PARALLEL_DEGREES, configured option and shape, when one sample's
        activations are what does not fit (micro batch 1 does not fit: below that a smaller micro batch splits
        activations without communication). The degree divides the data-parallel ranks (the Ulysses groups are
        carved from them, runtime/sequence_parallel/parallel_state_sp.py) and the attention and kv heads (the
        all-to-all scatters heads, sequence/layer.py _SeqAllToAll); no pipeline, whose batch world differs."""
        layout = self.base_estimate.parallel
        heads = self.model.num_attention_heads
        kv_heads = self.model.num_key_value_heads or heads
        if layout.sequence > 1 or layout.pipeline > 1 or not heads or not self.shape.sequence_length:
            return
        if self._fits(self._change("micro-batch", self.configured, micro_batch=1)):
            return
        for sp in SEQUENCE_PARALLEL_DEGREES:
            if layout.data % sp or heads % sp or kv_heads % sp or self.shape.sequence_length % sp:
                continue
            patch = self.sequence_parallel_patch(sp)
            if patch is None:
                continue
            yield Change("sequence-parallel", self.configured, self.shape, None,
                         f"Ulysses sequence parallel {sp} (sequence_parallel_size {sp} in ds_config, "
                         f"{SP_SCRIPT_ACTION.format(sp=sp)})", patch)

    def sequence_parallel_outcome(self) -> Outcome | None:
        """The smallest Ulysses degree that fits at the configured option (None: none offered or fits)."""
        for change in self.sequence_parallel_changes():
            found = self.outcome(change)
            if found is not None:
                return found
        return None

    def tensor_parallel_changes(self) -> Iterator[Change]:
        """AutoTP at each degree of TENSOR_PARALLEL_DEGREES, each stage without offload (the lowest first), when even
        ZeRO-3 without offload at the micro batch the search reaches (1 where the batch keys allow it) does not fit:
        then what is left is one layer's working set (the gathered parameters of the largest layer and that
        layer's activations), which only a split of the layers shrinks. The degree divides the GPUs per node (the
        all-reduces stay on NVLink), the attention and kv heads and the MLP width (auto_tp.py shards heads and
        columns evenly); no other parallel degree is set (their groups would have to be re-formed)."""
        layout = self.base_estimate.parallel
        heads = self.model.num_attention_heads
        kv_heads = self.model.num_key_value_heads or heads
        width = self.model.intermediate_size
        if not layout.trivial or not heads or not width or (isinstance(self.base.get(TP_KEY), dict)
                                                             and self.base[TP_KEY].get("autotp_size") == AUTO):
            return
        micro_batch = 1 if self.current_micro_batch > 1 and self.micro_batch_patch(1) is not None else None
        if self._fits(self._change("higher-stage", Option(3), micro_batch=micro_batch)):
            return
        per_node = self.cluster.gpus_per_node or self.cluster.gpus
        for tp in TENSOR_PARALLEL_DEGREES:
            if per_node % tp or self.cluster.gpus % tp or heads % tp or kv_heads % tp or width % tp:
                continue
            for stage in range(4):
                change = self._change("tensor-parallel", Option(stage), micro_batch=micro_batch)
                yield replace(change, description=f"AutoTP tensor parallel {tp} (tensor_parallel.autotp_size {tp} "
                                                  f"in ds_config, {TP_SCRIPT_ACTION.format(tp=tp)}), "
                                                  f"{change.description}",
                              config_patch={TP_KEY: {"autotp_size": tp}})

    def tensor_parallel_outcome(self) -> Outcome | None:
        """The smallest AutoTP degree (lowest stage) that fits (None: none offered or fits)."""
        for change in self.tensor_parallel_changes():
            found = self.outcome(change)
            if found is not None:
                return found
        return None

    def _offload_changes(self) -> Iterator[Change]:
        for stage in range(max(self.configured.stage, 1), 4):
            yield self._change("offload-optimizer", Option(stage, "cpu"))
        yield self._change("offload-param", Option(3, "cpu", "cpu"))
        yield self._change("nvme", Option(3, "nvme", "cpu"))
        yield self._change("nvme", Option(3, "nvme", "nvme"))

    def _last_resort(self) -> Iterator[Change]:
        full = replace(self.shape, activation_checkpointing="full")
        micro_batch = 1 if self.current_micro_batch > 1 and self.micro_batch_patch(1) is not None else None
        for option in (Option(3, "cpu"), Option(3, "cpu", "cpu"), Option(3, "nvme", "nvme")):
            kind = "nvme" if option.offload_optimizer == "nvme" else "offload-param"
            yield self._change(kind, option, full, micro_batch)

    def _change(self, kind: str, option: Option, shape: TrainingShape | None = None,
                micro_batch: int | None = None) -> Change:
        words = [option.words]
        if micro_batch is not None:
            patch = self.micro_batch_patch(micro_batch)
            words.append(f"micro batch {micro_batch}" + (f" with gradient accumulation {patch[GAS]}" if patch else ""))
        if shape is not None and shape.activation_checkpointing != self.shape.activation_checkpointing:
            words.append(f"{shape.activation_checkpointing} activation checkpointing (in the training script)")
        if kind == "config-fixes" and micro_batch is None:
            words = [f"the configured {', '.join(words)} with the other fixes reported for this file"]
        return Change(kind, option, shape or self.shape, micro_batch, ", ".join(words))

    # -- patches -----------------------------------------------------------------------------------
    def sequence_parallel_patch(self, sp: int) -> dict[str, Any] | None:
        """``sequence_parallel_size`` sp with the batch keys DeepSpeed's assertion then accepts. Its batch world is
        the GPUs / sp (runtime/config.py DeepSpeedConfig.__init__), so a written train_batch_size keeps the global
        batch with sp times the accumulation, and the micro batch is written so DeepSpeed does not derive a larger
        one. None where a batch key is "auto" (the integration fills it from its own world size)."""
        patch: dict[str, Any] = {SP_KEY: sp}
        if any(self.base.get(key) == AUTO for key in (TBS, MBS, GAS)):
            return None
        tbs = _count(self.base.get(TBS))
        if TBS not in self.base:
            return patch  # DeepSpeed derives train_batch_size from micro batch x accumulation x GPUs / sp
        world = dsconfig.data_parallel_size(mp.apply(self.base, patch), self.cluster.gpus)
        micro = self.current_micro_batch
        if tbs is None or not float(world).is_integer() or tbs % (micro * int(world)):
            return None
        return {**patch, MBS: micro, GAS: tbs // (micro * int(world))}

    def option_patch(self, option: Option) -> dict[str, Any]:
        """Merge patch that makes the base config run ``option`` (stage and offload devices)."""
        zero: dict[str, Any] = {"stage": option.stage}
        current = self.base.get("zero_optimization")
        current = current if isinstance(current, dict) else {}
        for which, device in (("offload_optimizer", option.offload_optimizer), ("offload_param", option.offload_param)):
            block = current.get(which)
            legacy = dsconfig.LEGACY_OFFLOAD[which]
            if device == "none":
                if block is not None:
                    zero[which] = None
                if legacy in current:
                    zero[legacy] = None
            else:
                existing = block.get("device") if isinstance(block, dict) else None
                if existing != device:
                    zero[which] = {"device": device, "pin_memory": True}
                    if device == "nvme":
                        zero[which]["nvme_path"] = NVME_PATH_PLACEHOLDER
                if legacy in current:
                    zero[legacy] = None
        if isinstance(self.base.get("zero_optimization"), bool):
            return {"zero_optimization": {k: v for k, v in zero.items() if v is not None}}
        if option.stage < 3:  # stage-3-only settings would do nothing (stage3-key-below-stage3)
            zero.update({key: None for key in current if key not in zero and schema.min_stage(key) == 3})
        return {"zero_optimization": zero}

    def micro_batch_patch(self, micro_batch: int) -> dict[str, Any] | None:
        """Smaller micro batch, same global batch: DeepSpeed asserts tbs == micro · accumulation · world
        (runtime/config.py _batch_assertion), so accumulation rises by the factor the micro batch falls."""
        tbs, mbs, gas = (_count(self.base.get(key)) for key in (TBS, MBS, GAS))
        world = dsconfig.data_parallel_size(self.base, self.cluster.gpus)
        if tbs is not None:
            if not float(world).is_integer() or tbs % (micro_batch * int(world)):
                return None
            return {MBS: micro_batch, GAS: tbs // (micro_batch * int(world))}
        current = self.current_micro_batch
        if mbs is None or current % micro_batch or (GAS in self.base and gas is None):
            return None  # "auto" or absent: an integration sets them and would contradict a written value
        return {MBS: micro_batch, GAS: (gas or 1) * (current // micro_batch)}


# --------------------------------------------------------------------------- helpers


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


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


def _at_most(value: Any, target: int) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value <= target


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1, 1.0 and true are different values in a config file."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _diff(source: dict, target: dict) -> dict[str, Any]:
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
