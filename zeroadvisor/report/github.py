"""GitHub Actions workflow commands: ``::error file=...,line=...,col=...,title=...::message``.

Escaping follows actions/toolkit packages/core/src/command.ts: the message escapes
%, CR and LF; property values additionally escape ':' and ','.
"""

from __future__ import annotations

from zeroadvisor.lint.findings import Finding, Severity

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(findings: list[Finding], files: int = 1) -> str:
    lines = []
    for f in findings:
        props = [f"file={escape_property(f.file)}"]
        if f.line is not None:
            props += [f"line={f.line}", f"col={f.column}"]
        props.append(f"title={escape_property(f'{f.code} {f.name}')}")
        lines.append(f"::{_COMMAND[f.severity]} {','.join(props)}::{escape_data(f.message)}")
    return "".join(line + "\n" for line in lines)


def render_report(report) -> str:
    return render(report.findings, report.files)
