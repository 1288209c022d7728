"""Value rules: wrong types, values DeepSpeed only accepts by coercion, ranges and enums."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from zeroadvisor.config import merge_patch as patch
from zeroadvisor.deepspeed import releases, schema
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context
    from zeroadvisor.lint.schemawalk import Event

_TYPE_WORDS = {"integer": "an integer", "number": "a number", "boolean": "true or false", "string": "a string",
               "object": "an object", "array": "an array", "null": "null"}


def _expected(types: Iterable[str]) -> str:
    words = [_TYPE_WORDS.get(t, t) for t in dict.fromkeys(types)]
    return " or ".join(words)


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _key(pointer: str) -> str:
    return pointer.rsplit("/", 1)[-1]


def _wrong_type(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("wrong-type"):
        consequence = ("DeepSpeed raises a ValidationError at launch" if event.data["policy"] == "error"
                       else "DeepSpeed fails when it uses it")
        yield Hit(event.pointer,
                  f"{_key(event.pointer)!r} must be {_expected(event.data['types'])}, got "
                  f"{_shown(event.data['value'])}: {consequence}", at="value")


WRONG_TYPE = Rule(
    code="ZA201",
    name="wrong-type",
    severity=Severity.ERROR,
    summary="A value of a type DeepSpeed cannot use.",
    explanation=(
        "DeepSpeed's pydantic sections reject values they cannot coerce ('stage': 'two'); checked "
        "top-level settings raise when read. Write the value with the type the schema gives."
    ),
    check=_wrong_type,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": "two"}}', fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2}}', fails=False),
    ),
    source="deepspeed/runtime/config_utils.py DeepSpeedConfigModel",
)


def _loose_type(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("loose-type"):
        yield Hit(event.pointer,
                  f"{_key(event.pointer)!r} should be {_expected(event.data['types'])}, got "
                  f"{_shown(event.data['value'])}: DeepSpeed coerces it, but other readers may not",
                  at="value")


LOOSE_TYPE = Rule(
    code="ZA202",
    name="loose-type",
    severity=Severity.WARNING,
    summary="A value DeepSpeed accepts only by coercion, such as \"2\" for an integer.",
    explanation=(
        "Pydantic's lax mode turns \"2\" into 2 and \"yes\" into true, so DeepSpeed runs; tools that read "
        "the config themselves (the Hugging Face integration, launch scripts) compare the raw value "
        "and can disagree. Write the value with its proper JSON type."
    ),
    check=_loose_type,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": "2"}}', fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2}}', fails=False),
    ),
    source="pydantic lax mode, as used by deepspeed/runtime/config_utils.py",
)


def _written_and_truncated(event: Event) -> tuple[str, int]:
    """A fractional number as the file writes it, and the integer pydantic 1's int() makes of it (the fix)."""
    raw = event.data["raw"] or repr(event.data["value"])
    return raw, int(float(raw))


def _fractional(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("fractional"):
        raw, fixed = _written_and_truncated(event)
        hint = ""
        if _key(event.pointer) in ("stage3_prefetch_bucket_size", "prefetch_bucket_size"):
            hint = (" (older transformers/accelerate wrote 0.9*hidden_size^2 for 'auto', e.g. 15099494.4; "
                    "fixed in transformers PR#33402 and accelerate PR#2814)")
        yield Hit(event.pointer,
                  f"{_key(event.pointer)!r} must be an integer, got {raw}: DeepSpeed raises 'Input should be a "
                  f"valid integer, got a number with a fractional part'{hint}",
                  fix=patch.at(event.pointer, fixed), at="value")


FRACTIONAL_INTEGER = Rule(
    code="ZA203",
    name="fractional-integer",
    severity=Severity.ERROR,
    summary="A number with a fractional part where DeepSpeed needs an integer.",
    explanation=(
        "Pydantic accepts 5e8 for an integer field because it has no fractional part, but rejects "
        "15099494.4. That value is what older Hugging Face versions produced for "
        "stage3_prefetch_bucket_size: 'auto' (0.9 * 4096^2, DS#6525). Round it."
    ),
    check=_fractional,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 15099494.4}}',
                fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 5e8}}',
                fails=False),
    ),
    supersedes=("wrong-type",),
    source="DS#6525; pydantic int validation",
)


