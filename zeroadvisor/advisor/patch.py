"""The merge patch a candidate writes: its stage and offloads, its batch keys, its bucket sizes and the lint fixes
it makes necessary, each a plain function of the config it is written on (RFC 7396 merge patches).

What a change needs outside the config is an action (advisor/change.py); which change to write is the search's
(advisor/candidates.py) and the ranking's (advisor/ranking.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zeroadvisor.advisor.change import NVME_PATH_PLACEHOLDER, SP_KEY, Change
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.deepspeed import effective as dsconfig
from zeroadvisor.deepspeed import schema
from zeroadvisor.deepspeed.effective import AUTO, GAS, MBS
from zeroadvisor.deepspeed.settings import DeepSpeedSettings
from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.memory.estimate import StageEstimate
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.step_temporaries import BOUNDARY_NORM_KEY
from zeroadvisor.memory.step_temporaries import KEY as STEP_TEMPORARY
from zeroadvisor.model.spec import ModelSpec
from zeroadvisor.vocab import Device

# Buffers above this share of the usable memory are worth tuning (DS#1302: 5e8 buckets made
# ZeRO-2 larger than ZeRO-1 on BERT-large; DS#3338: smaller buckets, larger batch).
BUCKET_SHARE = 0.05
BUCKET_KEYS = ("reduce_bucket_size", "allgather_bucket_size")
# Bucket size when the hidden size is unknown: 2e8 elements, the value of DeepSpeed's own ZeRO
# tutorial configs (docs/_tutorials/zero.md), 2.5x below the 5e8 default.
BUCKET_FALLBACK = 200_000_000
# Lint fixes can enable others (a rename, then a value fix); a few rounds settle every real config.
LINT_ROUNDS = 3

# (data as it would be written, GPUs) -> the lint fixes proposed for it
LintFixes = Callable[[dict[str, Any], int], dict[str, Any]]

# buffers no bucket size shrinks: the optimizer step's temporaries, the offload boundary's norm copy
NOT_BUCKETS = frozenset({STEP_TEMPORARY, BOUNDARY_NORM_KEY})


@dataclass(frozen=True, slots=True)
class Outcome:
    """A change as it will be written: the change, its estimate on the written config, and the patch."""

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

    @property
    def keys(self) -> tuple[str, ...]:
        """The config keys it writes, dotted and sorted ("zero_optimization.reduce_bucket_size")."""
        return tuple(sorted(f"{block}.{key}" for block, keys in self.patch.items() for key in keys))


def bucket_target(model: ModelSpec) -> int:
    """What the Hugging Face integration writes for reduce_bucket_size "auto" (schema x-auto-fill)."""
    fill = schema.auto_fill("zero_optimization", "reduce_bucket_size")
    h = model.hidden_size
    return fill.value(h) if fill is not None and h else BUCKET_FALLBACK


def bucket_tuning(config: dict[str, Any], stage: StageEstimate | None, budget: int | None, target: int,
                  rewritten: bool = False, needed: bool = False) -> BucketTuning | None:
    """The bucket sizes large-buckets proposes for ``stage`` of ``config`` on ``budget`` usable bytes per GPU,
    ``target`` elements each (None: nothing to tune).

    ``rewritten``: the option patch writes the zero_optimization object anew (another stage), so a
    legacy boolean form there does not stop the tuning. ``needed``: the buckets are what keeps the
    stage from fitting, so they are tuned below BUCKET_SHARE too."""
    zero = config.get("zero_optimization", {}) if isinstance(config, dict) else None
    if isinstance(zero, bool) and rewritten:
        zero = {}
    if stage is None or stage.option.stage == 0 or not isinstance(zero, dict):
        return None
    # the communication buckets: the buffers row less the optimizer step's temporaries (no bucket shrinks those)
    buffers = stage.per_gpu["buffers"] - sum(t.nbytes for t in stage.terms if t.key in NOT_BUCKETS)
    if budget is None or (buffers < BUCKET_SHARE * budget and not needed):
        return None
    patch = {key: target for key in BUCKET_KEYS if zero.get(key) != AUTO and not at_most(zero.get(key), target)}
    return BucketTuning({"zero_optimization": patch}, buffers, target) if patch else None


def lint_closure(config: dict[str, Any], lint_fixes: LintFixes, gpus: int) -> dict[str, Any]:
    """``config`` with the lint fixes applied until none is left (at most LINT_ROUNDS rounds)."""
    for _ in range(LINT_ROUNDS):
        fixed = mp.apply(config, lint_fixes(config, gpus))
        if same(fixed, config):
            break
        config = fixed
    return config


def option_patch(base: dict[str, Any], option: Option) -> dict[str, Any]:
    """Merge patch that makes ``base`` run ``option`` (stage and offload devices). An NVMe offload keeps an
    nvme_path the config has (in either block), else writes NVME_PATH_PLACEHOLDER, which an action asks to
    point at a local NVMe mount."""
    zero: dict[str, Any] = {"stage": option.stage}
    current = base.get("zero_optimization")
    current = current if isinstance(current, dict) else {}
    known = nvme_path(base, any_device=True)
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
    if isinstance(base.get("zero_optimization"), bool):
        return {"zero_optimization": {k: v for k, v in zero.items() if v is not None}}
    if option.stage < 3:  # stage-3-only settings would do nothing (stage3-key-below-stage3)
        zero.update({key: None for key in current if key not in zero and schema.min_stage(key) == 3})
    return {"zero_optimization": zero}


@dataclass(frozen=True, slots=True)
class BatchKeys:
    """The batch keys of one config on one cluster: what a change of micro batch or layout writes to keep the
    global batch."""

    deepspeed: DeepSpeedSettings  # what DeepSpeed reads of the config (its batch counts and batch world)
    gpus: int
    micro_batch: int  # the configured micro batch, as the estimate resolved it
    # "auto" batch keys the HF Trainer fills from its arguments: a micro batch change is made there
    trainer: bool

    def patch(self, micro_batch: int, layout: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The batch keys for ``micro_batch`` under ``layout`` at the same global batch ({}: none to write; None:
        not possible). DeepSpeed asserts tbs == micro · accumulation · world (runtime/config.py
        _batch_assertion), its world the GPUs / sequence_parallel_size (DeepSpeedConfig.__init__), so accumulation
        rises by the factor the micro batch or the world falls. Without train_batch_size DeepSpeed derives it
        from the micro batch, accumulation and world, so the same factors keep it."""
        sp = (layout or {}).get(SP_KEY)
        current = self.micro_batch
        if micro_batch == current and not sp:
            return {}
        batch = self.deepspeed.batch
        tbs, mbs, gas = batch.counts
        if (sp and batch.auto and not self.trainer) or (self.trainer and not self._trainer_divides(micro_batch)):
            return None
        if self.trainer:  # the Trainer's arguments change (an action, sp times the accumulation under Ulysses),
            return {}     # not the config's "auto" keys
        if tbs is not None:  # the layout's sequence_parallel_size, else the base's
            return self._train_batch_patch(tbs, micro_batch, sp)
        if mbs is None or current % micro_batch or (GAS in batch.present and gas is None):
            return None  # "auto" or absent: an integration sets them and would contradict a written value
        # sp GPUs share one sample's tokens: sp times the accumulation keeps the samples per step
        return {MBS: micro_batch, GAS: (gas or 1) * (current // micro_batch) * (sp or 1)}

    def smaller(self, micro_batch: int) -> dict[str, Any] | None:
        """The batch keys for a smaller micro batch at the same global batch (None: not possible)."""
        found = self.patch(micro_batch)
        return found if found != {} else None

    def _train_batch_patch(self, tbs: int, micro_batch: int, sp: int | None) -> dict[str, Any] | None:
        """patch with train_batch_size written: the accumulation that keeps it on the batch world."""
        world = self.gpus / sp if sp else self.deepspeed.batch_world(self.gpus)
        if not float(world).is_integer() or tbs % (micro_batch * int(world)):
            return None
        return {MBS: micro_batch, GAS: tbs // (micro_batch * int(world))}

    def _trainer_divides(self, micro_batch: int) -> bool:
        """The Trainer keeps the global batch at ``micro_batch``: it divides the configured one, on whole ranks."""
        world = self.deepspeed.batch_world(self.gpus)
        return self.micro_batch % micro_batch == 0 and float(world).is_integer()


def nvme_path(config: dict[str, Any], any_device: bool = False) -> str | None:
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


def at_most(value: Any, target: int) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value <= target


def same(a: Any, b: Any) -> bool:
    """JSON equality: 1, 1.0 and true are different values in a config file."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def diff(source: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns ``source`` into ``target`` (RFC 7396)."""
    patch: dict[str, Any] = {key: None for key in source if key not in target}
    for key, value in target.items():
        old = source.get(key, diff)
        if old is not diff and same(old, value):
            continue
        if isinstance(value, dict) and isinstance(old, dict):
            patch[key] = diff(old, value)
        else:
            patch[key] = value
    return patch


def written_patch(original: dict[str, Any], base: dict[str, Any], final: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that writes ``final`` on ``original`` (the config as given), so a finding's fix is the whole
    run it was priced on: the lint fixes and bucket sizes the search started from (``base``) as well as the
    change. It is the base's fixes then the change, so a key a lint fix adds and the change drops is written as a
    deletion (``--fix`` merges the lint findings' own fixes under it); where that composition does not give
    ``final`` exactly (a merge patch cannot say "replace this object"), the plain difference of the two configs."""
    composed = mp.merge(diff(original, base), diff(base, final))
    return composed if same(mp.apply(original, composed), final) else diff(original, final)


def shared_writes(first: JSONObject, second: JSONObject, prefix: str = "") -> list[tuple[str, bool]]:
    """The keys both merge patches write to the same value, dotted ("zero_optimization.stage"), each with whether
    it deletes the key: what of ``first`` (the lint fixes) ``second`` (a fix) still writes as ``first`` does."""
    out: list[tuple[str, bool]] = []
    for key, value in first.items():
        if key not in second:
            continue
        other, path = second[key], f"{prefix}{key}"
        if isinstance(value, dict) and value and isinstance(other, dict):
            out += shared_writes(value, other, f"{path}.")
        elif same(value, other):
            out.append((path, value is None))
    return out


def renamed_keys(source: JSONObject, target: JSONObject, prefix: str = "") -> dict[str, str]:
    """Keys of ``source`` that ``target`` holds under another name with the same value (a lint fix's rename of a
    misspelt key), dotted: {"zero_optimisation": "zero_optimization"}."""
    out: dict[str, str] = {}
    added = [key for key in target if key not in source]
    for key, value in source.items():
        if key in target:
            nested = target[key]
            if isinstance(value, dict) and isinstance(nested, dict):
                out.update(renamed_keys(value, nested, f"{prefix}{key}."))
            continue
        new = next((other for other in added if same(target[other], value)), None)
        if new is not None:
            out[f"{prefix}{key}"] = f"{prefix}{new}"
    return out


def shown_path(path: str) -> str:
    """A dotted key path from the user's file as a message shows it: as written where every character prints, else
    its repr (a key with a newline, a bidi control or a no-break space is data, not layout)."""
    return path if path.isprintable() else repr(path)


def written_buckets(patch: JSONObject | None) -> int | None:
    """The reduce/allgather bucket elements a patch writes (None: it writes neither)."""
    zero = (patch or {}).get("zero_optimization")
    if not isinstance(zero, dict):
        return None
    sizes = [size for size in (zero.get(key) for key in BUCKET_KEYS) if isinstance(size, int)
             and not isinstance(size, bool)]
    return max(sizes) if sizes else None
