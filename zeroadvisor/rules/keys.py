"""Key rules: unknown, misspelled, deprecated, removed and doubly-given keys.

Which of these DeepSpeed catches depends on the section: pydantic sections
(``x-unknown-keys: error`` in the schema) raise on an unknown key, the top level and the
sections DeepSpeed reads with ``dict.get`` (``ignored``) drop it without a word, and
optimizer/scheduler ``params`` (``kwargs``) are passed to a constructor that raises
TypeError. The facts come from the schema walk (schemawalk.py); these rules word them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from zeroadvisor.config import merge_patch as patch
from zeroadvisor.config.source import join_pointer
from zeroadvisor.deepspeed import releases, schema
from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context
    from zeroadvisor.lint.schemawalk import Event


def dotted(pointer: str) -> str:
    """/zero_optimization/offload_optimizer -> zero_optimization.offload_optimizer (as people write it)."""
    return ".".join(patch.tokens(pointer))


def _section(pointer: str) -> str:
    parent = pointer.rsplit("/", 1)[0]
    return f"'{dotted(parent)}'" if parent else "the top level"


def _did_you_mean(event: Event) -> str:
    suggestions = event.data["suggestions"]
    hint = ""
    if suggestions:
        hint = " (did you mean " + " or ".join(repr(s) for s in suggestions) + "?)"
    elsewhere = event.data["elsewhere"]
    if elsewhere and not event.data["typo"]:
        parents = " or ".join(repr(dotted(p.rsplit("/", 1)[0]) or "the top level") for p in elsewhere[:2])
        hint += f"; {event.data['key']!r} belongs under {parents}"
    return hint


def _correct_key(event: Event) -> str:
    """The pointer of the key ``event``'s key is a misspelling of, beside it."""
    return join_pointer(event.pointer.rsplit("/", 1)[0], event.data["typo"])


def _rename_fix(ctx: Context, event: Event) -> JSONObject | None:
    """Rename the misspelt key, unless the correct key is also given: renaming would overwrite what DeepSpeed
    reads with what it ignores, and which of the two the user means is theirs to say (_both_given words it)."""
    typo = event.data["typo"]
    if not typo or ctx.has(_correct_key(event)):
        return None
    return patch.rename(event.pointer, typo, ctx.get(event.pointer))


def _both_given(ctx: Context, event: Event) -> str:
    if not event.data["typo"] or not ctx.has(_correct_key(event)):
        return ""
    return (f"; {event.data['typo']!r} is also given, so no fix is offered: merge the two by hand and delete "
            f"{event.data['key']!r}")


def other_releases(event: Event) -> str:
    """Which releases read a key this one does not: "added in 0.17", "removed after 0.18.9", "read by ..."."""
    knowing = [v for v in event.data["knowing"] if v in releases.known()]
    active = releases.version_key(schema.active_release())
    if all(releases.version_key(v) > active for v in knowing):
        return f"added in {releases.span(knowing[:1])}"
    if all(releases.version_key(v) < active for v in knowing):
        return f"read up to {knowing[-1]}"
    return f"read by {releases.span(knowing)}"


def _unknown(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("unknown", policy="error"):
        if event.data.get("knowing"):
            yield Hit(event.pointer,
                      f"{releases.label(schema.active_release())} does not have {event.data['key']!r} in "
                      f"{_section(event.pointer)} ({other_releases(event)}): it validates this section and raises a "
                      "ValidationError at launch")
            continue
        yield Hit(
            event.pointer,
            f"unknown key {event.data['key']!r} in {_section(event.pointer)}{_did_you_mean(event)}: "
            f"DeepSpeed validates this section and raises 'Extra inputs are not permitted' at launch"
            f"{_both_given(ctx, event)}",
            fix=_rename_fix(ctx, event),
        )


def _misspelled(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("unknown", policy="ignored"):
        if event.data["typo"] and not event.data.get("knowing"):
            yield Hit(
                event.pointer,
                f"{event.data['key']!r} in {_section(event.pointer)} is not a DeepSpeed key (did you mean "
                f"{event.data['typo']!r}?): DeepSpeed silently ignores it and uses the default"
                f"{_both_given(ctx, event)}",
                fix=_rename_fix(ctx, event),
            )


def _ignored(ctx: Context) -> Iterator[Hit]:
    if ctx.foreign:
        return  # not-a-deepspeed-config says it once for the whole file
    for event in ctx.events("unknown", policy="ignored"):
        if event.data.get("knowing"):
            yield Hit(event.pointer,
                      f"{releases.label(schema.active_release())} ignores {event.data['key']!r} in "
                      f"{_section(event.pointer)}: {other_releases(event)}; this release never reads it")
        elif not event.data["typo"]:
            yield Hit(
                event.pointer,
                f"unknown key {event.data['key']!r} in {_section(event.pointer)}{_did_you_mean(event)}: "
                "DeepSpeed silently ignores it (prefix it with '_' if it is a comment)",
            )


UNKNOWN_KEY = Rule(
    code="ZA101",
    name="unknown-key",
    severity=Severity.ERROR,
    summary="A key that a section DeepSpeed validates does not have.",
    explanation=(
        "zero_optimization (and its offload blocks), fp16, bf16, the monitors, comms_logger, "
        "compile, tensor_parallel, hybrid_engine and weight_quantization are pydantic models with "
        "extra='forbid': an unknown key raises ValidationError when DeepSpeed starts, and only the "
        "first failing section is reported. Rename or delete the key."
    ),
    check=_unknown,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "overlap_com": true}}', fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "overlap_comm": true}}', fails=False),
    ),
    source="deepspeed/runtime/config_utils.py DeepSpeedConfigModel (extra='forbid')",
)

