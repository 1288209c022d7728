"""Rules for "auto": a value only the Hugging Face Trainer or Accelerate fills in.

Who fills what is schema data (``x-auto`` on each key, from transformers'
integrations/deepspeed.py and accelerate's utils/deepspeed.py); ``--integration``
chooses the reader. Unfilled, DeepSpeed's pydantic sections drop "auto" and use the
default (DeepSpeedConfigModel with strict=False), while everything else keeps the string
and fails when it is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.lint.context import Integration
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context
    from zeroadvisor.lint.schemawalk import Event

# --integration -> who fills "auto" for it (the names the schema's x-auto ``filled_by`` uses)
_READERS: dict[Integration, tuple[Integration, ...]] = {
    Integration.ANY: (Integration.HF_TRAINER, Integration.ACCELERATE),
    Integration.DEEPSPEED: (),
    Integration.HF_TRAINER: (Integration.HF_TRAINER,),
    Integration.ACCELERATE: (Integration.ACCELERATE,),
}
_NAMES = {Integration.HF_TRAINER: "the Hugging Face Trainer", Integration.ACCELERATE: "Accelerate"}


def unfilled_auto(ctx: Context) -> Iterator[Event]:
    """"auto" events that the chosen integration does not fill."""
    readers = _READERS[ctx.options.integration]
    for event in ctx.events("auto"):
        if not set(event.data["filled_by"]) & set(readers):
            yield event


def _who(ctx: Context) -> str:
    readers = _READERS[ctx.options.integration]
    if not readers:
        return "plain DeepSpeed fills no \"auto\" value"
    if len(readers) > 1:
        return "neither " + " nor ".join(_NAMES[r] for r in readers) + " fills it"
    return f"{_NAMES[readers[0]]} does not fill it"


def _default_text(node: JSONObject) -> str:
    if "default" not in node:
        return "its default"
    value = node["default"]
    return f"its default {value!r}" if not isinstance(value, bool) else f"its default {str(value).lower()}"


def _not_resolved(ctx: Context) -> Iterator[Hit]:
    for event in unfilled_auto(ctx):
        if event.data["policy"] != "error":
            yield Hit(event.pointer,
                      f"\"auto\" for {event.pointer.rsplit('/', 1)[-1]!r}: {_who(ctx)}, and DeepSpeed keeps the "
                      "string \"auto\" here and fails when it uses it; set a value", at="value")


def _default_used(ctx: Context) -> Iterator[Hit]:
    for event in unfilled_auto(ctx):
        if event.data["policy"] == "error":
            key = event.pointer.rsplit("/", 1)[-1]
            effect = ""
            if event.pointer == "/zero_optimization/stage":
                effect = ": the job runs at ZeRO stage 0"
            yield Hit(event.pointer,
                      f"\"auto\" for {key!r}: {_who(ctx)}, so DeepSpeed silently drops it and uses "
                      f"{_default_text(event.data['node'])}{effect}; set a value", at="value")


AUTO_NOT_RESOLVED = Rule(
    code="ZA301",
    name="auto-not-resolved",
    severity=Severity.ERROR,
    summary="\"auto\" where nothing fills it and DeepSpeed fails on the string.",
    explanation=(
        "Outside its pydantic sections DeepSpeed keeps \"auto\" as a string: train_batch_size: \"auto\" "
        "raises TypeError under the plain deepspeed launcher, gradient_clipping: \"auto\" fails at the "
        "first step. The Hugging Face Trainer and Accelerate replace these before DeepSpeed sees them; "
        "choose the reader with --integration (default: accept what either fills)."
    ),
    check=_not_resolved,
    examples=(
        Example('{"train_batch_size": "auto"}', fails=True, options={"integration": "deepspeed"}),
        Example('{"train_batch_size": "auto"}', fails=False, options={"integration": "hf-trainer"}),
    ),
    source="transformers integrations/deepspeed.py HfTrainerDeepSpeedConfig; accelerate utils/deepspeed.py",
)

AUTO_DEFAULT_USED = Rule(
    code="ZA302",
    name="auto-default-used",
    severity=Severity.WARNING,
    summary="\"auto\" that nothing fills, so DeepSpeed silently uses its default.",
    explanation=(
        "DeepSpeedConfigModel drops every \"auto\" value before validation, so an unfilled \"auto\" "
        "means the default: allgather_bucket_size: \"auto\" is 5e8 elements, and \"stage\": \"auto\" "
        "under the Hugging Face Trainer (which does not fill it; Accelerate does) runs at stage 0."
    ),
    check=_default_used,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "allgather_bucket_size": "auto"}}',
                fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}}',
                fails=False),
    ),
    source="deepspeed/runtime/config_utils.py DeepSpeedConfigModel.__init__ (drops 'auto')",
)

RULES = (AUTO_NOT_RESOLVED, AUTO_DEFAULT_USED)
