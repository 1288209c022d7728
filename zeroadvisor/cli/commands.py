"""What each command does with its parsed values: build the run's inputs (zeroadvisor.inputs), call the API
(zeroadvisor.api), render, choose the exit code.

Typer-free, so that ``lint`` can run without building the typer app (see cli/__init__.py).
Each function takes the keyword values described in cli/options.py and returns an ExitCode.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from zeroadvisor.cli import stdout
from zeroadvisor.cli.exits import ExitCode
from zeroadvisor.cli.stdout import Stdout
from zeroadvisor.inputs.command import Command
from zeroadvisor.report.formats import OutputFormat

if TYPE_CHECKING:
    from zeroadvisor.api import CheckReport, LintResult
    from zeroadvisor.cli.options import CommandSpec
    from zeroadvisor.inputs.run import RunInputs
    from zeroadvisor.inputs.settings import FailOn
    from zeroadvisor.lint.findings import Finding
    from zeroadvisor.report import Report

# each command's parsed values (cli/options.py parse_simple or typer's callback): parameter name -> value as given
Values = Mapping[str, object]

PRE_COMMIT = "PRE_COMMIT"  # set by pre-commit in its hooks' environment (pre_commit/commands/run.py)


def guarded(command: Callable[[Values], ExitCode], values: Values) -> int:
    """Run a command; the library's expected errors (bad input) become one line and exit 2."""
    from zeroadvisor.api import EXPECTED_ERRORS

    try:
        return int(command(values))
    except EXPECTED_ERRORS as err:
        error(str(err))
        return ExitCode.USAGE
    except BrokenPipeError:  # here, not in typer: typer would turn it into exit 1
        return stdout_closed()


def stdout_closed() -> ExitCode:
    """The reader of stdout went away (``| head``): end quietly, without Python's report at exit."""
    # OSError, ValueError: stdout without a descriptor (in-process tests)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return ExitCode.BROKEN_PIPE


def error(message: str) -> None:
    """One line on stderr; file names and values in it are data (escaped for the terminal)."""
    from zeroadvisor.report.escape import terminal

    sys.stderr.write(f"zeroadvisor: {terminal(message)}\n")


def note(message: str) -> None:
    """A note on stderr: what the run read or assumed, said the same way by lint and check (``zeroadvisor: note:``),
    so one grep finds the release a config was read as whichever command read it."""
    error(f"note: {message}")


def _inputs(command: CommandSpec, v: Values) -> RunInputs:
    """The run's inputs from this command's parsed values as a Request (cli/request.py), the project configuration
    and the files they name (zeroadvisor.inputs.run.build, the builder the Python API uses too)."""
    from zeroadvisor.cli.request import to_request
    from zeroadvisor.inputs.run import build

    return build(to_request(command, v), spelling=command.spelling(), project=True)


def lint(v: Values) -> ExitCode:
    from zeroadvisor.cli import options

    return _lint(_inputs(options.LINT, v), stdout.classify())


def _lint(run: RunInputs, out: Stdout) -> ExitCode:
    """lint, and check --fix/--suggest given no model: the findings (with --fix: those the fixes left), or with lint's
    --diff the fixes as a diff alone; the exit code on the findings reported. ``out``: what standard output is
    (cli/stdout.py), which decides how the diff is written."""
    from zeroadvisor import api

    result = api.run_lint(run)
    _lint_lines(run, result)
    if run.command is Command.LINT and run.diff:  # the diff alone on stdout (git apply reads it); lint's exit code
        stdout.write_patch(result.diff, out)
        found = len(result.findings)
        error(f"would fix {result.fixed} of {_findings(found)}" + (f" in {_files(len(result.changed))}"
                                                                  if result.changed else ""))
    elif not _nothing_to_say(run, result) and not _only_other_runs(run, result):
        # json lists the unreadable inputs, text counts them
        _show(run.output.format, _report(result.findings, files=result.files, rules=result.rules, extra=result.extra))
        # check --suggest: the diff after the report, as check shows it
        if run.diff and run.output.format is OutputFormat.TEXT:
            sys.stdout.write("\n" if result.diff else "")
            stdout.write_patch(result.diff, out)
    if run.fix and result.fixed:
        # the files counted, as the summary counts them: under pre-commit each batch of files says its own
        error(f"{_files(result.files)} checked: {_findings(result.fixed + result.remaining)} ({result.fixed} fixed, "
              f"{result.remaining} remaining)")
    if result.unreadable or (run.fix and result.fix_errors):
        return ExitCode.USAGE
    if api.fails(result.findings, run.output.fail_on):
        return ExitCode.FINDINGS
    return ExitCode.NOT_DEEPSPEED if result.not_deepspeed else ExitCode.OK


