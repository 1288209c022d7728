"""The library's flows, one function per command: lint paths, estimate a config, check a config.

The command line (zeroadvisor.cli) parses flags, calls these, renders the result with
``zeroadvisor.report.render`` and maps it to an exit code; nothing here prints or exits.

Errors a caller should expect from bad input are typed and carry one line each
(``EXPECTED_ERRORS``); any other exception is a bug. Modules only ``check`` and ``estimate``
need (the memory model, the advisor, the fix writer) are imported inside those functions so
that ``lint`` starts fast.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterable, Sequence

from zeroadvisor.config.accelerate import is_accelerate_config
from zeroadvisor.config.paths import PathError, expand_inputs
from zeroadvisor.config.project import ProjectConfigError
from zeroadvisor.config.paths import STDIN
from zeroadvisor.config.reader import STDIN_NAME, read_stream_document
from zeroadvisor.config.reader import InputError as UnreadableInput
from zeroadvisor.config.reader import read_document
from zeroadvisor.config.source import Document, ParseError
from zeroadvisor.config.training_args import TrainerInputError
from zeroadvisor.lint.context import LintOptions
from zeroadvisor.rules.linter import lint_document, lint_file, parse_error_findings
from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.lint.rule import Rule
from zeroadvisor.model.errors import ModelError
from zeroadvisor.advisor import registry

if TYPE_CHECKING:
    from zeroadvisor.advisor.check import CheckOptions, CheckResult
    from zeroadvisor.memory.estimate import Cluster, Estimate
    from zeroadvisor.model.spec import ModelSpec, TrainingShape
    from zeroadvisor.throughput import Hardware

__all__ = [
    "CheckRun", "EXPECTED_ERRORS", "ESTIMATE_FORMATS", "FAIL_ON", "LintRun", "STDIN", "UnreadableInput",
    "UnusableConfig", "UsageError", "check_config", "estimate_config", "estimate_throughput", "fails", "find_rule",
    "lint_paths", "select_rules",
]


class UsageError(ValueError):
    """A bad option value (an unknown rule, a size that is not a size, two options that exclude each other)."""


class UnusableConfig(ValueError):
    """A config that was read but cannot serve this flow (``estimate`` of a file that does not parse)."""


# The errors bad input raises, each ``str(err)`` one line; anything else is a bug.
EXPECTED_ERRORS: tuple[type[Exception], ...] = (UsageError, UnreadableInput, UnusableConfig, ModelError,
                                                TrainerInputError, ProjectConfigError)

# ``--fail-on``: a severity, or never.
FAIL_ON: tuple[str, ...] = (*(severity.value for severity in Severity), "never")
# The formats that can show an estimate on its own (the estimate command).
ESTIMATE_FORMATS: tuple[str, ...] = ("text", "json")

# The path that means standard input, and the name its findings carry.


def select_rules(select: Sequence[str] | None = None, ignore: Sequence[str] | None = None,
                 lint_only: bool = True) -> tuple[Rule, ...]:
    """Rules by codes, names or code prefixes; each argument may hold a comma-separated list."""
    chosen, dropped = _split(select), _split(ignore)
    unknown = registry.unknown_references(chosen + dropped)
    if unknown:
        raise UsageError(f"unknown rule {unknown[0]!r}: see 'zeroadvisor rules'")
    return registry.select(chosen, dropped, among=registry.LINT if lint_only else registry.ALL)


def find_rule(reference: str) -> Rule:
    rule = registry.find(reference)
    if rule is None:
        raise UsageError(f"unknown rule {reference!r}: see 'zeroadvisor rules'")
    return rule


def fails(findings: Iterable[Finding], fail_on: str) -> bool:
    """Whether any finding is at or above the ``--fail-on`` severity."""
    if fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    if fail_on == "never":
        return False
    threshold = Severity(fail_on).rank
    return any(f.severity.rank >= threshold for f in findings)


# -- lint ---------------------------------------------------------------------------------

@dataclass
class LintRun:
    findings: list[Finding]
    files: int  # inputs read and linted
    unreadable: list[str] = field(default_factory=list)  # one line each: an input that could not be read
    rules: tuple[Rule, ...] = ()
    skipped: list[str] = field(default_factory=list)  # files found in a folder that are not configs (by content)


def lint_paths(paths: Sequence[str], options: LintOptions | None = None, rules: Sequence[Rule] | None = None,
               stdin: BinaryIO | None = None, *, only_configs: bool = False,
               rules_for: Callable[[str], Sequence[Rule]] | None = None) -> LintRun:
    """Lint files, directories and glob patterns (``-`` reads ``stdin``, standard input by default).

    Files found in a directory (.json, .hjson, .conf, .yaml, .yml) are linted when their content is a
    DeepSpeed or Accelerate config (deepspeed/kind.py) and listed in ``skipped`` otherwise;
    ``only_configs`` judges named files the same way (the pre-commit hook). ``rules_for(path)``
    chooses the rules per file (the project configuration's per-file ignores); ``rules`` otherwise.
    An input that cannot be read at all is listed in ``unreadable`` and the others are still linted;
    a path that names nothing (an empty directory, a pattern without matches) is a UsageError.
    """
    from zeroadvisor.deepspeed.kind import kind_of_file

    selected = tuple(registry.LINT if rules is None else rules)
    try:
        inputs = expand_inputs(list(paths))
    except PathError as err:
        raise UsageError(str(err)) from None
    run = LintRun([], 0, [], selected)
    used: set[str] = set()  # codes of the rules some file was linted with
    for item in inputs:
        path = item.path
        if path != STDIN and (item.found or only_configs) and kind_of_file(path) is None:
            run.skipped.append(path)
            continue
        chosen = selected if rules_for is None else tuple(rules_for(path))
        used.update(r.code for r in chosen)
        try:
            if path == STDIN:
                stream = stdin if stdin is not None else sys.stdin.buffer
                found = _lint_stdin(stream, options, chosen)
            else:
                found = lint_file(path, options, chosen).findings
        except UnreadableInput as err:
            run.unreadable.append(str(err))
            continue
        run.findings.extend(found)
        run.files += 1
    if rules_for is not None:  # every rule some file was linted with, in the registry's order
        run.rules = tuple(r for r in registry.ALL if r.code in used) or selected
    return run


def _lint_stdin(stream: BinaryIO, options: LintOptions | None, rules: Sequence[Rule]) -> list[Finding]:
    """Standard input, under the same limits as a file (config/reader.py)."""
    try:
        document = read_stream_document(stream, STDIN_NAME)
    except ParseError as err:
        return parse_error_findings(STDIN_NAME, err, rules)
    return lint_document(document, options, rules)


# -- estimate -----------------------------------------------------------------------------

def estimate_config(config: str | None, model: "ModelSpec", shape: "TrainingShape", cluster: "Cluster",
                    accounting: str = "deepspeed", training=None) -> "Estimate":
    """Memory per GPU and node for every stage; ``config`` None means DeepSpeed's defaults (fp16 Adam).

    A config that does not parse, is not an object, or holds a value the memory model cannot
    use (which the linter reports as an error) is an UnusableConfig.
    """
    from zeroadvisor.memory.estimate import estimate

    data = None
    document = None
    if config is not None:
        document = _read_config(config)
        if not isinstance(document.data, dict):
            raise UnusableConfig(f"{config}: the config is not a JSON object")
        if training is not None:  # "auto" filled as the Hugging Face Trainer fills it
            document = trainer_filled(document, training, cluster.gpus, model.hidden_size)
            shape = trainer_shape(document.data, shape, training)
        data = document.data
        if is_accelerate_config(data):  # the DeepSpeed config it makes Accelerate build, on its world
            data, shape, cluster = _accelerate_estimate_inputs(config, document, shape, cluster)
        _refuse_conflicts(config, data, model, cluster.gpus, shape)
    _refuse_layout(config, data, cluster.gpus, shape)
    try:
        return estimate(data, model, shape, cluster, accounting)
    except (ValueError, TypeError) as err:
        # Bad input only when the linter agrees the config is wrong; otherwise a bug to report.
        errors = _lint_errors(document) if document is not None else []
        if not errors:
            raise
        first = errors[0]
        raise UnusableConfig(f"{config}:{first.line}:{first.column}: cannot estimate from this config: "
                             f"{first.message} ({len(errors)} error(s); see 'zeroadvisor lint {config}')") from err


def _accelerate_estimate_inputs(path: str, document: Document, shape: "TrainingShape",
                                cluster: "Cluster") -> tuple[dict, "TrainingShape", "Cluster"]:
    from zeroadvisor.advisor.accelerate import AccelerateConflict, estimate_inputs

    try:
        data, shape, cluster, why = estimate_inputs(path, document, shape, cluster)
    except AccelerateConflict as err:
        raise UsageError(str(err)) from None
    if data is None:
        raise UnusableConfig(f"{path}: cannot estimate: {why}")
    return data, shape, cluster


def estimate_throughput(result: "Estimate", hardware: "Hardware") -> dict:
    """Step time per option of ``result`` (zeroadvisor.throughput.per_option, on the config the estimate was
    made of). Where a step time was computed, the machine facts the flags left to their defaults join the
    estimate's assumed inputs."""
    from zeroadvisor.memory.assumed import hardware_assumptions
    from zeroadvisor.throughput import per_option

    steps = per_option(result, hardware)
    if any(getattr(step, "step_time_s", None) for step in steps.values()):
        result.assumed = [*result.assumed, *hardware_assumptions(hardware)]
    return steps


def _refuse_conflicts(path: str, data: dict, model: "ModelSpec", gpus: int, shape: "TrainingShape") -> None:
    """A flag or model-description value the config contradicts is a UsageError (exit 2): DeepSpeed
    runs the config's value, so estimating either one would answer a question nobody asked."""
    from zeroadvisor.memory.settings import given_conflicts

    conflicts = given_conflicts(data, model, gpus, shape)
    if conflicts:
        raise UsageError(f"{path}: {conflicts[0]}")


def _refuse_layout(path: str | None, data: dict | None, gpus: int, shape: "TrainingShape") -> None:
    """Parallel degrees that do not divide the GPUs are a UsageError (exit 2): no run has that layout."""
    from zeroadvisor.memory.errors import EstimateError
    from zeroadvisor.memory.parallel import read_parallel

    try:
        read_parallel(data, gpus, shape)
    except EstimateError as err:
        raise UsageError(f"{path}: {err}" if path else str(err)) from None


def _read_config(path: str) -> Document:
    try:
        return read_document(path)
    except ParseError as err:
        where = f"{path}:{err.line}:{err.column}" if err.line else path
        raise UnusableConfig(f"{where}: {err.message}") from None


def _lint_errors(document: Document) -> list[Finding]:
    return [f for f in lint_document(document) if f.severity is Severity.ERROR]


# -- check --------------------------------------------------------------------------------

@dataclass
class CheckRun:
    result: "CheckResult"
    path: str
    diff: str = ""  # the fixes as a unified diff of the file (when asked for and there are fixes)
    fixed: int | None = None  # fixes written into the file (``fix=True`` and no error)
    notes: list[str] = field(default_factory=list)  # one line each, for the user beside the report
    error: str | None = None  # why the asked-for fixes could not be written (one line)


def check_config(path: str, options: "CheckOptions", rules: Sequence[Rule] | None = None, *, diff: bool = False,
                 fix: bool = False) -> CheckRun:
    """Lint findings and memory advice for one config; optionally its fixes as a diff, or written.

    A file that does not parse is reported as findings (no estimate). A fix that cannot be made
    (a YAML config, a read-only folder, a full disk) does not lose the result: it comes back with
    ``error`` (``fix=True``) or a note (a diff only).
    """
    from zeroadvisor.advisor.check import CheckResult, check_document
    from zeroadvisor.advisor.check import combined_patch
    from zeroadvisor.fix.apply import FixError, unified_diff, write_fix

    selected = tuple(registry.ALL if rules is None else rules)
    try:
        document = read_document(path)
    except ParseError:
        lint_rules = [r for r in selected if not r.needs_advice]
        return CheckRun(CheckResult(lint_file(path, None, lint_rules).findings, None, options), path)
    if isinstance(document.data, dict) and options.training is not None:
        # DeepSpeed gets the config with "auto" filled from the Trainer's arguments
        document = trainer_filled(document, options.training, options.gpus, options.model.hidden_size)
        options = replace(options, shape=trainer_shape(document.data, options.shape, options.training))
    if is_accelerate_config(document.data):
        result = _check_accelerate(path, document, options, selected)
    else:
        if isinstance(document.data, dict):
            _refuse_conflicts(path, document.data, options.model, options.gpus, options.shape)
        result = check_document(document, options, selected)
    run = CheckRun(result, path)
    if "estimate_error" in result.extra:
        run.notes.append(f"{path}: no memory estimate ({result.extra['estimate_error']}): fix the errors reported "
                         "first")
    if not (diff or fix):
        return run
    patch = combined_patch(result.findings)
    if not patch:
        run.fixed = 0 if fix else None
        return run
    try:
        run.diff = unified_diff(document, patch, path)
    except FixError as err:  # e.g. a YAML config: the report stands, without the diff
        if fix:
            run.error = f"{path}: {err}"
        else:
            run.notes.append(f"{path}: {err}")
        return run
    if fix:
        try:
            write_fix(path, document, patch)
        except FixError as err:
            run.error = f"{path}: {err}"
        except OSError as err:
            run.error = f"{path}: cannot write the fixes: {err.strerror or err}"
        else:
            run.fixed = sum(1 for f in result.findings if f.fix)
    return run


def _check_accelerate(path: str, document: Document, options: "CheckOptions", rules: Sequence[Rule]) -> "CheckResult":
    """An Accelerate launcher config: checked as the DeepSpeed config Accelerate builds from it."""
    from zeroadvisor.advisor.accelerate import AccelerateConflict, check_accelerate

    def refuse(where: str, data: dict, run: "CheckOptions") -> None:
        _refuse_conflicts(where, data, run.model, run.gpus, run.shape)

    try:
        return check_accelerate(path, document, options, list(rules), refuse)
    except AccelerateConflict as err:
        raise UsageError(str(err)) from None


def _split(values: Sequence[str] | None) -> list[str]:
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


# -- the Hugging Face Trainer -------------------------------------------------------------

def trainer_filled(document: Document, training, world_size: int | None, hidden_size: int | None) -> Document:
    """``document`` with the data DeepSpeed gets under the Trainer: "auto" filled from ``training`` as
    transformers' HfTrainerDeepSpeedConfig does, then the precision section Accelerate adds for --fp16/--bf16
    (deepspeed/hf_fill.py). Positions stay those of the file; mismatches are left for rule ZA310."""
    from zeroadvisor.deepspeed import hf_fill

    filled = hf_fill.fill(document.data, training, world_size, hidden_size)
    return replace(document, data=hf_fill.accelerate_precision(filled.config, training))


def trainer_shape(data: dict, shape: "TrainingShape", training) -> "TrainingShape":
    """The micro batch the Trainer's dataloader feeds (per_device_train_batch_size) where the config names
    no batch size (where it does, the filled config decides and ZA310 reports a difference)."""
    from zeroadvisor.deepspeed.effective import MBS, TBS

    if shape.micro_batch_size is not None or MBS in data or TBS in data:
        return shape
    return replace(shape, micro_batch_size=training.get("per_device_train_batch_size"))
