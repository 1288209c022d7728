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

from zeroadvisor.deepspeed import schema
from zeroadvisor.deepspeed.effective import AUTO, BATCH_KEYS
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.errors import UnusableConfig, UsageError
from zeroadvisor.inputs.release import release_notes
from zeroadvisor.inputs.settings import FAIL_ON, FailOn
from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.report.formats import OutputFormat
from zeroadvisor.vocab import Verdict

if TYPE_CHECKING:
    from zeroadvisor.advisor.check import CheckOptions, CheckResult
    from zeroadvisor.config.excludes import Excludes
    from zeroadvisor.config.source import Document
    from zeroadvisor.deepspeed.settings import Config
    from zeroadvisor.inputs.release import ReleaseChoice
    from zeroadvisor.inputs.run import RunInputs
    from zeroadvisor.inputs.source import ConfigSource
    from zeroadvisor.lint.context import LintOptions
    from zeroadvisor.lint.rule import Rule
    from zeroadvisor.memory.cluster import Cluster
    from zeroadvisor.memory.estimate import Estimate, StageEstimate
    from zeroadvisor.memory.options import Option
    from zeroadvisor.model.spec import ModelSpec, TrainingShape
    from zeroadvisor.throughput import StepTime

__all__ = ["CheckReport", "CheckRun", "EstimateResult", "LintResult", "check", "check_one", "estimate", "fails", "lint"]


def fails(findings: Iterable[Finding], fail_on: FailOn | str) -> bool:
    """Whether any finding is at or above the ``--fail-on`` severity (error, warning, info or never): its name, as
    users pass it, or a FailOn."""
    if fail_on not in FAIL_ON:
        given = fail_on.value if isinstance(fail_on, FailOn) else fail_on  # as the user spelled it
        raise UsageError(f"fail_on must be one of {', '.join(FAIL_ON)}, got {given!r}")
    threshold = FailOn(fail_on)
    return any(threshold.catches(f.severity) for f in findings)


def _count(findings: Sequence[Finding], severity: Severity) -> int:
    return sum(1 for f in findings if f.severity is severity)


# The formats a result without a check renders: every one but markdown, which is the check's pull-request
# comment (its verdict, the estimate and the suggested change; report/markdown.py needs Report.check).
CHECK_ONLY_FORMATS = (OutputFormat.MARKDOWN,)


def _render(fmt: str, findings: list[Finding], *, result: Command = Command.CHECK, **fields: Any) -> str:
    """``fmt`` (a format's name, as users pass it, or an OutputFormat) of the result named ``result`` (lint,
    estimate, check); a format that result does not render is a UsageError listing the ones it does."""
    from zeroadvisor.report import REPORTERS, Report, render

    formats = (tuple(REPORTERS) if result == Command.CHECK
               else tuple(f for f in REPORTERS if f not in CHECK_ONLY_FORMATS))
    if not isinstance(fmt, str):  # a list or a number from a caller: no dict lookup may raise TypeError
        raise UsageError(f"format must be one of {', '.join(formats)} (a string), got {type(fmt).__name__}")
    if fmt not in formats:
        given = fmt.value if isinstance(fmt, OutputFormat) else fmt  # as the user spelled it
        also = f" ({given} renders a check)" if fmt in REPORTERS else ""
        raise UsageError(f"format must be one of {', '.join(formats)} for a{'n' if result[0] in 'aeiou' else ''} "
                         f"{result} result, got {given!r}{also}")
    return render(OutputFormat(fmt), Report(findings, **fields))


# -- lint -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LintResult:
    """What ``lint`` found.

    findings: every finding, in file order (with ``fix``: what remains in the fixed files); files: inputs read
    and linted; unreadable: one line per input that could not be read; skipped: files found in a folder that are
    not DeepSpeed configs (judged by content: no config at all, or an Accelerate config of a run without
    DeepSpeed); notes: one line per skipped Accelerate config, saying what it is; not_deepspeed: one line per
    input named that is an Accelerate config of a run without DeepSpeed (an FSDP or multi-GPU config: not
    linted, see deepspeed/kind.py ``not_deepspeed``); rules: every rule some file was linted with.

    With ``fix`` or ``diff`` (the command line's ``--fix``/``--diff``): fixed: the findings the fixes remove
    (written, or that would be); remaining: the findings left after them; diff: the fixes as a unified diff of
    every file they change; changed: those files; fix_errors: one line per file whose fixes cannot be written.
    """

    findings: list[Finding]
    files: int
    unreadable: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    rules: tuple[Rule, ...] = ()
    fixed: int = 0
    remaining: int = 0
    diff: str = ""
    changed: tuple[str, ...] = ()
    fix_errors: tuple[str, ...] = ()
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
        if self.skipped:
            extra["skipped"] = self.skipped
        if self.not_deepspeed:
            extra["not_deepspeed"] = self.not_deepspeed
        return extra

    def report(self, format: str = "text") -> str:
        """The report the command line prints: text, json, sarif or github (html too; markdown, the check's pull
        request comment, is a UsageError)."""
        return _render(format, self.findings, result=Command.LINT, files=self.files, rules=self.rules, extra=self.extra)