def _lint_lines(run: RunInputs, result: LintResult) -> None:
    """lint's lines on stderr before its report: errors, then notes. A fix that cannot be written is an error where
    --fix asked to write it (exit 2); where only a diff was asked it fails nothing, and is a note as check says it."""
    for message in (*result.unreadable, *result.not_deepspeed, *(result.fix_errors if run.fix else ())):
        error(message)
    for text in (*(() if run.fix else result.fix_errors), *result.notes):
        note(text)


def _only_other_runs(run: RunInputs, result: LintResult) -> bool:
    """As text, a run that named only configs of runs without DeepSpeed is their lines on stderr (never "0 files
    checked: no problems")."""
    return (bool(result.not_deepspeed) and not result.files and not result.unreadable
            and run.output.format is OutputFormat.TEXT)


def _nothing_to_say(run: RunInputs, result: LintResult) -> bool:
    """Under pre-commit (which sets PRE_COMMIT for its hooks) a text report with no finding is left out: pre-commit
    runs a hook on batches of the files, several processes at once (require_serial: false), so every batch would
    add its own "N files checked: no problems" beside another batch's findings. A batch with findings still ends
    with its summary, which counts that batch's files."""
    clean = not result.findings and not result.unreadable
    return clean and run.output.format is OutputFormat.TEXT and bool(os.environ.get(PRE_COMMIT))


def _findings(count: int) -> str:
    return f"{count} finding{'s' if count != 1 else ''}"


def _files(count: int) -> str:
    return f"{count} file{'s' if count != 1 else ''}"


def estimate(v: Values) -> ExitCode:
    from zeroadvisor import api
    from zeroadvisor.cli import options

    run = _inputs(options.ESTIMATE, v)
    # what the files gave (the Trainer's arguments, the launch command) as check says it, and the training method's
    # notes (a guessed method with the flag that sets it): the report's assumed inputs do not carry them yet
    method = run.shape.method.notes if run.shape is not None else ()
    for text in dict.fromkeys((*run.notes, *method)):
        note(text)
    result = api.run_estimate(run, step_times=True)
    out = run.output
    _show(out.format, _report([], estimate=result.estimate, unit=out.unit, explain=out.explain,
                              all_options=out.all_options, throughput=result.throughput))
    return ExitCode.OK


