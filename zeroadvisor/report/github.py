"""GitHub Actions workflow commands: ``::error file=...,line=...,col=...,title=...::message``.

Escaping follows actions/toolkit packages/core/src/command.ts (``escape.workflow_data`` and
``escape.workflow_property``): the message escapes %, CR and LF; property values additionally
':' and ','. Control characters are made visible first: the log viewer renders ANSI sequences.
"""

from __future__ import annotations

from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.report import escape

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


def render_report(report) -> str:
    return render(report.findings, report.files, ascii_only=report.ascii_only)