@dataclass(frozen=True)
class _Fixed:
    """What ``--fix``/``--diff`` did to one file (``_lint_fixes``)."""

    findings: list[Finding]  # what the report shows: the remaining findings (fix), the file's own (diff)
    fixed: int = 0
    remaining: int = 0
    diff: str = ""
    error: str | None = None


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

    ``inputs.fix`` writes each file's fixes (atomically, every byte outside them kept: zeroadvisor/fix) and
    reports what remains; ``inputs.diff`` gives them as a diff and writes nothing (fix/apply.py plan_lint_fixes:
    fixed, linted again and fixed again until nothing changes). The check command runs this flow too when it
    is given no model or cluster (``check --fix`` without the memory advice).
    """
    from zeroadvisor.config.reader import InputError
    from zeroadvisor.deepspeed.kind import not_deepspeed_line
    from zeroadvisor.rules.registry import LINT

    options = inputs.lint_options()
    not_deepspeed: list[str] = []
    notes: list[str] = []
    findings: list[Finding] = []
    unreadable: list[str] = []
    files = fixed = remaining = 0
    diffs: list[str] = []
    changed: list[str] = []
    fix_errors: list[str] = []
    used: set[str] = set()  # codes of the rules some file was linted with
    sources, skipped, walk_notes = _to_read(inputs)
    notes += walk_notes
    for source, walked in sources:
        # lint runs the lint rules; check's advice rules need the memory model (check without it: fixes only)
        rules = [r for r in inputs.rules.for_file(source.name) if not r.needs_advice]
        release = inputs.release_for(source)
        notes += release_notes(release, notes)
        # the fixes' relint reads the file as the same releases: read as the latest alone, a second pass would
        # make the fix the first pass left out because another pinned release does not want it
        per_file = replace(options, releases=release.releases)
        try:
            found, document, other = _lint_source(source, per_file, rules, stdin)
        except InputError as err:
            unreadable.append(str(err))
            continue
        if other is not None:  # the config of a run without DeepSpeed (FSDP, DDP)
            line = not_deepspeed_line(source.display, other)
            if walked:  # a folder (or the pre-commit hook) holds other runs' configs too
                skipped.append(source.name)
                notes.append(f"skipped {line}")
            else:
                not_deepspeed.append(line)
            continue
        used.update(r.code for r in rules)
        files += 1
        if document is None or not (inputs.fix or inputs.diff):
            findings.extend(found)
            continue
        outcome = _lint_fixes(source, document, found, per_file, rules, write=inputs.fix)
        if found and not outcome.diff and outcome.error is None:
            notes += _no_diff_note(source.display, document, inputs.fix)
        findings.extend(outcome.findings)
        fixed, remaining = fixed + outcome.fixed, remaining + outcome.remaining
        if outcome.error is not None:
            fix_errors.append(outcome.error)
        if outcome.diff:
            diffs.append(outcome.diff)
            changed.append(source.display)
    # every rule some file was linted with, in the catalogue's order (lint runs lint rules only)
    linted = tuple(r for r in LINT if r.code in used) or tuple(r for r in inputs.rules.given() if not r.needs_advice)
    return LintResult(findings, files, unreadable, skipped, linted, fixed, remaining, "".join(diffs), tuple(changed),
                      tuple(fix_errors), not_deepspeed, notes)


def _no_diff_note(name: str, document: Document, written: bool) -> list[str]:
    """Why a YAML config's findings come without a diff (one line), where it is YAML; imported only once fixes
    are asked for (plain lint never loads the fixer)."""
    from zeroadvisor.fix.apply import no_diff_note, patchable

    return [] if patchable(document) else [no_diff_note(name, document, written)]


def _to_read(inputs: RunInputs) -> tuple[list[tuple[ConfigSource, bool]], list[str], list[str]]:
    """The configs to read, paths expanded (directories, glob patterns: config/paths.py) for lint and check alike,
    each with whether it was walked to (found in a directory, or named with ``only_configs``), the files
    skipped: walked to and not a DeepSpeed or Accelerate config by their content (deepspeed/kind.py), and the
    notes of the walks (git could not say what .gitignore leaves out)."""
    from zeroadvisor.deepspeed.kind import kind_of_file

    sources: list[tuple[ConfigSource, bool]] = []
    skipped: list[str] = []
    expanded, notes = _expand(inputs.configs, inputs.excludes, dash_is_stdin=inputs.command is Command.LINT)
    for source, found in expanded:
        walked = source.is_file and (found or inputs.only_configs)
        if walked and kind_of_file(source.name) is None:
            skipped.append(source.name)
        else:
            sources.append((source, walked))
    return sources, skipped, notes


def _expand(configs: Sequence[ConfigSource], excludes: Excludes,
            dash_is_stdin: bool) -> tuple[list[tuple[ConfigSource, bool]], list[str]]:
    """(source, found in a folder) for each config: paths expanded (config/paths.py), in-memory ones as they are;
    and the notes of the folder walks."""
    from zeroadvisor.config.paths import PathError, expand_walk
    from zeroadvisor.inputs.source import ConfigSource

    if not any(source.text is None for source in configs):
        return [(source, False) for source in configs], []
    try:
        expanded = expand_walk([source.name for source in configs], excludes)
    except PathError as err:
        raise UsageError(str(err)) from None
    return ([(ConfigSource.path(item.path, dash_is_stdin=dash_is_stdin), item.found) for item in expanded.inputs],
            expanded.notes)


def _lint_source(source: ConfigSource, options: LintOptions | None, rules: Sequence[Rule],
                 stdin: BinaryIO | None) -> tuple[list[Finding], Document | None, str | None]:
    """One config's findings, its document (None where it does not parse) and, for the config of a run without
    DeepSpeed (deepspeed/kind.py ``not_deepspeed``), what it is instead (not linted), under the same limits
    whatever its source (config/reader.py): a config that does not parse is findings; one that cannot be read
    at all raises reader.InputError."""
    from zeroadvisor.config.source import ParseError
    from zeroadvisor.deepspeed.kind import not_deepspeed
    from zeroadvisor.rules.linter import lint_document, parse_error_findings

    try:
        document = source.read(stdin)
    except ParseError as err:
        return parse_error_findings(source.display, err, rules), None, None
    other = not_deepspeed(document)
    if other is not None:
        return [], document, other
    return lint_document(document, options, rules), document, None


def _lint_fixes(source: ConfigSource, document: Document, findings: list[Finding], options: LintOptions | None,
                rules: Sequence[Rule], write: bool) -> _Fixed:
    """One file's lint fixes: planned (fixed, linted again, fixed again), then written when ``write``."""
    from zeroadvisor.fix.apply import FixError, plan_lint_fixes, write_fixes
    from zeroadvisor.rules.linter import lint_document

    name = source.display
    if write and not source.is_file:  # inputs/run.py refuses --fix on standard input; text in memory has no file
        return _Fixed(findings, remaining=len(findings), error=f"{name}: not read from a file: no file to write the "
                      "fixes to")
    planned = plan_lint_fixes(name, document, findings, lambda fixed: lint_document(fixed, options, rules))
    plan = planned.plan
    if plan.error is not None:
        return _Fixed(findings, remaining=len(findings), error=f"{name}: {plan.error}")
    if not plan.changes:
        return _Fixed(findings, remaining=len(findings))
    if write:
        try:
            write_fixes(plan)
        except FixError as err:
            return _Fixed(findings, remaining=len(findings), error=f"{name}: {err}")
        except OSError as err:
            why = err.strerror or err
            return _Fixed(findings, remaining=len(findings), error=f"{name}: cannot write the fixes: {why}")
    after = planned.remaining
    return _Fixed(after if write else findings, planned.fixed, len(after), plan.diff)


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
    def verdict(self) -> Verdict | None:
        """fits, tight, does-not-fit or unknown for the configured option; None without a GPU memory."""
        return None if self.configured is None else self.configured.verdict

    def to_dict(self) -> dict[str, Any]:
        return self.estimate.to_dict()

    def report(self, format: str = "text", unit: str | None = None, explain: bool = False) -> str:
        """The estimate table (text) or its JSON (``unit``: GiB, or the paper's GB for its accounting); sarif, github
        and html too; markdown, the check's pull request comment, is a UsageError."""
        from zeroadvisor.units import unit_for

        return _render(format, [], result=Command.ESTIMATE, estimate=self.estimate,
                       unit=unit or unit_for(self.estimate.accounting), explain=explain, throughput=self.throughput)


