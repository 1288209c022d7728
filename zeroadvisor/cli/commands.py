"""What each command does with its parsed values: build the run's inputs (zeroadvisor.inputs), call the API
(zeroadvisor.api), render, choose the exit code.

Typer-free, so that ``lint`` can run without building the typer app (see cli/__init__.py).
Each function takes the keyword values described in cli/options.py and returns an ExitCode.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Callable

from zeroadvisor.cli.exits import ExitCode

if TYPE_CHECKING:
    from zeroadvisor.cli.options import Command

Values = dict[str, Any]

# Characters the text reports draw with; a stream that cannot encode them gets the ASCII drawing.
_DRAWING = "✓✗×"


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
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - stdout without a descriptor (in-process tests)
        pass
    return ExitCode.BROKEN_PIPE


def error(message: str) -> None:
    """One line on stderr; file names and values in it are data (escaped for the terminal)."""
    from zeroadvisor.report.escape import terminal

    sys.stderr.write(f"zeroadvisor: {terminal(message)}\n")


def _inputs(command: Command, v: Values):
    """The run's inputs from this command's parsed values, the project configuration and the files they name
    (zeroadvisor.inputs.run.build, the builder the Python API uses too)."""
    from zeroadvisor.inputs.run import build

    return build(command.name, v, spelling=command.spelling(), project=True)


def lint(v: Values) -> ExitCode:
    from zeroadvisor import api
    from zeroadvisor.cli import options

    run = _inputs(options.LINT, v)
    result = api.run_lint(run)
    for message in result.unreadable:
        error(message)
    # json lists the unreadable inputs, text counts them
    _show(run.output.format, result.findings, files=result.files, rules=result.rules, extra=result.extra)
    if result.unreadable:
        return ExitCode.USAGE
    return ExitCode.FINDINGS if api.fails(result.findings, run.output.fail_on) else ExitCode.OK


def estimate(v: Values) -> ExitCode:
    from zeroadvisor import api
    from zeroadvisor.cli import options

    run = _inputs(options.ESTIMATE, v)
    result = api.run_estimate(run, step_times=True)
    out = run.output
    _show(out.format, [], estimate=result.estimate, unit=out.unit, explain=out.explain, all_options=out.all_options,
          throughput=result.throughput)
    return ExitCode.OK


def check(v: Values) -> ExitCode:
    """Each config against the same model and cluster: text and markdown reports one after another, json
    one document per config (a JSON array when there are several), sarif and github one report of all."""
    from zeroadvisor import api
    from zeroadvisor.cli import options

    run = _inputs(options.CHECK, v)
    out = run.output
    for note in run.notes:
        error(f"note: {note}")
    combined = out.format in ("sarif", "github")  # one report of every config's findings
    documents, findings, used, failed, code = [], [], {}, False, ExitCode.OK
    reports = []
    for report in api.run_check(run):
        reports.append(report)
        for note in report.notes:
            error(note)
        findings.extend(report.findings)
        used.update((r.code, r) for r in report.rules)
        if not combined:
            documents.append(_text(out.format, report.findings, rules=report.rules, check=report.result,
                                   path=report.path, diff=report.diff if run.diff else "", unit=out.unit,
                                   explain=out.explain, all_options=out.all_options))
        if report.error is not None:  # after the report: the findings are never lost to a failed write
            error(report.error)
            code = ExitCode.USAGE
        elif run.fix:
            error(f"applied {report.fixed} fix(es) to {report.path}" if report.fixed else
                  f"nothing to fix in {report.path}")
        failed = failed or api.fails(report.findings, out.fail_on)
    if combined:
        # one config: its verdict and cluster go with the findings (SARIF run properties, a GitHub notice)
        single = {"check": reports[0].result, "unit": out.unit, "path": reports[0].path} if len(reports) == 1 else {}
        documents.append(_text(out.format, findings, files=len(reports), rules=tuple(used.values()), **single))
    if out.format == "json" and len(documents) > 1:
        sys.stdout.write("[\n" + ",\n".join(d.rstrip("\n") for d in documents) + "\n]\n")
    else:
        sys.stdout.write("\n".join(documents))
    if code != ExitCode.OK:
        return code
    return ExitCode.FINDINGS if failed else ExitCode.OK


def list_rules(v: Values) -> ExitCode:
    from zeroadvisor.advisor import registry

    width = max(len(r.name) for r in registry.ALL)
    sys.stdout.write("".join(f"{r.code}  {r.name:<{width}}  {r.severity.value:<7}  {r.summary}\n"
                             for r in registry.ALL))
    return ExitCode.OK


def explain_rule(v: Values) -> ExitCode:
    from zeroadvisor.inputs.rules import find_rule

    rule = find_rule(v["name"])
    out = [f"{rule.code} {rule.name} [{rule.severity.value}]\n\n{rule.summary}\n\n{rule.explanation}\n"]
    for example in rule.examples:
        label = "Fails" if example.fails else "Passes"
        options = f" (with {example.describe_options()})" if example.options else ""
        out.append(f"{label}{options}:\n  {example.config}\n")
    if rule.source:
        out.append(f"Source: {rule.source}")
    sys.stdout.write("".join(line + "\n" for line in out))
    return ExitCode.OK


# command name (cli/options.py) -> what runs it
RUNNERS: dict[str, Callable[[Values], ExitCode]] = {
    "lint": lint, "estimate": estimate, "check": check, "rules": list_rules, "rule": explain_rule,
}


def _show(fmt: str, findings, **fields) -> None:
    sys.stdout.write(_text(fmt, findings, **fields))


def _text(fmt: str, findings, **fields) -> str:
    from zeroadvisor.report import Report, render

    import shutil

    report = Report(findings, colour=use_colour(), ascii_only=not can_encode(sys.stdout, _DRAWING),
                    width=shutil.get_terminal_size().columns, **fields)  # COLUMNS, the terminal, else 80
    return render(fmt, report)


def use_colour() -> bool:
    """ANSI colour on a terminal; NO_COLOR (no-color.org: set and not empty) turns it off, FORCE_COLOR on."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()


def can_encode(stream, text: str) -> bool:
    try:
        text.encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True
