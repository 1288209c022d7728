"""``file:line:col: CODE [severity] message``, one line per finding (colour only on a terminal).

File names and messages carry text from the user's files: each goes through ``escape.terminal``,
so a finding is one line and nothing in it reaches the terminal or a CI runner as a command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.report import escape
from zeroadvisor.report.finding_parts import COLOURS, RESET, location

if TYPE_CHECKING:
    from zeroadvisor.report import Report

def render(findings: list[Finding], colour: bool = False, files: int = 1, ascii_only: bool = False,
           unreadable: int = 0, skipped: int = 0) -> str:
    lines = [finding_line(f, colour) for f in findings]
    lines.append(summary(findings, files, unreadable, skipped))
    return escape.output("\n".join(lines) + "\n", ascii_only)


def finding_line(finding: Finding, colour: bool = False) -> str:
    """``file:line:col: CODE [severity] message``, whole, on one line (escaped: one line whatever the message holds)."""
    severity = f"[{finding.severity.value}]"
    if colour:
        severity = f"{COLOURS[finding.severity]}{severity}{RESET}"
    return f"{location(finding)}: {escape.terminal(finding.code)} {severity} {escape.terminal(finding.message)}"


def summary(findings: list[Finding], files: int, unreadable: int = 0, skipped: int = 0) -> str:
    from zeroadvisor.deepspeed.kind import NOT_A_CONFIG

    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    parts = [f"{n} {s.value}{'s' if n != 1 else ''}" for s, n in counts.items() if n]
    skip = f" ({skipped} skipped: {NOT_A_CONFIG})" if skipped else ""
    checked = f"{files} file{'s' if files != 1 else ''} checked{skip}: " + (", ".join(parts) or "no problems")
    if not unreadable:
        return checked
    # Never "0 files checked: no problems" about a file that was not read.
    unread = f"{unreadable} file{'s' if unreadable != 1 else ''} could not be read"
    return f"{checked}; {unread}" if files else unread


def wrapped(findings: list[Finding], width: int, colour: bool = False) -> list[str]:
    """Findings for a person at a terminal: ``file:line:col: CODE [severity]`` then the message,
    wrapped to ``width`` with the continuation indented (a long file name is broken, never left to wrap)."""
    from zeroadvisor.report.estimate_text import Style

    style = Style(width)
    lines = []
    for f in findings:
        severity = f"[{f.severity.value}]"
        text = f"{location(f)}: {escape.terminal(f.code)} {severity} {escape.terminal(f.message)}"
        block = style.wrap(text, "", "    ")
        if colour:  # after wrapping: the escape codes take no columns
            block[0] = block[0].replace(severity, f"{COLOURS[f.severity]}{severity}{RESET}", 1)
        lines += block
    return lines


def render_report(report: Report) -> str:
    """check: the verdict first, the findings, then the estimate and the suggested diff.
    estimate: the estimate alone. Wrapped to ``report.width`` (the terminal's)."""
    estimate = report.estimate if report.check is None else report.check.estimate
    if estimate is not None or report.check is not None:
        from zeroadvisor.report import estimate_text  # not imported by lint: start-up time
    if report.check is None and estimate is not None:  # the estimate command: the table alone
        return estimate_text.render(estimate, report.unit, ascii_only=report.ascii_only, explain=report.explain,
                                    width=report.width, colour=report.colour, all_options=report.all_options,
                                    steps=report.throughput)
    if report.check is None:  # lint
        return render(report.findings, colour=report.colour, files=report.files, ascii_only=report.ascii_only,
                      unreadable=len(report.extra.get("unreadable", ())), skipped=len(report.extra.get("skipped", ())))
    style = estimate_text.Style(max(report.width or estimate_text.DEFAULT_WIDTH, estimate_text.MIN_WIDTH),
                                report.colour, report.ascii_only)
    steps = report.throughput  # Option -> StepTime (zeroadvisor.throughput.per_option), when timed
    rec = report.check.recommendation  # decided by the advisor (advisor/lead.py): read, never chosen here
    if not (report.verbose or report.explain):  # one screen (check_text.py); the rest under --verbose
        from zeroadvisor.report import check_text

        lines = check_text.render(report.findings, estimate, report.unit, style,
                                  summary(report.findings, report.files, len(report.extra.get("unreadable", ()))), rec,
                                  cut=report.cut, no_fix=report.check.no_fix, nothing=report.check.nothing_fits)
        return _with_diff("\n".join(lines).rstrip() + "\n", report)
    lines = estimate_text.verdict_lines(estimate, rec, report.unit, style, report.findings)
    from zeroadvisor.report import overview

    ways = overview.nothing_fits_sentence(report.check.nothing_fits, report.unit)
    if ways is not None:
        lines += style.wrap(escape.terminal(ways))
    lines.append("")
    if report.cut:  # a terminal: wrapped to its width; a log or a pipe: one line each, as lint prints them
        lines += wrapped(report.findings, style.width, report.colour)
    else:
        lines += [finding_line(f, report.colour) for f in report.findings]
    lines += style.wrap(summary(report.findings, report.files, len(report.extra.get("unreadable", ()))))
    if estimate is not None:
        # every assumed input in one block; assumed-input (ZA808) above names those that can change the answer
        lines += estimate_text.body(estimate, report.unit, style, explain=report.explain,
                                    all_options=report.all_options, rec=rec, steps=steps)
    return _with_diff("\n".join(lines).rstrip() + "\n", report)


def _with_diff(text: str, report: Report) -> str:
    """The report's text, then on a terminal the suggested diff (escaped as a block). Elsewhere the diff is the
    files' bytes, written after this text by the caller (cli/stdout.py): escaped, it would not apply."""
    if report.diff and report.terminal:
        text += escape.terminal_block(suggested_diff(report))
    return escape.output(text, report.ascii_only)


def suggested_diff(report: Report) -> str:
    """The diff as the check text report shows it, after its text: one line of context each side by default
    (check_text.narrow_diff), difflib's 3 after a blank line with --verbose or --explain. Raw: escaping is the
    medium's (``_with_diff`` on a terminal)."""
    if not report.diff:
        return ""
    if report.verbose or report.explain:
        return "\n" + report.diff
    from zeroadvisor.report import check_text

    return check_text.narrow_diff(report.diff)