def estimate(inputs: RunInputs, step_times_too: bool = False) -> EstimateResult:
    """Memory per GPU and node for every stage of the run's config (none: DeepSpeed's defaults, fp16 Adam);
    with ``step_times_too`` the step time per option on ``inputs.hardware``.

    A config that does not parse, is not an object, or holds a value the memory model cannot use (which the
    linter reports as an error) is an UnusableConfig; a value the config contradicts is a UsageError.
    """
    # the memory model reads that release's defaults (offload pin_memory, gradient_clipping): the newest of a range
    release = inputs.release_for(inputs.configs[0] if inputs.configs else None)
    with schema.reading_as(release.releases[-1]):
        return _estimate(inputs, release, step_times_too)


def _estimate(inputs: RunInputs, release: ReleaseChoice, step_times_too: bool = False) -> EstimateResult:
    from zeroadvisor.advisor.trainer import trainer_filled, trainer_shape
    from zeroadvisor.deepspeed.kind import ACCELERATE, kind_of
    from zeroadvisor.deepspeed.settings import as_settings, settings_of
    from zeroadvisor.inputs.release import say_release
    from zeroadvisor.throughput.timed import step_times

    source = inputs.configs[0] if inputs.configs else None
    name = source.display if source is not None else None
    model, shape, cluster = inputs.model, inputs.shape, inputs.cluster
    if model is None or shape is None or cluster is None:  # inputs.run.build refuses an estimate without them
        raise ValueError("an estimate needs the model and the cluster")
    document = None
    config: Config = None  # what DeepSpeed reads of the config: read once, for the refusals and the estimate
    if source is not None and name is not None:
        document = _read_config(source)
        if isinstance(document.data, dict) and inputs.training is not None:  # "auto" filled as the Trainer fills it
            document = trainer_filled(document, inputs.training, cluster.gpus, model.hidden_size)
        if not isinstance(document.data, dict):
            raise UnusableConfig(f"{name}: the config is not a JSON object")
        if inputs.training is not None:
            shape = trainer_shape(document.data, shape, inputs.training)
        if kind_of(document) == ACCELERATE:  # the DeepSpeed config it makes Accelerate build, on its world
            data, shape, cluster = _accelerate_estimate_inputs(name, document, shape, cluster)
            config = as_settings(data)
        else:
            config = settings_of(document)
        _refuse_conflicts(name, config, model, cluster.gpus, shape)
    _refuse_layout(name, config, cluster.gpus, shape)
    from zeroadvisor.memory.estimate import estimate as memory_estimate

    try:
        result = EstimateResult(say_release(memory_estimate(config, model, shape, cluster, inputs.accounting),
                                            release, config))
    except (ValueError, TypeError) as err:
        # Bad input only when the linter agrees the config is wrong; otherwise a bug to report.
        errors = _lint_errors(document, replace(inputs.lint_options(), releases=release.releases)) \
            if document is not None else []
        if not errors:
            raise
        first = errors[0]
        raise UnusableConfig(f"{name}:{first.line}:{first.column}: cannot estimate from this config: "
                             f"{first.message} ({len(errors)} error(s); see 'zeroadvisor lint {name}')") from err
    if step_times_too and inputs.hardware is not None:
        timed, steps = step_times(result.estimate, inputs.hardware)
        return replace(result, estimate=timed, throughput=steps)
    return result


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


