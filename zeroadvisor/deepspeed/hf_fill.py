"""The DeepSpeed config as the Hugging Face Trainer hands it to DeepSpeed: "auto" filled from TrainingArguments.

A transcription of transformers 5.24 integrations/deepspeed.py HfTrainerDeepSpeedConfig:
``trainer_config_process`` (run when TrainingArguments is created) and ``trainer_config_finalize`` (run by
deepspeed_init once the model and the step count are known). Each ``fill_match`` replaces "auto" with the
TrainingArguments value and, where the value is not "auto", records a mismatch when it differs (Python
``!=``, so 1 and 1.0 and True agree); finalize raises ValueError listing every mismatch. :data:`FILLS`
is that sequence as data; the hidden-size formulas come from the schema (``x-auto-fill``, one source with
the memory model). tests/oracle/test_hf_fill_oracle.py compares :func:`fill` with transformers itself.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from zeroadvisor.config.training_args import TrainingArgs
from zeroadvisor.deepspeed import schema
from zeroadvisor.jsontypes import JSONObject, JSONValue

AUTO = "auto"


@dataclass(frozen=True)
class Fill:
    """One ``fill_match`` call: the DeepSpeed key, the TrainingArguments value, the name transformers gives
    it in the mismatch message, whether a differing value is a mismatch."""

    key: str  # dotted, as transformers names it
    value: Callable[[TrainingArgs, int], JSONValue]  # (args, world size) -> the value
    hf_key: str
    must_match: bool = True
    fields: tuple[str, ...] = ()  # the TrainingArguments fields the value comes from

    @property
    def pointer(self) -> str:
        return "/" + self.key.replace(".", "/")


def _get(name: str) -> Callable[[TrainingArgs, int], JSONValue]:
    return lambda args, world: args.get(name)


# trainer_config_process, in its order.
FILLS: tuple[Fill, ...] = (
    Fill("train_micro_batch_size_per_gpu", _get("per_device_train_batch_size"), "per_device_train_batch_size",
         fields=("per_device_train_batch_size",)),
    Fill("gradient_accumulation_steps", _get("gradient_accumulation_steps"), "gradient_accumulation_steps",
         fields=("gradient_accumulation_steps",)),
    # train_batch_size = world_size * train_micro_batch_size_per_gpu * gradient_accumulation_steps
    Fill("train_batch_size",
         lambda args, world: world * args.get("per_device_train_batch_size") * args.get("gradient_accumulation_steps"),
         "train_batch_size (calculated)",
         fields=("per_device_train_batch_size", "gradient_accumulation_steps")),
    Fill("gradient_clipping", _get("max_grad_norm"), "max_grad_norm", fields=("max_grad_norm",)),
    Fill("optimizer.params.lr", _get("learning_rate"), "learning_rate", fields=("learning_rate",)),
    Fill("optimizer.params.betas", lambda args, world: [args.get("adam_beta1"), args.get("adam_beta2")],
         "adam_beta1+adam_beta2", fields=("adam_beta1", "adam_beta2")),
    Fill("optimizer.params.eps", _get("adam_epsilon"), "adam_epsilon", fields=("adam_epsilon",)),
    Fill("optimizer.params.weight_decay", _get("weight_decay"), "weight_decay", fields=("weight_decay",)),
    Fill("scheduler.params.warmup_min_lr", lambda args, world: 0, "", must_match=False),  # not a trainer arg
    Fill("scheduler.params.warmup_max_lr", _get("learning_rate"), "learning_rate", fields=("learning_rate",)),
    Fill("fp16.enabled", lambda args, world: args.get("fp16") or args.get("fp16_full_eval"), "fp16|fp16_full_eval",
         fields=("fp16",)),
    Fill("bf16.enabled", lambda args, world: args.get("bf16") or args.get("bf16_full_eval"), "bf16|bf16_full_eval",
         fields=("bf16",)),
)
# With auto_find_batch_size these two are filled but never a mismatch (trainer_config_process's argument).
_AUTO_FIND = ("train_micro_batch_size_per_gpu", "train_batch_size")
# trainer_config_finalize: the keys filled from the model's hidden size (fill_only).
HIDDEN_SIZE_KEYS = ("zero_optimization.reduce_bucket_size", "zero_optimization.stage3_prefetch_bucket_size",
                    "zero_optimization.stage3_param_persistence_threshold")
_STAGE3_ONLY = HIDDEN_SIZE_KEYS[1:]  # filled only when is_zero3()


@dataclass(frozen=True)
class Mismatch:
    """A value transformers would reject: ``- ds {key}={ds_value} vs hf {hf_key}={hf_value}``."""

    key: str
    ds_value: JSONValue
    hf_key: str
    hf_value: JSONValue
    fields: tuple[str, ...] = ()

    @property
    def pointer(self) -> str:
        return "/" + self.key.replace(".", "/")

    def transformers_line(self) -> str:
        """The line transformers prints for it (its f-string formatting of both values)."""
        return f"- ds {self.key}={self.ds_value} vs hf {self.hf_key}={self.hf_value}"


@dataclass
class Filled:
    config: JSONObject
    filled: list[str] = field(default_factory=list)  # dotted keys whose "auto" was replaced
    mismatches: list[Mismatch] = field(default_factory=list)
    unfilled: list[str] = field(default_factory=list)  # "auto" keys finalize needs what is not known
    notes: list[str] = field(default_factory=list)


def fill(config: JSONObject, args: TrainingArgs, world_size: int | None, hidden_size: int | None = None,
         num_training_steps: int | None = None) -> Filled:
    """The config after trainer_config_process and (where its inputs are known) trainer_config_finalize.

    ``world_size`` None: train_batch_size is neither filled nor checked (it depends on it). ``hidden_size``
    None: the hidden-size "auto" keys stay "auto". ``num_training_steps`` defaults to ``max_steps`` when
    that is positive (the Trainer's own step count then); otherwise the scheduler's step keys stay "auto".
    """
    out = Filled(copy.deepcopy(config))
    auto_find = bool(args.get("auto_find_batch_size"))
    for step in FILLS:
        if step.key == "train_batch_size" and world_size is None:
            if _node(out.config, step.key)[1] == AUTO:
                out.unfilled.append(step.key)
            continue
        must_match = step.must_match and not (auto_find and step.key in _AUTO_FIND)
        _fill_match(out, step.key, step.value(args, world_size or 1), step.hf_key, must_match, step.fields)
    if args.get("save_on_each_node"):
        # deepspeed uses shared storage by default; save_on_each_node overrides it
        checkpoint = out.config.get("checkpoint", {})
        out.config["checkpoint"] = checkpoint
        if not isinstance(checkpoint, dict):  # transformers' item assignment fails the same way
            raise TypeError(f"'{type(checkpoint).__name__}' object does not support item assignment")
        checkpoint["use_node_local_storage"] = args.get("save_on_each_node")
    _finalize(out, args, hidden_size, num_training_steps)
    return out


def _finalize(out: Filled, args: TrainingArgs, hidden_size: int | None, num_training_steps: int | None) -> None:
    auto_keys = [key for key in HIDDEN_SIZE_KEYS if _node(out.config, key)[1] == AUTO]
    if auto_keys and hidden_size is None:
        out.unfilled.extend(auto_keys)
    elif auto_keys and hidden_size is not None:
        zero3 = _node(out.config, "zero_optimization.stage")[1] == 3  # accelerate's is_zero3: _stage == 3
        for key in HIDDEN_SIZE_KEYS:
            if key in _STAGE3_ONLY and not zero3:
                continue
            rule = schema.auto_fill(*key.split("."))
            if rule is None:  # HIDDEN_SIZE_KEYS are the schema's hidden-size fills (tests/test_training_args.py)
                raise LookupError(f"the schema has no auto fill for {key}")
            _fill_match(out, key, rule.value(hidden_size), "", False)
    steps = num_training_steps
    max_steps = args.get("max_steps")
    if steps is None and isinstance(max_steps, int) and max_steps > 0:
        steps = max_steps
    if steps is None:
        for key in ("scheduler.params.total_num_steps", "scheduler.params.warmup_num_steps"):
            if _node(out.config, key)[1] == AUTO:
                out.unfilled.append(key)
        return
    _fill_match(out, "scheduler.params.total_num_steps", steps, "num_training_steps (calculated)", True, ("max_steps",))
    # deepspeed>=0.19.6 rejects a non-positive warmup_num_steps: transformers keeps it at least 1
    _fill_match(out, "scheduler.params.warmup_num_steps", max(1, warmup_steps(args, steps)), "warmup_steps", True,
                ("warmup_steps",))


def warmup_steps(args: TrainingArgs, num_training_steps: int) -> int:
    """TrainingArguments.get_warmup_steps: whole steps when >= 1, else a ratio of the training steps."""
    value = args.get("warmup_steps")
    return int(value) if value >= 1 else math.ceil(num_training_steps * value)


def _node(config: JSONValue, key: str) -> tuple[JSONObject | None, JSONValue]:
    """(the section holding the key's last part, its value): accelerate HfDeepSpeedConfig.find_config_node +
    get_value. A section that is not a mapping ends the walk (transformers would fail there; lint reports it)."""
    nodes = key.split(".")
    last = nodes.pop()
    for name in nodes:
        config = config.get(name) if isinstance(config, dict) else None
        if config is None:
            return None, None
    if not isinstance(config, dict):
        return None, None
    return config, config.get(last)


def _fill_match(out: Filled, key: str, hf_value: JSONValue, hf_key: str, must_match: bool,
                fields: tuple[str, ...] = ()) -> None:
    section, value = _node(out.config, key)
    if section is None:
        return
    last = key.rsplit(".", 1)[-1]
    if isinstance(value, str) and value == AUTO:
        section[last] = hf_value
        out.filled.append(key)
        return
    if not must_match:
        return
    if value is not None and _differs(value, hf_value):
        out.mismatches.append(Mismatch(key, value, hf_key, hf_value, fields))


def _differs(ds_value: JSONValue, hf_value: JSONValue) -> bool:
    """Python's ``ds_val != hf_val``, as transformers compares (a DeepSpeed value of another type that
    cannot be compared is simply unequal)."""
    try:
        return bool(ds_value != hf_value)
    except (TypeError, ValueError):  # pragma: no cover - JSON values always compare
        return True


def accelerate_precision(config: JSONObject, args: TrainingArgs) -> JSONObject:
    """The config after Accelerate's DeepSpeedPlugin.set_mixed_precision, which the Trainer's Accelerator
    calls with its mixed precision (accelerate state.py AcceleratorState; utils/dataclasses.py): --fp16 adds
    ``fp16: {enabled: true, auto_cast: true}`` and --bf16 adds ``bf16: {enabled: true}`` where the config has
    no such section. (Runs after :func:`fill`; not part of transformers' own fill.)"""
    # TrainingArguments.__post_init__: mixed_precision "fp16" if fp16, elif bf16 "bf16"
    precision = "fp16" if args.get("fp16") else "bf16" if args.get("bf16") else None
    if precision is None or precision in config:
        return config
    out = dict(config)
    out[precision] = {"enabled": True, "auto_cast": True} if precision == "fp16" else {"enabled": True}
    return out