def _truncated(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("truncated"):
        raw, fixed = _written_and_truncated(event)
        yield Hit(event.pointer,
                  f"{_key(event.pointer)!r} should be an integer, got {raw}: {releases.label(schema.active_release())} "
                  f"(pydantic 1) truncates it to {fixed}, and releases from 0.15 on refuse it",
                  fix=patch.at(event.pointer, fixed), at="value")


TRUNCATED_INTEGER = Rule(
    code="ZA206",
    name="truncated-integer",
    severity=Severity.WARNING,
    summary="A number with a fractional part in an integer field that a pydantic 1 release truncates.",
    explanation=(
        "DeepSpeed before 0.15 validates its sections with pydantic 1, whose int validator is int(value): "
        "15099494.4 runs as 15099494. From 0.15 (pydantic 2) the same file is refused "
        "(fractional-integer). Write the integer."
    ),
    check=_truncated,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 15099494.4}}',
                fails=True, options={"deepspeed_version": "0.14"}),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 15099494}}',
                fails=False, options={"deepspeed_version": "0.14"}),
    ),
    supersedes=("wrong-type",),
    source="pydantic 1 int_validator, as DeepSpeed 0.9-0.14 use it (deepspeed/pydantic_v1.py)",
)


def _out_of_range(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("range"):
        if not event.data["unchecked"]:
            yield Hit(event.pointer,
                      f"{_key(event.pointer)!r} {event.data['problem']}, got {_shown(event.data['value'])}: "
                      "DeepSpeed rejects it at launch", at="value")


OUT_OF_RANGE = Rule(
    code="ZA204",
    name="out-of-range",
    severity=Severity.ERROR,
    summary="A value outside the range or set of choices DeepSpeed validates.",
    explanation=(
        "DeepSpeed checks ranges and choices such as reduce_bucket_size > 0, offload device in "
        "none/cpu/nvme, stage in 0..3 and communication_data_type in fp16/bf16/fp32, and raises at "
        "launch when they are violated."
    ),
    check=_out_of_range,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "reduce_bucket_size": 0}}', fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8}}', fails=False),
    ),
    source="deepspeed/runtime/zero/config.py Field(gt=..., ge=...); runtime/config.py",
)


def _unchecked(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("unchecked-type"):
        yield Hit(event.pointer,
                  f"{_key(event.pointer)!r} should be {_expected(event.data['types'])}, got "
                  f"{_shown(event.data['value'])}: DeepSpeed does not check it and uses the value as "
                  "written, which fails or misbehaves at run time", at="value")
    for event in ctx.events("range"):
        if event.data["unchecked"]:
            yield Hit(event.pointer,
                      f"{_key(event.pointer)!r} {event.data['problem']}, got {_shown(event.data['value'])}: DeepSpeed "
                      "does not check it and uses the value as written", at="value")


UNCHECKED_TYPE = Rule(
    code="ZA205",
    name="unchecked-type",
    severity=Severity.WARNING,
    summary="A wrong value in a setting DeepSpeed reads without checking.",
    explanation=(
        "Settings read with dict.get, such as gradient_clipping and steps_per_print, are used as "
        "written: 'gradient_clipping': true clips at 1.0, 'steps_per_print': 'ten' fails at the "
        "first print. Write the value with the documented type."
    ),
    check=_unchecked,
    examples=(
        Example('{"train_batch_size": 8, "gradient_clipping": true}', fails=True),
        Example('{"train_batch_size": 8, "gradient_clipping": 1.0}', fails=False),
    ),
    source="deepspeed/runtime/config.py get_scalar_param (no type check)",
)

RULES = (WRONG_TYPE, LOOSE_TYPE, FRACTIONAL_INTEGER, TRUNCATED_INTEGER, OUT_OF_RANGE, UNCHECKED_TYPE)
