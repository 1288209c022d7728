"""GitHub Actions workflow commands: ``::error file=...,line=...,col=...,title=...::message``.

Escaping follows actions/toolkit packages/core/src/command.ts (``escape.workflow_data`` and
``escape.workflow_property``): the message escapes %, CR and LF; property values additionally
':' and ','. Control characters are made visible first: the log viewer renders ANSI sequences.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.report import escape

if TYPE_CHECKING:
    from zeroadvisor.report import Report

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}

# Kept for callers of the old names; one implementation, in escape.
escape_data = escape.workflow_data
escape_property = escape.workflow_property


def render(findings: list[Finding], files: int = 1, ascii_only: bool = False) -> str:
    lines = []
    for f in findings:
        props = [f"file={escape.workflow_property(f.file)}"]
        if f.line is not None:
            props += [f"line={f.line}", f"col={f.column}"]
        props.append(f"title={escape.workflow_property(f'{f.code} {f.name}')}")
        lines.append(f"::{_COMMAND[f.severity]} {','.join(props)}::{escape.workflow_data(f.message)}")
    out = "".join(line + "\n" for line in lines)
    return escape.for_encoding(out, "ascii") if ascii_only else out


def render_report(report: Report) -> str:
    """The findings as annotations; a check's verdict (with the resolved GPU) first, as a notice."""
    from zeroadvisor.report.sarif import run_properties

    out = render(report.findings, report.files, ascii_only=report.ascii_only)
    run = run_properties(report)
    if run is None:
        return out
    gpu = run["cluster"].get("gpu")
    card = f" on {gpu['name']}" if gpu else ""
    where = f"file={escape.workflow_property(report.path)}," if report.path else ""
    notice = (f"::notice {where}title={escape.workflow_property('zeroadvisor verdict' + card)}::"
              f"{escape.workflow_data(run['verdict'])}\n")
    return (escape.for_encoding(notice, "ascii") if report.ascii_only else notice) + out
