"""The flows, one per command, on inputs resolved once (zeroadvisor/inputs: ``RunInputs``), and their typed
results. ``zeroadvisor.api`` is the documented entry to them; nothing here prints or exits.

Every config takes the same path whatever it was given as: a file, standard input, text, or a dict (written
as JSON text and read as a Document, inputs/source.py). Modules only ``check`` and ``estimate`` need (the
memory model, the advisor, the fix writer) are imported inside those functions so that ``lint`` starts fast.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, BinaryIO

from zeroadvisor.inputs.errors import UnusableConfig, UsageError
from zeroadvisor.lint.findings import Finding, Severity

if TYPE_CHECKING:
    from zeroadvisor.advisor.check import CheckOptions, CheckResult
    from zeroadvisor.config.source import Document
    from zeroadvisor.config.training_args import TrainingArgs
    from zeroadvisor.deepspeed.settings import Config
    from zeroadvisor.inputs.run import RunInputs
    from zeroadvisor.inputs.source import ConfigSource
    from zeroadvisor.lint.context import LintOptions
    from zeroadvisor.lint.rule import Rule
    from zeroadvisor.memory.cluster import Cluster
    from zeroadvisor.memory.estimate import Estimate, StageEstimate
    from zeroadvisor.memory.options import Option
    from zeroadvisor.model.spec import ModelSpec, TrainingShape
    from zeroadvisor.throughput import Hardware, StepTime

__all__ = ["CheckReport", "EstimateResult", "LintResult", "check", "check_one", "estimate", "fails", "lint",
           "step_times"]


def fails(findings: Iterable[Finding], fail_on: str) -> bool:
    """Whether any finding is at or above the ``--fail-on`` severity (error, warning, info or never)."""
    from zeroadvisor.inputs.settings import FAIL_ON

    if fail_on not in FAIL_ON:
        raise UsageError(f"fail_on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    if fail_on == "never":
        return False
    threshold = Severity(fail_on).rank
    return any(f.severity.rank >= threshold for f in findings)


def _count(findings: Sequence[Finding], severity: Severity) -> int:
    return sum(1 for f in findings if f.severity is severity)


def _render(fmt: str, findings: list[Finding], **fields: Any) -> str:
    from zeroadvisor.report import REPORTERS, Report, render

    if fmt not in REPORTERS:
        raise UsageError(f"format must be one of {', '.join(REPORTERS)}, got {fmt!r}")
    return render(fmt, Report(findings, **fields))


# -- lint -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LintResult:
    """What ``lint`` found.

    findings: every finding, in file order; files: inputs read and linted; unreadable: one line per
    input that could not be read; skipped: files found in a folder that are not DeepSpeed configs (judged by
    content: no config at all, or an Accelerate config of a run without DeepSpeed); notes: one line per
    skipped Accelerate config, saying what it is; not_deepspeed: one line per input named that is an
    Accelerate config of a run without DeepSpeed (an FSDP or multi-GPU config: not linted, see
    deepspeed/kind.py ``not_deepspeed``); rules: every rule some file was linted with.
    """

    findings: list[Finding]
    files: int
    unreadable: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    rules: tuple[Rule, ...] = ()
    not_deepspeed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return _count(self.findings, Severity.ERROR)

    @property
    def warnings(self) -> int:
        return _count(self.findings, Severity.WARNING)

    @property
    def ok(self) -> bool:
        """No error, every input read, and every input named a DeepSpeed config."""
        return not self.errors and not self.unreadable and not self.not_deepspeed

    def fails(self, fail_on: str = "error") -> bool:
        """Whether a finding is at or above ``fail_on`` (error, warning, info or never), as ``--fail-on``."""
        return fails(self.findings, fail_on)

    @property
    def extra(self) -> dict[str, Any]:
        """What the reports list besides the findings: the inputs not read, the files skipped."""
        extra: dict[str, Any] = {"unreadable": self.unreadable} if self.unreadable else {}
        if self.not_deepspeed:
            extra["not_deepspeed"] = self.not_deepspeed
        if self.skipped:
            extra["skipped"] = self.skipped
        return extra

    def report(self, format: str = "text") -> str:
        """The report the command line prints: text, json, sarif or github."""
        return _render(format, self.findings, files=self.files, rules=self.rules, extra=self.extra)


def lint(inputs: RunInputs, stdin: BinaryIO | None = None) -> LintResult:
    """Lint the run's configs: files, directories and glob patterns (``-`` reads ``stdin``, standard input by
    default), or one config in memory.

    Files found in a directory (.json, .hjson, .conf, .yaml, .yml) are linted when their content is a
    DeepSpeed or Accelerate config (deepspeed/kind.py) and listed in ``skipped`` otherwise;
    ``only_configs`` judges named files the same way (the pre-commit hook). An Accelerate config of a run
    without DeepSpeed (FSDP, MULTI_GPU) is not linted: found so, it is skipped with a line in ``notes``; named,
    it gets a line in ``not_deepspeed`` (the command line's exit 4). The rules are chosen per file
    (inputs/rules.py: the project configuration's per-file ignores on the command line). An input that
    cannot be read at all is listed in ``unreadable`` and the others are still linted; a path that names
    nothing (an empty directory, a pattern without matches) is a UsageError.
    """
    from zeroadvisor.config.reader import InputError
    from zeroadvisor.deepspeed.kind import kind_of_file, not_deepspeed_line
    from zeroadvisor.rules.registry import LINT

    options = inputs.lint_options()
    findings: list[Finding] = []
    unreadable: list[str] = []
    skipped: list[str] = []
    not_deepspeed: list[str] = []
    notes: list[str] = []
    files = 0
    used: set[str] = set()  # codes of the rules some file was linted with
    for source, found in _expand(inputs.configs):
        walked = source.is_file and (found or inputs.only_configs)
        if walked and kind_of_file(source.name) is None:
            skipped.append(source.name)
            continue
        rules = inputs.rules.for_file(source.name)
        try:
            linted = _lint_source(source, options, rules, stdin)
        except InputError as err:
            unreadable.append(str(err))
            continue
        if linted.not_deepspeed is not None:
            line = not_deepspeed_line(source.display, linted.not_deepspeed)
            if walked:  # a folder (or the pre-commit hook) holds other runs' configs too
                skipped.append(source.name)
                notes.append(f"skipped {line}")
            else:
                not_deepspeed.append(line)
            continue
        used.update(r.code for r in rules)
        findings.extend(linted.findings)
        files += 1
    # every rule some file was linted with, in the catalogue's order (lint runs lint rules only)
    rules_used = tuple(r for r in LINT if r.code in used) or inputs.rules.given()
    return LintResult(findings, files, unreadable, skipped, rules_used, not_deepspeed, notes)


def _expand(configs: Sequence[ConfigSource]) -> list[tuple[ConfigSource, bool]]:
    """(source, found in a folder) for each config: paths expanded (config/paths.py), in-memory ones as they are."""
    from zeroadvisor.config.paths import PathError, expand_inputs
    from zeroadvisor.inputs.source import ConfigSource

    if not any(source.text is None for source in configs):
        return [(source, False) for source in configs]
    try:
        expanded = expand_inputs([source.name for source in configs])
    except PathError as err:
        raise UsageError(str(err)) from None
    return [(ConfigSource.path(item.path, dash_is_stdin=True), item.found) for item in expanded]


@dataclass(frozen=True)
class _Linted:
    """One config's findings, or (not_deepspeed) what it is when it is the config of a run without DeepSpeed."""

    findings: list[Finding]
    not_deepspeed: str | None = None


def _lint_source(source: ConfigSource, options: LintOptions | None, rules: Sequence[Rule],
                 stdin: BinaryIO | None) -> _Linted:
    """One config, under the same limits whatever its source (config/reader.py): a config that does not parse
    is findings; one that cannot be read at all raises reader.InputError."""
    from zeroadvisor.config.source import ParseError
    from zeroadvisor.deepspeed.kind import not_deepspeed
    from zeroadvisor.rules.linter import lint_document, parse_error_findings

    try:
        document = source.read(stdin)
    except ParseError as err:
        return _Linted(parse_error_findings(source.display, err, rules))
    other = not_deepspeed(document)
    if other is not None:
        return _Linted([], other)
    return _Linted(lint_document(document, options, rules))


# -- estimate -----------------------------------------------------------------------------

@dataclass(frozen=True)
class EstimateResult:
    """Memory per GPU and node for every ZeRO stage and offload option.

    estimate: the full estimate (``stages``, each a StageEstimate with ``per_gpu`` rows, ``phases``,
    ``verdict`` and the ``terms`` with their sources); configured: the config's own option; throughput: the
    step time per option, where asked for (``step_times``).
    """

    estimate: Estimate
    throughput: dict[Option, StepTime] | None = None

    @property
    def configured(self) -> StageEstimate | None:
        return self.estimate.configured

    @property
    def verdict(self) -> str | None:
        """fits, tight or does-not-fit for the configured option; None without a GPU memory."""
        return None if self.configured is None else self.configured.verdict

    def to_dict(self) -> dict[str, Any]:
        return self.estimate.to_dict()

    def report(self, format: str = "text", unit: str = "GB", explain: bool = False) -> str:
        """The estimate table (text) or its JSON."""
        return _render(format, [], estimate=self.estimate, unit=unit, explain=explain, throughput=self.throughput)


def estimate(inputs: RunInputs, step_times_too: bool = False) -> EstimateResult:
    """Memory per GPU and node for every stage of the run's config (none: DeepSpeed's defaults, fp16 Adam);
    with ``step_times_too`` the step time per option on ``inputs.hardware``.

    A config that does not parse, is not an object, or holds a value the memory model cannot use (which the
    linter reports as an error) is an UnusableConfig; a value the config contradicts is a UsageError.
    """
    from zeroadvisor.deepspeed.kind import ACCELERATE, kind_of
    from zeroadvisor.deepspeed.settings import settings_of

    source = inputs.configs[0] if inputs.configs else None
    name = source.display if source is not None else None
    model, shape, cluster = inputs.model, inputs.shape, inputs.cluster
    if model is None or shape is None or cluster is None:  # inputs.run.build refuses an estimate without them
        raise ValueError("an estimate needs the model and the cluster")
    data = document = None
    if source is not None and name is not None:
        document = _read_config(source)
        if not isinstance(document.data, dict):
            raise UnusableConfig(f"{name}: the config is not a JSON object")
        if inputs.training is not None:  # "auto" filled as the Hugging Face Trainer fills it
            document = trainer_filled(document, inputs.training, cluster.gpus, model.hidden_size)
            shape = trainer_shape(document.data, shape, inputs.training)
        data = document.data
        if kind_of(document) == ACCELERATE:  # the DeepSpeed config it makes Accelerate build, on its world
            data, shape, cluster = _accelerate_estimate_inputs(name, document, shape, cluster)
            _refuse_conflicts(name, data, model, cluster.gpus, shape)
        else:
            _refuse_conflicts(name, settings_of(document), model, cluster.gpus, shape)
    _refuse_layout(name, data, cluster.gpus, shape)
    from zeroadvisor.memory.estimate import estimate as memory_estimate

    try:
        result = EstimateResult(memory_estimate(data, model, shape, cluster, inputs.accounting))
    except (ValueError, TypeError) as err:
        # Bad input only when the linter agrees the config is wrong; otherwise a bug to report.
        errors = _lint_errors(document) if document is not None else []
        if not errors:
            raise
        first = errors[0]
        raise UnusableConfig(f"{name}:{first.line}:{first.column}: cannot estimate from this config: "
                             f"{first.message} ({len(errors)} error(s); see 'zeroadvisor lint {name}')") from err
    if step_times_too and inputs.hardware is not None:
        return replace(result, throughput=step_times(result.estimate, inputs.hardware))
    return result


def step_times(result: Estimate, hardware: Hardware) -> dict[Option, StepTime]:
    """Step time per option of ``result`` (zeroadvisor.throughput.per_option, on the config the estimate was
    made of). Where a step time was computed, the machine facts left to their defaults join the estimate's
    assumed inputs."""
    from zeroadvisor.memory.assumed import hardware_assumptions
    from zeroadvisor.throughput import Throughput, per_option

    steps = per_option(result, hardware)
    if any(isinstance(step, Throughput) for step in steps.values()):
        result.assumed = [*result.assumed, *hardware_assumptions(hardware)]
    return steps


def _accelerate_estimate_inputs(name: str, document: Document, shape: TrainingShape,
                                cluster: Cluster) -> tuple[dict[str, Any], TrainingShape, Cluster]:
    from zeroadvisor.advisor.accelerate import AccelerateConflict, estimate_inputs

    try:
        data, shape, cluster, why = estimate_inputs(name, document, shape, cluster)
    except AccelerateConflict as err:
        raise UsageError(str(err)) from None
    if data is None:
        raise UnusableConfig(f"{name}: cannot estimate: {why}")
    return data, shape, cluster


def _refuse_conflicts(name: str, config: Config, model: ModelSpec, gpus: int, shape: TrainingShape) -> None:
    """A flag or model-description value the config contradicts is a UsageError (exit 2): DeepSpeed
    runs the config's value, so estimating either one would answer a question nobody asked."""
    from zeroadvisor.memory.settings import given_conflicts

    conflicts = given_conflicts(config, model, gpus, shape)
    if conflicts:
        raise UsageError(f"{name}: {conflicts[0]}")


def _refuse_layout(name: str | None, data: dict[str, Any] | None, gpus: int, shape: TrainingShape) -> None:
    """Parallel degrees that do not divide the GPUs are a UsageError (exit 2): no run has that layout."""
    from zeroadvisor.memory.errors import EstimateError
    from zeroadvisor.memory.parallel import read_parallel

    try:
        read_parallel(data, gpus, shape)
    except EstimateError as err:
        raise UsageError(f"{name}: {err}" if name else str(err)) from None


def _read_config(source: ConfigSource) -> Document:
    from zeroadvisor.config.source import ParseError

    try:
        return source.read()
    except ParseError as err:
        where = f"{source.display}:{err.line}:{err.column}" if err.line else source.display
        raise UnusableConfig(f"{where}: {err.message}") from None


def _lint_errors(document: Document) -> list[Finding]:
    from zeroadvisor.rules.linter import lint_document

    return [f for f in lint_document(document) if f.severity is Severity.ERROR]


# -- check --------------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckReport:
    """Lint findings and memory advice for one config.

    findings: lint findings and the advice (ZA8xx: does-not-fit with the cheapest change that fits,
    ...); result: the full CheckResult (its ``estimate`` is None when the config does not parse or
    holds a value the memory model cannot use, and ``notes`` say why); diff: the fixes as a unified
    diff of the file (when asked for); fixed: the fixes written (the command line's ``--fix``); error: why the
    asked-for fixes could not be written; rules: the rules it was checked with.
    not_deepspeed: the one line saying that the config is an Accelerate config of a run without DeepSpeed (FSDP,
    MULTI_GPU), which is neither linted nor estimated (no findings, no estimate; the command line's exit 4).
    """

    path: str
    result: CheckResult
    diff: str = ""
    notes: list[str] = field(default_factory=list)  # one line each, for the user beside the report
    fixed: int | None = None
    error: str | None = None
    rules: tuple[Rule, ...] = ()
    not_deepspeed: str | None = None

    @property
    def findings(self) -> list[Finding]:
        return self.result.findings

    @property
    def estimate(self) -> Estimate | None:
        return self.result.estimate

    @property
    def verdict(self) -> str | None:
        """fits, tight or does-not-fit for the configured stage and offload; None without an estimate."""
        configured = self.estimate.configured if self.estimate is not None else None
        return None if configured is None else configured.verdict

    @property
    def fits(self) -> bool | None:
        """False on does-not-fit ("tight" fits, inside the headroom); None without an estimate."""
        return None if self.verdict is None else self.verdict != "does-not-fit"

    @property
    def errors(self) -> int:
        return _count(self.findings, Severity.ERROR)

    def fails(self, fail_on: str = "error") -> bool:
        return fails(self.findings, fail_on)

    def report(self, format: str = "text", explain: bool = False) -> str:
        """The report the command line prints: text, json, sarif, github or markdown."""
        return _render(format, self.findings, rules=self.rules, check=self.result, path=self.path,
                       diff=self.diff, unit=self.result.options.unit, explain=explain)


def check(inputs: RunInputs) -> Iterator[CheckReport]:
    """Each of the run's configs against the same model and cluster, one report each, in order."""
    for source in inputs.configs:
        yield check_one(inputs, source)


def check_one(inputs: RunInputs, source: ConfigSource) -> CheckReport:
    """Lint findings and memory advice for one config; its fixes as a diff, or written (``inputs.diff``,
    ``inputs.fix``).

    A config that does not parse is reported as findings (no estimate). A fix that cannot be made (a YAML
    config, a read-only folder, a full disk) does not lose the result: it comes back with ``error`` (fix) or
    a note (a diff only).
    """
    from zeroadvisor.advisor.check import CheckResult, check_document
    from zeroadvisor.config.source import ParseError
    from zeroadvisor.deepspeed.kind import ACCELERATE, kind_of, not_deepspeed, not_deepspeed_line
    from zeroadvisor.deepspeed.settings import settings_of
    from zeroadvisor.rules.linter import parse_error_findings

    name = source.display
    options = inputs.check_options()
    rules = inputs.rules.for_file(source.name)
    try:
        document = source.read()
    except ParseError as err:
        lint_rules = [r for r in rules if not r.needs_advice]
        return CheckReport(name, CheckResult(parse_error_findings(name, err, lint_rules), None, options), rules=rules)
    other = not_deepspeed(document)
    if other is not None:  # an FSDP or DDP run: nothing of DeepSpeed's to check
        return CheckReport(name, CheckResult([], None, options), rules=rules,
                           not_deepspeed=not_deepspeed_line(name, other))
    if isinstance(document.data, dict) and options.training is not None:
        # DeepSpeed gets the config with "auto" filled from the Trainer's arguments
        document = trainer_filled(document, options.training, options.cluster.gpus, options.model.hidden_size)
        options = replace(options, shape=trainer_shape(document.data, options.shape, options.training))
    if kind_of(document) == ACCELERATE:
        result = _check_accelerate(name, document, options, rules)
    else:
        if isinstance(document.data, dict):
            _refuse_conflicts(name, settings_of(document), options.model, options.cluster.gpus, options.shape)
        result = check_document(document, options, rules)
    notes = []
    if "estimate_error" in result.extra:
        notes.append(f"{name}: no memory estimate ({result.extra['estimate_error']}): fix the errors reported first")
    return _with_fixes(CheckReport(name, result, notes=notes, rules=rules), source, document, inputs)


def _with_fixes(report: CheckReport, source: ConfigSource, document: Document, inputs: RunInputs) -> CheckReport:
    """``report`` with its fixes as a diff (``inputs.diff``) or written into the file (``inputs.fix``)."""
    from zeroadvisor.advisor.check import combined_patch
    from zeroadvisor.fix.apply import FixError, unified_diff

    if not (inputs.diff or inputs.fix):
        return report
    name = report.path
    patch = combined_patch(report.findings)
    if not patch:
        return replace(report, fixed=0) if inputs.fix else report
    try:
        diff = unified_diff(document, patch, name)
    except FixError as err:  # e.g. a YAML config: the report stands, without the diff
        if inputs.fix:
            return replace(report, error=f"{name}: {err}")
        return replace(report, notes=[*report.notes, f"{name}: {err}"])
    report = replace(report, diff=diff)
    return _written(report, source, document, patch) if inputs.fix else report


def _written(report: CheckReport, source: ConfigSource, document: Document, patch: dict[str, Any]) -> CheckReport:
    """``report`` after its fixes were written into the file, or with the error that stopped them (one line)."""
    from zeroadvisor.fix.apply import FixError, write_fix

    name = report.path
    if not source.is_file:
        return replace(report, error=f"{name}: the config was not read from a file: no file to write the fixes to")
    try:
        write_fix(name, document, patch)
    except FixError as err:
        return replace(report, error=f"{name}: {err}")
    except OSError as err:
        return replace(report, error=f"{name}: cannot write the fixes: {err.strerror or err}")
    return replace(report, fixed=sum(1 for f in report.findings if f.fix))


def _check_accelerate(name: str, document: Document, options: CheckOptions,
                      rules: Sequence[Rule]) -> CheckResult:
    """An Accelerate launcher config: checked as the DeepSpeed config Accelerate builds from it."""
    from zeroadvisor.advisor.accelerate import AccelerateConflict, check_accelerate

    def refuse(where: str, data: dict[str, Any], run: CheckOptions) -> None:
        _refuse_conflicts(where, data, run.model, run.cluster.gpus, run.shape)

    try:
        return check_accelerate(name, document, options, list(rules), refuse)
    except AccelerateConflict as err:
        raise UsageError(str(err)) from None


# -- the Hugging Face Trainer -------------------------------------------------------------

def trainer_filled(document: Document, training: TrainingArgs, world_size: int | None,
                   hidden_size: int | None) -> Document:
    """``document`` with the data DeepSpeed gets under the Trainer: "auto" filled from ``training`` as
    transformers' HfTrainerDeepSpeedConfig does, then the precision section Accelerate adds for --fp16/--bf16
    (deepspeed/hf_fill.py). Positions stay those of the file; mismatches are left for rule ZA310."""
    from zeroadvisor.deepspeed import hf_fill

    filled = hf_fill.fill(document.data, training, world_size, hidden_size)
    return replace(document, data=hf_fill.accelerate_precision(filled.config, training))


def trainer_shape(data: dict[str, Any], shape: TrainingShape, training: TrainingArgs) -> TrainingShape:
    """The micro batch the Trainer's dataloader feeds (per_device_train_batch_size) where the config names
    no batch size (where it does, the filled config decides and ZA310 reports a difference)."""
    from zeroadvisor.deepspeed.effective import MBS, TBS

    if shape.micro_batch_size is not None or MBS in data or TBS in data:
        return shape
    return replace(shape, micro_batch_size=training.get("per_device_train_batch_size"))
