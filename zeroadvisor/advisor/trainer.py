"""The run under the Hugging Face Trainer: the config DeepSpeed gets ("auto" filled from the Trainer's arguments, the
precision section Accelerate adds) and the micro batch its dataloader feeds. check and estimate both read a config
this way when a training arguments file or a launch command gives the Trainer's arguments."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zeroadvisor.config.source import Document
    from zeroadvisor.config.training_args import TrainingArgs
    from zeroadvisor.model.spec import TrainingShape


def trainer_filled(document: Document, training: TrainingArgs, world_size: int | None,
                   hidden_size: int | None) -> Document:
    """``document`` with the data DeepSpeed gets under the Trainer: "auto" filled from ``training`` as
    transformers' HfTrainerDeepSpeedConfig does, then the precision section Accelerate adds for --fp16/--bf16
    (deepspeed/hf_fill.py). Positions stay those of the file; mismatches are left for rule ZA310."""
    from zeroadvisor.deepspeed import hf_fill

    if not isinstance(document.data, dict):  # only a mapping has "auto" keys to fill
        return document
    filled = hf_fill.fill(document.data, training, world_size, hidden_size)
    return replace(document, data=hf_fill.accelerate_precision(filled.config, training))


def trainer_shape(data: dict[str, Any], shape: TrainingShape, training: TrainingArgs) -> TrainingShape:
    """The micro batch the Trainer's dataloader feeds (per_device_train_batch_size) where the config names
    no batch size (where it does, the filled config decides and ZA310 reports a difference)."""
    from zeroadvisor.deepspeed.effective import MBS, TBS

    if shape.micro_batch_size is not None or MBS in data or TBS in data:
        return shape
    return replace(shape, micro_batch_size=training.get("per_device_train_batch_size"))
