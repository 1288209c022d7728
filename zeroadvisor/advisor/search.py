"""Search the changes that make a run fit, cheapest first, and express each as a merge patch.

The order is the expected throughput cost (ZeRO paper §7, field reports in DS#1635,
DS#6834): a lower stage (ZeRO-0/1/2 move the data-parallel volume, 2Ψ per step), a higher
stage (ZeRO-3 moves 1.5x that), activation checkpointing (recompute), a smaller micro batch
with more accumulation (same global batch, smaller kernels), optimizer offload to the CPU,
parameter offload to the CPU, and NVMe (steps 10x-50x slower in user reports). The first
candidate whose estimate fits the usable GPU memory (and host RAM / NVMe, when given) wins.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterator

from zeroadvisor.fix import merge_patch as mp
from zeroadvisor.deepspeed import effective as dsconfig
from zeroadvisor.deepspeed import schema
from zeroadvisor.memory.estimate import Cluster, Estimate, StageEstimate, estimate
from zeroadvisor.memory.options import Option
from zeroadvisor.model.spec import ModelSpec, TrainingShape

MBS, GAS, TBS = "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size"
NVME_PATH_PLACEHOLDER = "/local_nvme"

# Relative communication volume per step (ZeRO paper §7.2-7.3): stages 0-2 all-reduce or
# reduce-scatter + all-gather 2Ψ; stage 3 gathers parameters in forward and backward, 3Ψ.
COMM_VOLUME = {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.5}

COSTS = {
    "lower-stage": "less communication than ZeRO-3 (1x instead of 1.5x the data-parallel volume)",
    "higher-stage": "ZeRO-3 moves 1.5x the data-parallel volume per step (ZeRO paper §7)",
    "checkpointing": "recomputes activations in the backward pass (full: about +33% compute; selective: a few %)",
    "micro-batch": "the same global batch in more, smaller steps (lower GPU efficiency)",
    "offload-optimizer": "the optimizer step runs on the CPU and gradients/parameters cross PCIe every step "
                         "(users report steps several times slower)",
    "offload-param": "parameters cross PCIe in every forward and backward (steps 10x-50x slower in user reports)",
    "nvme": "optimizer state and parameters stream from NVMe every step (the slowest option)",
}


@dataclass(frozen=True, slots=True)
class Change:
    """One candidate change: the option and shape to run with, and how to get there."""

    kind: str  # key of COSTS
    option: Option
    shape: TrainingShape
    micro_batch: int | None  # None: unchanged
    patch: dict[str, Any] | None  # merge patch for the config; None when the change is outside it
    description: str

    @property
    def cost(self) -> str:
        return COSTS[self.kind]


@dataclass(frozen=True, slots=True)
class Outcome:
    change: Change
    stage: StageEstimate


def _min_stage(key: str) -> int | None:
    node = schema.node("zero_optimization", key) or {}
    return node.get("x-min-stage")


class Searcher:
    """Estimates candidate changes of one config, re-estimating only when the shape changes."""

    def __init__(self, config: dict | None, model: ModelSpec, shape: TrainingShape, cluster: Cluster,
                 accounting: str, base: Estimate):
        self.config = config if isinstance(config, dict) else {}
        self.model, self.shape, self.cluster, self.accounting = model, shape, cluster, accounting
        self.base = base
        self._cache: dict[tuple, Estimate] = {}

    def evaluate(self, change: Change) -> StageEstimate | None:
        key = (change.shape, change.micro_batch)
        if key not in self._cache:
            config = self.config
            if change.micro_batch is not None:
                config = mp.apply(config, self.micro_batch_patch(change.micro_batch) or {})
                config = {**config, MBS: change.micro_batch}
            self._cache[key] = estimate(config, self.model, change.shape, self.cluster, self.accounting)
        try:
            return self._cache[key].stage(change.option.stage, change.option.offload_optimizer,
                                          change.option.offload_param)
        except KeyError:
            return None

    def first_fit(self, changes: Iterator[Change]) -> Outcome | None:
        for change in changes:
            result = self.evaluate(change)
            if result is not None and result.fits:
                return Outcome(change, result)
        return None

    def closest(self, changes: Iterator[Change]) -> Outcome | None:
        """The candidate with the smallest GPU total, for "what is missing and by how much"."""
        best: Outcome | None = None
        for change in changes:
            result = self.evaluate(change)
            if result is not None and (best is None or result.per_gpu["total"] < best.stage.per_gpu["total"]):
                best = Outcome(change, result)
        return best

    # -- candidate changes, cheapest first ---------------------------------------------------
    @property
    def configured(self) -> Option:
        current = self.base.configured
        return current.option if current is not None else Option(0)

    def option_patch(self, option: Option) -> dict[str, Any]:
        """Merge patch that makes the config run ``option`` (stage and offload devices)."""
        zero: dict[str, Any] = {"stage": option.stage}
        current = self.config.get("zero_optimization")
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
        if isinstance(self.config.get("zero_optimization"), bool):
            return {"zero_optimization": {k: v for k, v in zero.items() if v is not None}}
        if option.stage < 3:  # stage-3-only settings would do nothing (stage3-key-below-stage3)
            zero.update({key: None for key in current if key not in zero and _min_stage(key) == 3})
        return {"zero_optimization": zero}

    def micro_batch_patch(self, micro_batch: int) -> dict[str, Any] | None:
        """Smaller micro batch, same global batch: accumulation rises by the same factor."""
        current = self.base.settings.micro_batch
        mbs, gas = self.config.get(MBS), self.config.get(GAS, 1)
        if not isinstance(mbs, int) or isinstance(mbs, bool) or current % micro_batch:
            return None
        if not isinstance(gas, int) or isinstance(gas, bool):
            return None
        return {MBS: micro_batch, GAS: gas * (current // micro_batch)}

    def changes_that_fit(self) -> Iterator[Change]:
        cfg, shape = self.configured, self.shape
        for stage in range(0, cfg.stage):  # the lowest stage that fits first
            yield self._option_change("lower-stage", Option(stage))
        for stage in range(cfg.stage + 1, 4):
            yield self._option_change("higher-stage", Option(stage))
        yield from self.checkpointing_changes(cfg)
        yield from self._smaller_micro_batches(cfg, shape)
        for stage in range(max(cfg.stage, 1), 4):
            yield self._option_change("offload-optimizer", Option(stage, "cpu"))
        yield self._option_change("offload-param", Option(3, "cpu", "cpu"))
        yield self._option_change("nvme", Option(3, "nvme", "cpu"))
        yield self._option_change("nvme", Option(3, "nvme", "nvme"))
        yield from self._last_resort()

    def _option_change(self, kind: str, option: Option, shape: TrainingShape | None = None,
                       micro_batch: int | None = None) -> Change:
        patch = self.option_patch(option)
        words = [f"ZeRO stage {option.stage}"]
        if option.offload_optimizer != "none":
            words.append(f"optimizer offload to {option.offload_optimizer.upper()}")
        if option.offload_param != "none":
            words.append(f"parameter offload to {option.offload_param.upper()}")
        if micro_batch is not None:
            mb_patch = self.micro_batch_patch(micro_batch)
            patch = mp.merge(patch, mb_patch) if mb_patch is not None else None
            words.append(f"micro batch {micro_batch}")
        if shape is not None and shape.activation_checkpointing != self.shape.activation_checkpointing:
            words.append(f"{shape.activation_checkpointing} activation checkpointing")
        return Change(kind, option, shape or self.shape, micro_batch, patch, ", ".join(words))

    def checkpointing_changes(self, cfg: Option) -> Iterator[Change]:
        levels = {"none": ("selective", "full"), "selective": ("full",), "full": ()}
        for level in levels[self.shape.activation_checkpointing]:
            shape = replace(self.shape, activation_checkpointing=level)
            yield Change("checkpointing", cfg, shape, None, None,
                         f"{level} activation checkpointing (in the training script, e.g. "
                         "model.gradient_checkpointing_enable(); not a ds_config setting)")

    def _smaller_micro_batches(self, cfg: Option, shape: TrainingShape) -> Iterator[Change]:
        current = self.base.settings.micro_batch
        for micro_batch in sorted((m for m in range(1, current) if current % m == 0), reverse=True):
            patch = self.micro_batch_patch(micro_batch)
            yield Change("micro-batch", cfg, shape, micro_batch, patch,
                         f"micro batch {micro_batch} with {current // micro_batch}x the gradient accumulation")

    def _last_resort(self) -> Iterator[Change]:
        full = replace(self.shape, activation_checkpointing="full")
        for option in (Option(3, "cpu"), Option(3, "cpu", "cpu"), Option(3, "nvme", "nvme")):
            yield self._option_change("nvme" if option.offload_optimizer == "nvme" else "offload-param",
                                      option, full, 1 if self.base.settings.micro_batch > 1 else None)

    def lowest_fitting_lower_stage(self) -> Outcome | None:
        """The lowest stage below the configured one that fits without offload."""
        return self.first_fit(self._option_change("lower-stage", Option(stage)) for stage in range(0, self.configured.stage))

    def fits_with_micro_batch(self, micro_batch: int) -> bool:
        result = self.evaluate(Change("micro-batch", self.configured, self.shape, micro_batch, None, ""))
        return bool(result is not None and result.fits)

    def largest_fitting_micro_batch(self, limit: int = 4096) -> int | None:
        """The largest micro batch at the configured option that fits (memory grows with it)."""
        if not self.fits_with_micro_batch(1):
            return None
        low, high = 1, 2
        while high <= limit and self.fits_with_micro_batch(high):
            low, high = high, high * 2
        high = min(high, limit + 1)
        while high - low > 1:  # invariant: low fits, high does not (or is past the limit)
            middle = (low + high) // 2
            low, high = (middle, high) if self.fits_with_micro_batch(middle) else (low, middle)
        return low