def check(v: Values) -> ExitCode:
    """Each config against the same model and cluster: text and markdown reports one after another, json
    one document per config (a JSON array when there are several), sarif and github one report of all."""
    from zeroadvisor import api
    from zeroadvisor.cli import options

    run = _inputs(options.CHECK, v)
    out = run.output
    medium = stdout.classify()  # once: the reports' diffs are escaped for a terminal only
    for text in run.notes:
        note(text)
    if run.lint_only:  # --fix/--suggest without a model: the lint fixes, as lint --fix
        ask = options.CHECK.spelling().ask
        note(f"the memory part was skipped (give {ask('model')}, {ask('gpus', 'N')} and {ask('gpu')} for it): "
              "lint findings and their fixes only")
        return _lint(run, medium)
    checked = api.run_check(run)
    if checked.skipped:
        from zeroadvisor.deepspeed.kind import NOT_A_CONFIG

        note(f"{_files(len(checked.skipped))} skipped ({NOT_A_CONFIG}): {', '.join(checked.skipped)}")
    combined = out.format in (OutputFormat.SARIF, OutputFormat.GITHUB)  # one report of every config's findings
    documents: list[str] = []
    patches: list[str] = []  # each text document's diff, where it is written as bytes after it (not on a terminal)
    reports: list[CheckReport] = []
    write_failed = False
    not_deepspeed = False
    for report in checked:
        if report.not_deepspeed is not None:  # one line, and no report
            error(report.not_deepspeed)
            not_deepspeed = True
            continue
        reports.append(report)
        if not combined:
            shown = _report(report.findings, rules=report.rules, check=report.result, path=report.path,
                            diff=report.diff if run.diff else "", unit=out.unit, explain=out.explain,
                            verbose=out.verbose, all_options=out.all_options, terminal=medium.terminal)
            documents.append(_text(out.format, shown))
            patches.append(_patch_after(out.format, shown))
        write_failed = _tell(report, run.fix) or write_failed
    if combined:
        documents.append(_text(out.format, _combined(reports, out.unit)))
    _write_documents(out.format, documents, patches, medium)
    for text in checked.notes:
        note(text)
    return _check_exit(reports, out.fail_on, write_failed=write_failed, not_deepspeed=not_deepspeed)


def _check_exit(reports: list[CheckReport], fail_on: FailOn, *, write_failed: bool, not_deepspeed: bool) -> ExitCode:
    """check's exit code, the first that applies: a fix not written (2), findings at --fail-on (1), a config of a
    run without DeepSpeed (4), a verdict unknown or none (no estimate; 5; --fail-on never: the caller asked for 0),
    else 0."""
    from zeroadvisor import api
    from zeroadvisor.inputs.settings import FailOn

    if write_failed:
        return ExitCode.USAGE
    if any(api.fails(report.findings, fail_on) for report in reports):
        return ExitCode.FINDINGS
    if not_deepspeed:
        return ExitCode.NOT_DEEPSPEED
    # no "fits" in the exit code either while the verdict is unknown, or there is none (nothing estimated)
    unknown = any(report.verdict in ("unknown", None) for report in reports if report.not_deepspeed is None)
    return ExitCode.VERDICT_UNKNOWN if unknown and fail_on is not FailOn.NEVER else ExitCode.OK


def _tell(report: CheckReport, fixing: bool) -> bool:
    """One config's notes, then its write error or what --fix did, on stderr; True when the write failed.

    After the report is built: the findings are never lost to a failed write."""
    for text in report.notes:
        note(text)
    if report.error is not None:
        error(report.error)
        return True
    if fixing and report.fixed is not None:  # None: no fix could be tried (a note says why)
        error(f"applied {report.fixed} fix(es) to {report.path}" if report.fixed else
              f"nothing to fix in {report.path}")
    return False


def _combined(reports: Sequence[CheckReport], unit: str) -> Report:
    """One report of every config's findings (sarif, github); one config's verdict and cluster go with them
    (SARIF run properties, a GitHub notice)."""
    findings = [finding for report in reports for finding in report.findings]
    used = {rule.code: rule for report in reports for rule in report.rules}
    whole = _report(findings, files=len(reports), rules=tuple(used.values()))
    if len(reports) == 1:
        whole = dataclasses.replace(whole, check=reports[0].result, unit=unit, path=reports[0].path)
    return whole


def _patch_after(fmt: OutputFormat, report: Report) -> str:
    """The diff a text report leaves to its writer (report/text.py ``suggested_diff``: off a terminal it is the
    files' bytes, which a rendered str cannot carry); "" for the other formats and on a terminal."""
    if fmt is not OutputFormat.TEXT or report.terminal or not report.diff:
        return ""
    from zeroadvisor.report.text import suggested_diff

    return suggested_diff(report)