def _refuse_layout(name: str | None, config: Config, gpus: int, shape: TrainingShape) -> None:
    """Parallel degrees that do not divide the GPUs are a UsageError (exit 2): no run has that layout."""
    from zeroadvisor.memory.errors import EstimateError
    from zeroadvisor.memory.parallel import read_parallel

    try:
        read_parallel(config, gpus, shape)
    except EstimateError as err:
        raise UsageError(f"{name}: {err}" if name else str(err)) from None


def _read_config(source: ConfigSource) -> Document:
    from zeroadvisor.config.source import ParseError

    try:
        return source.read()
    except ParseError as err:
        where = f"{source.display}:{err.line}:{err.column}" if err.line else source.display
        raise UnusableConfig(f"{where}: {err.message}") from None


def _lint_errors(document: Document, options: LintOptions) -> list[Finding]:
    """The lint errors that explain why the memory model could not read ``document``: linted with the run's
    options and as every release its pin admits (``options.releases``), so the error named is one ``lint``
    reports too, not one of the latest release's that the pinned releases do not have."""
    from zeroadvisor.rules.linter import lint_document

    return [f for f in lint_document(document, options) if f.severity is Severity.ERROR]


# -- check --------------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckReport:
    """Lint findings and memory advice for one config.

    findings: lint findings and the advice (ZA8xx: does-not-fit with the cheapest change that fits,
    ...); result: the full CheckResult (its ``estimate`` is None when the config does not parse or
    holds a value the memory model cannot use, and ``notes`` say why); diff: the fixes as a unified
    diff of the file (when asked for); fixed: the fixes written (the command line's ``--fix``); error: why the
    asked-for fixes could not be written; rules: the rules it was checked with.
    """

    path: str
    result: CheckResult
    diff: str = ""
    notes: list[str] = field(default_factory=list)  # one line each, for the user beside the report
    fixed: int | None = None
    error: str | None = None
    rules: tuple[Rule, ...] = ()
    # the config is an Accelerate config of a run without DeepSpeed (FSDP, MULTI_GPU): this one line says so, and
    # it is neither linted nor estimated (no findings, no estimate; the command line's exit 4)
    not_deepspeed: str | None = None

    @property
    def findings(self) -> list[Finding]:
        return self.result.findings

    @property
    def estimate(self) -> Estimate | None:
        return self.result.estimate

    @property
    def verdict(self) -> Verdict | None:
        """fits, tight, does-not-fit or unknown for the configured stage and offload; None without an estimate."""
        configured = self.estimate.configured if self.estimate is not None else None
        return None if configured is None else configured.verdict

    @property
    def fits(self) -> bool | None:
        """False on does-not-fit ("tight" fits, inside the headroom); None without an estimate or when the verdict
        is unknown (what is counted fits, something that can change it is not counted)."""
        return None if self.verdict in (None, Verdict.UNKNOWN) else self.verdict != Verdict.DOES_NOT_FIT

    @property
    def errors(self) -> int:
        return _count(self.findings, Severity.ERROR)

    def fails(self, fail_on: str = "error") -> bool:
        return fails(self.findings, fail_on)

    def report(self, format: str = "text", explain: bool = False) -> str:
        """The report the command line prints: text, json, sarif, github, markdown or html."""
        return _render(format, self.findings, rules=self.rules, check=self.result, path=self.path,
                       diff=self.diff, unit=self.result.options.unit, explain=explain)


