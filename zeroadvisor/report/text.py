"""``file:line:col: CODE [severity] message``, one line per finding (colour only on a terminal).

File names and messages carry text from the user's files: each goes through ``escape.terminal``,
so a finding is one line and nothing in it reaches the terminal or a CI runner as a command.
"""

from __future__ import annotations

from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.report import escape

_COLOURS = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.INFO: "\033[36m"}
_RESET = "\033[0m"


def location(finding: Finding) -> str:
    name = escape.terminal(finding.file)
    if finding.line is None:
        return name
    return f"{name}:{finding.line}:{finding.column}"


def render(findings: list[Finding], colour: bool = False, files: int = 1, ascii_only: bool = False,
           unreadable: int = 0, skipped: int = 0) -> str:
    lines = []
    for f in findings:
        severity = f"[{f.severity.value}]"
        if colour:
            severity = f"{_COLOURS[f.severity]}{severity}{_RESET}"
        lines.append(f"{location(f)}: {escape.terminal(f.code)} {severity} {escape.terminal(f.message)}")
    lines.append(summary(findings, files, unreadable, skipped))
    return escape.output("\n".join(lines) + "\n", ascii_only)


def summary(findings: list[Finding], files: int, unreadable: int = 0, skipped: int = 0) -> str:
    from zeroadvisor.config.kind import NOT_A_CONFIG

    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    parts = [f"{n} {s.value}{'s' if n != 1 else ''}" for s, n in counts.items() if n]
    skip = f" ({skipped} skipped: {NOT_A_CONFIG})" if skipped else ""
    checked = f"{files} file{'s' if files != 1 else ''} checked{skip}: " + (", ".join(parts) or "no problems")
    if not unreadable:
        return checked
    # Never "0 files checked: no problems" about a file that was not read.
    unread = f"{unreadable} file{'s' if unreadable != 1 else ''} could not be read"
    return f"{checked}; {unread}" if files else unread


def render_report(report) -> str:
    """Findings, then (check) the estimate table and the suggested diff."""
    estimate = report.estimate if report.check is None else report.check.estimate
    if estimate is not None:
        from zeroadvisor.report import estimate_text  # not imported by lint: start-up time
    if report.check is None and estimate is not None:  # the estimate command: the table alone
        return estimate_text.render(estimate, report.unit, ascii_only=report.ascii_only, explain=report.explain)
    out = render(report.findings, colour=report.colour, files=report.files, ascii_only=report.ascii_only,
                 unreadable=len(report.extra.get("unreadable", ())), skipped=len(report.extra.get("skipped", ())))
    if estimate is not None:
        # check: the assumed inputs are findings (assumed-input), listed first above
        out += "\n" + estimate_text.render(estimate, report.unit, ascii_only=report.ascii_only,
                                           explain=report.explain, assumed=False)
    if report.diff:
        out += "\n" + escape.terminal_block(report.diff)
    return escape.output(out, report.ascii_only)
