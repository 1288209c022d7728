"""``Request``: one run as its caller gave it, typed; the command line (cli/request.py) and the Python API
(api.py) both make one, and ``inputs.run.build`` turns it into the run's resolved inputs (RunInputs).

A field is None (or empty) where the caller gave nothing. The choices of a closed set are the enum members the
command line reads its choice text as; the Python API passes its keywords as given (a string, or a wrong type),
so such a field also takes the text, and the builder checks every value, once, with the message naming the
keyword (inputs/values.py): a request holds what was asked, the builder decides whether it can be run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from enum import Enum
from typing import TYPE_CHECKING, Any

from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.errors import UsageError
from zeroadvisor.inputs.model import TRAINING_INPUTS
from zeroadvisor.inputs.settings import FailOn
from zeroadvisor.lint.context import Integration
from zeroadvisor.report.formats import OutputFormat
from zeroadvisor.vocab import (
    Accounting,
    ActivationOffload,
    Checkpointing,
    Padding,
    Precision,
    Stage,
    TrainerChoice,
)

if TYPE_CHECKING:
    from zeroadvisor.model.spec import ModelSpec


PathText = str | os.PathLike[str]
# A config as given: a path, or (the Python API) the config itself as a dict
ConfigGiven = PathText | Mapping[str, object]
Strings = Sequence[str] | str  # --select given once or more, select="ZA1" or select=["ZA1", ...]


@dataclass(frozen=True)
class Request:
    """One run's inputs as given, before the project configuration, the Trainer's files and the fallbacks.

    ``takes``: the inputs the caller's interface has, in its order (the command line: the command's parameters);
    empty: every field, in field order (the Python API's estimate, check and preflight). The project configuration
    and the Trainer's files fill only inputs the interface takes, and the values are checked in this order (the
    first bad one is reported).
    """

    command: Command
    takes: tuple[str, ...] = ()
    # the Python API's keywords first, in the order its functions list them
    config: ConfigGiven | tuple[ConfigGiven, ...] | None = None  # check: one or more; estimate: one or none
    model: PathText | ModelSpec | None = None
    params: int | str | None = None
    gpus: int | None = None
    gpus_per_node: int | None = None
    gpu: str | None = None
    gpu_memory: int | str | None = None
    cpu_memory: int | str | None = None
    nvme: int | str | None = None
    headroom: float | str | None = None
    accounting: Accounting | str | None = None
    integration: Integration | str | None = None
    unit: str | None = None
    name: str | None = None  # a config given as text or a dict: its name in the report
    select: Strings | None = None
    ignore: Strings | None = None
    diff: bool | None = None
    deepspeed_version: str | None = None
    # the training method (--trainer): sft, dpo, grpo, ... (inputs/method.py; the files may say it too)
    trainer: TrainerChoice | str | None = None
    # the training shape (inputs/model.py SHAPE_INPUTS), then LoRA/QLoRA (PEFT_INPUTS)
    seq_len: int | None = None
    activation_checkpointing: Checkpointing | str | None = None
    flash_attention: bool | None = None
    target_len: int | None = None
    image_tokens: int | None = None
    vision_checkpointing: bool | None = None
    padding: Padding | str | None = None
    micro_batch: int | None = None
    precision: Precision | str | None = None
    stage: Stage | int | None = None
    load_dtype: Precision | str | None = None
    zero_init: bool | None = None
    meta_load: bool | None = None
    optim: str | None = None
    liger_kernel: bool | None = None
    cut_cross_entropy: bool | None = None
    tiled_mlp: bool | None = None
    tiled_mlp_shards: int | None = None
    activation_offload: ActivationOffload | str | None = None
    checkpoint_every: int | None = None
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    sequence_parallel: int | None = None
    expert_parallel: int | None = None
    peft: str | None = None
    lora_r: int | None = None
    lora_target_modules: Strings | None = None
    lora_modules_to_save: Strings | None = None
    quantization: str | None = None
    double_quant: bool | None = None
    lora_dropout: str | float | None = None
    transformers_version: str | None = None  # the release the model is built as (inputs/model.py RELEASE_INPUTS)
    # lint's
    paths: tuple[PathText, ...] = ()
    text: str | None = None  # one config as text (the Python API)
    only_configs: bool | None = None
    exclude: Strings | None = None
    no_default_excludes: bool | None = None
    # the command line's: output, fixes, the Trainer's inputs, the step-time machine
    format: OutputFormat | str | None = None
    fail_on: FailOn | str | None = None
    explain: bool | None = None
    verbose: bool | None = None
    all_options: bool | None = None
    suggest: bool | None = None
    fix: bool | None = None
    training_args: str | None = None
    launch: str | None = None
    inter_node_bandwidth: float | str | None = None
    cpu_cores: int | None = None
    nvme_bandwidth: float | str | None = None
    efficiency: float | str | None = None
    launcher: str | None = None

    @classmethod
    def taking(cls, command: Command, **values: Any) -> Request:
        """A request whose interface takes exactly the inputs given here, in this order (a tool or a test giving
        what the command line would: the project configuration and the Trainer's files fill only these)."""
        return cls(command, tuple(values), **values)

    def inputs(self) -> tuple[str, ...]:
        """The inputs this request's interface takes, in order (``takes``, else every field)."""
        return self.takes or INPUT_NAMES


INPUT_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Request) if f.name not in ("command", "takes"))

# The inputs whose values are a closed set, and the enum the command line's choice text is read as.
ENUMS: dict[str, type[Enum]] = {
    "format": OutputFormat, "fail_on": FailOn, "integration": Integration, "accounting": Accounting,
    "activation_checkpointing": Checkpointing, "padding": Padding, "precision": Precision, "load_dtype": Precision,
    "stage": Stage, "trainer": TrainerChoice, "activation_offload": ActivationOffload,
}


def member(name: str, text: str) -> Enum:
    """The member of input ``name``'s enum that the choice ``text`` names (a --stage choice is its digit)."""
    kind = ENUMS[name]
    return kind(int(text)) if kind is Stage else kind(text)


def check_training_keywords(training: Mapping[str, object]) -> None:
    """The Python API's ``**training``: only the training-shape keywords (inputs/model.py TRAINING_INPUTS)."""
    unknown = sorted(set(training) - set(TRAINING_INPUTS))
    if unknown:
        raise UsageError(f"unknown keyword {unknown[0]!r}; the training shape takes {', '.join(TRAINING_INPUTS)}")