@dataclass(frozen=True)
class CheckRun:
    """The configs one ``check`` reads (paths expanded as lint expands them), and the files it skipped (found in a
    directory and not a DeepSpeed or Accelerate config); iterate it for one CheckReport per config, in order."""

    inputs: RunInputs
    sources: tuple[ConfigSource, ...]
    skipped: tuple[str, ...] = ()
    walked: frozenset[str] = frozenset()  # the sources found in a directory: another run's config there is skipped
    notes: list[str] = field(default_factory=list)  # one line per such config skipped (filled while iterating)

    def __iter__(self) -> Iterator[CheckReport]:
        for source in self.sources:
            report = check_one(self.inputs, source)
            if report.not_deepspeed is not None and source.name in self.walked:
                self.notes.append(f"skipped {report.not_deepspeed}")
                continue
            yield report

    def __len__(self) -> int:
        return len(self.sources)


def check(inputs: RunInputs) -> CheckRun:
    """Each of the run's configs against the same model and cluster: files, directories and glob patterns, a
    directory's files judged by content as ``lint DIR`` judges them (a folder of configs and other JSON). A path
    that names nothing, or only files that are not configs, is a UsageError."""
    if inputs.lint_only:  # no model: the command line runs the lint flow (lint) instead
        raise ValueError("check needs the model and the cluster; without them run the lint flow")
    sources, skipped, walk_notes = _to_read(inputs)
    if not sources:
        from zeroadvisor.deepspeed.kind import NOT_A_CONFIG

        raise UsageError(f"{', '.join(s.name for s in inputs.configs)}: no config to check ({len(skipped)} "
                         f"file(s) skipped: {NOT_A_CONFIG})")
    return CheckRun(inputs, tuple(source for source, _ in sources), tuple(skipped),
                    frozenset(source.name for source, walked in sources if walked), list(walk_notes))