def _write_documents(fmt: OutputFormat, documents: Sequence[str], patches: Sequence[str] = (),
                     medium: Stdout = Stdout.STREAM) -> None:
    """The reports on stdout: json ones as one JSON array when there are several, the rest one after another, each
    followed by its patch (written as bytes: cli/stdout.py)."""
    if fmt is OutputFormat.JSON and len(documents) > 1:
        sys.stdout.write("[\n" + ",\n".join(d.rstrip("\n") for d in documents) + "\n]\n")
        return
    for index, document in enumerate(documents):
        sys.stdout.write(("\n" if index else "") + document)
        if index < len(patches):
            stdout.write_patch(patches[index], medium)


def list_rules(v: Values) -> ExitCode:
    from zeroadvisor.advisor import registry

    width = max(len(r.name) for r in registry.ALL)
    sys.stdout.write("".join(f"{r.code}  {r.name:<{width}}  {r.severity.value:<7}  {r.summary}\n"
                             for r in registry.ALL))
    return ExitCode.OK


def explain_rule(v: Values) -> ExitCode:
    from zeroadvisor.inputs.rules import find_rule

    rule = find_rule(str(v["name"]))
    varies = f"\n\nSeverity: {rule.severity.value} by default; {rule.severity_varies}." if rule.severity_varies else ""
    out = [f"{rule.code} {rule.name} [{rule.severity.value}]\n\n{rule.summary}{varies}\n\n{rule.explanation}\n"]
    for example in rule.examples:
        label = "Fails" if example.fails else "Passes"
        options = f" (with {example.describe_options()})" if example.options else ""
        named = f" as {example.name}" if example.name.endswith((".yaml", ".yml")) else ""
        config = example.config.rstrip("\n").replace("\n", "\n  ")  # a YAML example keeps its lines, indented
        out.append(f"{label}{named}{options}:\n  {config}\n")
    if rule.source:
        out.append(f"Source: {rule.source}")
    sys.stdout.write("".join(line + "\n" for line in out))
    return ExitCode.OK


# command name (cli/options.py) -> what runs it
RUNNERS: dict[str, Callable[[Values], ExitCode]] = {
    "lint": lint, "estimate": estimate, "check": check, "rules": list_rules, "rule": explain_rule,
}


def _report(findings: Sequence[Finding], **fields: Any) -> Report:
    """The report of these findings; ``fields``: Report's own (its constructor checks their names and types)."""
    from zeroadvisor.report import Report

    return Report(list(findings), **fields)


def _show(fmt: OutputFormat, report: Report) -> None:
    sys.stdout.write(_text(fmt, report))


# The text reports' width: the terminal's, within these bounds. COLUMNS is the user's to set, to anything: the
# bar chart followed it to a gigabyte at COLUMNS=10**7 (issue 20, defect 8). 256 is wider than a maximised
# terminal on a 4K screen; below 40 no finding line is readable.
MIN_TEXT_WIDTH, MAX_TEXT_WIDTH = 40, 256


def _text(fmt: OutputFormat, report: Report) -> str:
    """``report`` rendered in ``fmt`` for this terminal: its colour, its encoding, its width."""
    from zeroadvisor.report import render

    columns = terminal_columns()
    width = min(max(columns, MIN_TEXT_WIDTH), MAX_TEXT_WIDTH)
    ascii_only = not stdout.can_encode(sys.stdout, stdout.DRAWING)
    # a person at a terminal gets each finding fitted to the width; a log, a pipe or a file gets it whole
    cut = stdout.classify().terminal
    return render(fmt, dataclasses.replace(report, colour=use_colour(), ascii_only=ascii_only, width=width, cut=cut))


def terminal_columns(fallback: int = 80) -> int:
    """``shutil.get_terminal_size().columns``, step for step (COLUMNS, else the terminal on stdout, else
    ``fallback``), without importing shutil, which imports bz2 and lzma: a tenth of a lint's start-up."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or fallback


def use_colour() -> bool:
    """ANSI colour on a terminal; NO_COLOR (no-color.org: set and not empty) turns it off, FORCE_COLOR on."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()