MISSPELLED_KEY = Rule(
    code="ZA102",
    name="misspelled-key",
    severity=Severity.ERROR,
    summary="A misspelling of a DeepSpeed key where DeepSpeed silently ignores unknown keys.",
    explanation=(
        "DeepSpeed reads the top level and several sections with dict.get, so "
        "'zero_optimisation' is dropped without a word and the job runs at ZeRO stage 0 until it "
        "runs out of memory. A key one or two edits away from a known key, with a value of the same "
        "shape, is reported as an error with the fix."
    ),
    check=_misspelled,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimisation": {"stage": 2}}', fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2}}', fails=False),
    ),
    source="deepspeed/runtime/config.py DeepSpeedConfig._initialize_params (dict.get); DS#653",
)

IGNORED_KEY = Rule(
    code="ZA103",
    name="ignored-key",
    severity=Severity.WARNING,
    summary="An unknown key that DeepSpeed silently ignores.",
    explanation=(
        "Keys DeepSpeed does not read at the top level or in dict.get sections do nothing. Often "
        "these are settings for another tool (a 'moe' block, Accelerate's zero3_init_flag) that "
        "have no effect here. Keys starting with '_' are treated as comments and not reported."
    ),
    check=_ignored,
    examples=(
        Example('{"train_batch_size": 8, "moe": {"enabled": true}}', fails=True),
        Example('{"train_batch_size": 8, "_comment": "tuned for 8 GPUs"}', fails=False),
    ),
    source="deepspeed/runtime/config.py (dict.get); DS#653, DS#774, DS#1809",
)


def _deprecated(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("deprecated"):
        replaced_by = event.data["replaced_by"]
        note = event.data["note"].rstrip(".")
        advice = f"; use {dotted(replaced_by)!r} instead" if replaced_by else "; delete it"
        yield Hit(event.pointer, f"{event.data['key']!r} is deprecated{advice}" + (f" ({note})" if note else ""))
    for event in ctx.events("deprecated-with-replacement"):
        if event.data["policy"] != "error":
            yield Hit(
                event.pointer,
                f"{event.data['key']!r} is deprecated and ignored because "
                f"{dotted(event.data['replaced_by'])!r} is also given; delete it",
                fix=patch.delete(event.pointer),
            )


def _deprecated_with_replacement(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("deprecated-with-replacement", policy="error"):
        yield Hit(
            event.pointer,
            f"{event.data['key']!r} is deprecated and {dotted(event.data['replaced_by'])!r} is also given: DeepSpeed "
            "raises an AssertionError when both are set; delete the deprecated key",
            fix=patch.delete(event.pointer),
        )


DEPRECATED_KEY = Rule(
    code="ZA104",
    name="deprecated-key",
    severity=Severity.WARNING,
    summary="A deprecated key that still works, with its replacement.",
    explanation=(
        "DeepSpeed still maps cpu_offload, cpu_offload_param, stage3_gather_fp16_weights_on_model_save "
        "and the top-level bfloat16 block to their replacements, with a warning; they may be removed "
        "in a later release. Use the replacement named in the message."
    ),
    check=_deprecated,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "cpu_offload": true}}', fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}',
                fails=False),
    ),
    source="deepspeed/runtime/config_utils.py (deprecated fields); runtime/zero/config.py",
)