def check_one(inputs: RunInputs, source: ConfigSource) -> CheckReport:
    """Lint findings and memory advice for one config; its fixes as a diff, or written (``inputs.diff``,
    ``inputs.fix``).

    A config that does not parse is reported as findings (no estimate). A fix that cannot be made (a YAML
    config, a read-only folder, a full disk) does not lose the result: it comes back with ``error`` (fix) or
    a note (a diff only).
    """
    release = inputs.release_for(source)
    with schema.reading_as(release.releases[-1]):
        report = _check_one(inputs, source, release.releases)
    notes = release_notes(release, [])
    if len(release.releases) > 1:
        notes.append(f"{source.display}: memory and advice as DeepSpeed {release.releases[-1]}, the newest release "
                     "of the range")
    return replace(report, notes=[*notes, *report.notes]) if notes else report


def _check_one(inputs: RunInputs, source: ConfigSource, read_as: tuple[str, ...]) -> CheckReport:
    from zeroadvisor.advisor.check import CheckResult, check_document
    from zeroadvisor.advisor.trainer import trainer_filled, trainer_shape
    from zeroadvisor.config.launch import overridden, override_notes
    from zeroadvisor.config.source import ParseError
    from zeroadvisor.deepspeed.kind import ACCELERATE, kind_of, not_deepspeed, not_deepspeed_line
    from zeroadvisor.deepspeed.settings import read_batch, settings_of
    from zeroadvisor.rules.linter import parse_error_findings

    name = source.display
    options = replace(inputs.check_options(), releases=read_as)  # the lint part: every release of the pin
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
    notes = []
    as_read = document  # the file's own text and data: what a fix is written on (the Trainer's fill is not)
    accelerate = kind_of(document) == ACCELERATE
    if accelerate and isinstance(document.data, dict) and inputs.overrides and source.name == inputs.accelerate_config:
        notes += override_notes(name, document.data, inputs.overrides)
        document = replace(document, data=overridden(document.data, inputs.overrides))
    if isinstance(document.data, dict) and options.training is not None:
        if not accelerate:  # DeepSpeed gets the config with "auto" filled from the Trainer's arguments
            options = replace(options, trainer_filled=read_batch(document.data).filled_by_integration)
            document = trainer_filled(document, options.training, options.cluster.gpus, options.model.hidden_size)
        filled = document.data
        if isinstance(filled, dict):  # the fill keeps a mapping a mapping
            options = replace(options, shape=trainer_shape(filled, options.shape, options.training))
    if accelerate:
        result = _check_accelerate(name, document, options, rules)
    else:
        if isinstance(document.data, dict):
            _refuse_conflicts(name, settings_of(document), options.model, options.cluster.gpus, options.shape)
        result = check_document(document, options, rules)
    # the batch keys the Trainer fills where the file leaves them "auto": a fix never writes a number there (the
    # Trainer would find it mismatching its arguments, ZA310); a micro batch change is its arguments' (an action)
    trainer_keys = frozenset(key for key in BATCH_KEYS if isinstance(as_read.data, dict)
                             and as_read.data.get(key) == AUTO) if options.training is not None and not accelerate \
        else frozenset()
    return _with_fixes(CheckReport(name, result, notes=notes, rules=rules), source, as_read, inputs, trainer_keys)


def _with_fixes(report: CheckReport, source: ConfigSource, document: Document, inputs: RunInputs,
                trainer_keys: frozenset[str] = frozenset()) -> CheckReport:
    """``report`` with its fixes as a diff (``inputs.diff``) or written into the file (``inputs.fix``), less any
    number written over ``trainer_keys`` (top-level keys the Trainer fills from its arguments: they stay "auto")."""
    from zeroadvisor.advisor.check import combined_patch
    from zeroadvisor.fix.apply import FixError, no_diff_note, patchable, unified_diff

    if not (inputs.diff or inputs.fix):
        return report
    name = report.path
    patch = {key: value for key, value in combined_patch(report.findings).items()
             if key not in trainer_keys or value is None or value == AUTO}
    if not patch and report.findings and not patchable(document):
        # an Accelerate config's findings carry no fix (the changes are to the DeepSpeed config it builds): say
        # why nothing comes, where a JSON config would get its diff (fixed stays None: not "nothing to fix")
        return replace(report, notes=[*report.notes, no_diff_note(name, document, inputs.fix)])
    if not patch:
        return replace(report, fixed=0) if inputs.fix else report
    try:
        diff = unified_diff(document, patch, source.patch_path or name)
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
