"""Rules that need the Hugging Face Trainer's arguments (--training-args, or a launch command after --).

The Trainer syncs the DeepSpeed config with TrainingArguments (deepspeed/hf_fill.py, a transcription of
transformers' HfTrainerDeepSpeedConfig): "auto" is replaced, and every other value of a synced key must
equal the TrainingArguments value, or deepspeed_init raises "Please correct the following DeepSpeed config
values that mismatch TrainingArguments values" before the first step.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

from zeroadvisor.config import merge_patch as patch
from zeroadvisor.config.training_args import coerce
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context


def _shown(value: object) -> str:
    return json.dumps(value) if isinstance(value, (bool, list, type(None))) else repr(value) \
        if isinstance(value, str) else str(value)


# Projects whose training loop is not the Hugging Face Trainer, so transformers' deepspeed_init never compares the
# config with their arguments: OpenRLHF builds the DeepSpeed config from its own flags (openrlhf/utils/deepspeed/
# deepspeed.py get_ds_train_config @ v0.8.5: train_micro_batch_size_per_gpu and train_batch_size set, DeepSpeed
# deriving the accumulation from them).
OWN_LOOP_PROJECTS = frozenset({"openrlhf"})


def _mismatch(ctx: Context) -> Iterator[Hit]:
    args = coerce(getattr(ctx.options, "training", None))
    if args is None or not isinstance(ctx.data, dict) or args.project in OWN_LOOP_PROJECTS:
        return
    from zeroadvisor.deepspeed import hf_fill  # only with the Trainer's arguments (lint's start-up without them)

    result = hf_fill.fill(ctx.data, args, ctx.options.gpus)
    for found in result.mismatches:
        given = " and ".join(f"{args.label(name)}" for name in found.fields) or found.hf_key
        world = f" on {ctx.options.gpus} GPU(s)" if found.key == "train_batch_size" else ""
        yield Hit(found.pointer,
                  f"{found.key} is {_shown(found.ds_value)} but the Trainer's {found.hf_key} is "
                  f"{_shown(found.hf_value)}{world} (from {given}): transformers raises 'Please correct the "
                  f"following DeepSpeed config values that mismatch TrainingArguments values' at deepspeed_init; "
                  f"set it to \"auto\" (or to {_shown(found.hf_value)})",
                  fix=patch.at(found.pointer, hf_fill.AUTO))


TRAINER_MISMATCH = Rule(
    code="ZA310",
    name="trainer-mismatch",
    severity=Severity.ERROR,
    summary="A config value the Hugging Face Trainer checks differs from its TrainingArguments value.",
    explanation=(
        "Under the Hugging Face Trainer, train_micro_batch_size_per_gpu, gradient_accumulation_steps, "
        "train_batch_size (world size x micro batch x accumulation), gradient_clipping, the optimizer's lr, "
        "betas, eps and weight_decay, the scheduler's warmup_max_lr, total_num_steps and warmup_num_steps, "
        "and fp16/bf16 enabled must equal the TrainingArguments values (per_device_train_batch_size, "
        "max_grad_norm, learning_rate, adam_beta1/2, adam_epsilon, weight_decay, max_steps, warmup_steps, "
        "--fp16/--bf16). A different value makes deepspeed_init raise before training starts. Set the key to "
        "\"auto\" so the Trainer fills it, or to the same value. Needs the training arguments: "
        "--training-args FILE or the launch command after --. Not checked for OpenRLHF, whose own training loop "
        "builds the config from its flags (transformers' check never runs there)."
    ),
    check=_mismatch,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}', fails=True,
                options={"training": {"per_device_train_batch_size": 8}}),
        Example('{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}', fails=False,
                options={"training": {"per_device_train_batch_size": 8}}),
    ),
    source="transformers integrations/deepspeed.py HfTrainerDeepSpeedConfig.fill_match / trainer_config_finalize",
)

RULES = (TRAINER_MISMATCH,)
