"""The Hugging Face Trainer's inputs: a training arguments file (--training-args) and a launch command
(--launch, or the words after ``--``), read once into :class:`TrainerInputs`.

What they give besides the Trainer's arguments (the config path, the world size, the model, the sequence
length, checkpointing, the launcher) fills only what flags, keywords and the project configuration left
out; inputs/run.py decides that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zeroadvisor.config.launch import CliEnv, Override
    from zeroadvisor.config.openrlhf_config import OpenRLHFFlags
    from zeroadvisor.config.training_args import TrainingArgs

# config/launch.py Launch.launcher -> hardware/machine.py LAUNCHERS (python: one process, no launcher to read)
LAUNCHER_OF_COMMAND = {"torchrun": "torchrun", "accelerate launch": "accelerate", "deepspeed": "deepspeed"}


@dataclass(frozen=True)
class TrainerInputs:
    """The Trainer's arguments (the file's, with the launch command's script arguments over them), and what the
    launch command says about the world: ``world`` processes (None: not known from the command)."""

    training: TrainingArgs
    notes: tuple[str, ...] = ()  # what was read and assumed, one line each
    world: int | None = None
    world_from: str = ""  # how the world size follows from the command, for messages
    launcher: str | None = None  # the command's launcher as the step-time model names it (LAUNCHER_OF_COMMAND)
    per_node: int | None = None  # the processes each machine runs, where the command says
    accelerate_config: str | None = None  # accelerate launch --config_file: the config it launches with
    world_missing: str = ""  # where world is None: what would state it, for the one error that asks
    overrides: tuple[Override, ...] = ()  # accelerate launch options over the keys of its --config_file
    env: tuple[tuple[str, str], ...] = ()  # the launch command's VAR=value prefixes (config/launch.py Launch.env)
    # a trainer that builds its DeepSpeed config from its flags (OpenRLHF), for the message asking for the config
    builds_config: str = ""
    stage: int | None = None  # the ZeRO stage its flags give (OpenRLHF --zero_stage), where the config says auto
    stage_from: str = ""
    source: str | None = None  # the training arguments file, where one was given (the trainer's pins are by it)
    cli_env: CliEnv | None = None  # what the trainer's own launcher sets in the environment (config/launch.py)
    swift_config: str | None = None  # ms-swift's own config the command names (--deepspeed zero3: Launch)
    openrlhf_flags: OpenRLHFFlags | None = None  # the flags OpenRLHF builds its DeepSpeed config from (Launch)

    @property
    def checkpointing(self) -> str | None:
        """--activation-checkpointing as the Trainer's gradient_checkpointing gives it (None: not stated)."""
        flag = self.training.checkpointing
        return None if flag is None else ("full" if flag else "none")


def read_trainer(training_args: str | None, launch: str | None) -> TrainerInputs | None:
    """The Trainer's inputs from a training arguments file and/or a launch command (None: neither given);
    TrainerInputError where one cannot be read."""
    if training_args is None and launch is None:
        return None
    from zeroadvisor.config.launch import parse_launch
    from zeroadvisor.config.training_args import merge, read_training_args

    training = read_training_args(training_args) if training_args is not None else None
    if launch is None:
        if training is None:  # unreachable: one of the two was given above
            raise TypeError("read_trainer: neither training arguments nor a launch command")
        return TrainerInputs(training, training.notes, source=training_args)
    command = parse_launch(launch)
    training = merge(training, command.training) if training is not None else command.training
    return TrainerInputs(training, command.notes + training.notes, command.world_size, command.world_from,
                         LAUNCHER_OF_COMMAND.get(command.launcher), command.per_node, command.accelerate_config,
                         command.world_missing, command.overrides, command.env, command.builds_config,
                         command.stage, command.stage_from, training_args, command.cli_env, command.swift_config,
                         command.openrlhf_flags)