DEPRECATED_WITH_REPLACEMENT = Rule(
    code="ZA105",
    name="deprecated-with-replacement",
    severity=Severity.ERROR,
    summary="A deprecated key given together with its replacement in a validated section.",
    explanation=(
        "DeepSpeed's pydantic models migrate a deprecated field to its replacement and assert that "
        "the replacement was not also set, so giving both stops the launch. Keep the replacement."
    ),
    check=_deprecated_with_replacement,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "cpu_offload": true, '
                '"offload_optimizer": {"device": "cpu"}}}', fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}',
                fails=False),
    ),
    supersedes=("deprecated-key",),
    source="deepspeed/runtime/config_utils.py DeepSpeedConfigModel._process_deprecated_field",
)


def _alias_conflict(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("alias-conflict"):
        yield Hit(
            event.pointer,
            f"{event.data['key']!r} and {event.data['other']!r} are two names for one setting: DeepSpeed "
            f"rejects {event.data['key']!r} ('Extra inputs are not permitted'); keep {event.data['other']!r} (the "
            "spelling Hugging Face and Accelerate fill for \"auto\")",
            fix=patch.delete(event.pointer),
        )


ALIAS_CONFLICT = Rule(
    code="ZA106",
    name="alias-conflict",
    severity=Severity.ERROR,
    summary="A setting given under both its name and its stage3_* alias.",
    explanation=(
        "zero_optimization accepts e.g. prefetch_bucket_size and its alias "
        "stage3_prefetch_bucket_size (populate_by_name=True), but not both in one file: pydantic "
        "raises extra_forbidden on the second. Keep one spelling (Hugging Face and Accelerate only "
        "fill 'auto' for the stage3_* spelling)."
    ),
    check=_alias_conflict,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "prefetch_bucket_size": 1000, '
                '"stage3_prefetch_bucket_size": 1000}}', fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 1000}}',
                fails=False),
    ),
    source="deepspeed/runtime/config_utils.py (populate_by_name=True, extra='forbid')",
)


def _removed(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("removed"):
        yield Hit(
            event.pointer,
            f"{event.data['key']!r} was removed from DeepSpeed; it raises DeepSpeedConfigError: {event.data['reason']}",
            fix=patch.delete(event.pointer),
        )


def _removed_later(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("removed-later"):
        refusing = [v for v in releases.known() if releases.version_key(v) > releases.version_key(
            schema.active_release()) and not schema.reads_removed(v, event.pointer)]
        later = f" from {refusing[0]}" if refusing else ""
        yield Hit(event.pointer, f"{releases.label(schema.active_release())} reads {event.data['key']!r}, but later "
                                 f"releases refuse it{later}: {event.data['reason']}")


REMOVED_LATER = Rule(
    code="ZA108",
    name="removed-later",
    severity=Severity.INFO,
    summary="A key this DeepSpeed release reads and a later release refuses.",
    explanation=(
        "DeepSpeed 0.19.7 and 0.19.8 removed Apex AMP, elasticity, sparse attention, MoQ, nebula, the "
        "top-level curriculum_learning, progressive layer drop and more (DS#8489). Under an older release "
        "(--deepspeed-version, or the pin in your requirements) the key still works; upgrading stops the run. "
        "Plan the replacement the message names before you upgrade."
    ),
    check=_removed_later,
    examples=(
        Example('{"train_batch_size": 8, "amp": {"enabled": false}}', fails=True,
                options={"deepspeed_version": "0.16"}),
        Example('{"train_batch_size": 8, "fp16": {"enabled": true}}', fails=False,
                options={"deepspeed_version": "0.16"}),
    ),
    source="deepspeed/runtime/config.py _reject_removed_config_keys (0.19.7+); tools/gen_releases.py probes",
)

REMOVED_KEY = Rule(
    code="ZA107",
    name="removed-key",
    severity=Severity.ERROR,
    summary="A key whose feature DeepSpeed 0.19 removed; it refuses to start.",
    explanation=(
        "DeepSpeed 0.19 removed Apex AMP, elasticity, sparse attention, MoQ, nebula, the top-level "
        "curriculum_learning, progressive layer drop and MiCS, among others, and raises "
        "DeepSpeedConfigError with the reason when their keys are present "
        "(_REMOVED_TOP_LEVEL_CONFIG_KEYS, _REMOVED_ZERO_CONFIG_KEYS; DS#8489). Delete the block or "
        "move to the replacement in the message."
    ),
    check=_removed,
    examples=(
        Example('{"train_batch_size": 8, "amp": {"enabled": true}}', fails=True),
        Example('{"train_batch_size": 8, "fp16": {"enabled": true}}', fails=False),
    ),
    source="deepspeed/runtime/config.py _reject_removed_config_keys",
)

RULES = (UNKNOWN_KEY, MISSPELLED_KEY, IGNORED_KEY, DEPRECATED_KEY, DEPRECATED_WITH_REPLACEMENT, ALIAS_CONFLICT,
         REMOVED_KEY, REMOVED_LATER)
