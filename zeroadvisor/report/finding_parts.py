"""The parts of a finding's line that lint's text report (text.py) and check's one screen (check_text.py) share:
where it is and its severity's colour. A module of its own so that neither report imports the other for them."""

from __future__ import annotations

from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.report import escape

COLOURS = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.INFO: "\033[36m"}
RESET = "\033[0m"


def location(finding: Finding) -> str:
    """``file:line:col``, or the file alone where the finding has no line (escaped: the name is the user's)."""
    name = escape.terminal(finding.file)
    if finding.line is None:
        return name
    return f"{name}:{finding.line}:{finding.column}"
