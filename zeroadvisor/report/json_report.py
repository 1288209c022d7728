"""The JSON contract: ``{"findings": [...]}`` plus tool metadata. Scripts rely on the keys.

Written by ``escape.json_dumps``: always valid UTF-8; a file name's undecodable bytes read
``\\xNN`` (Python's backslashreplace) and a lone surrogate from the config ``\\uDXXX``, as text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zeroadvisor.lint.findings import Finding
from zeroadvisor.report import escape
from zeroadvisor.version import DEEPSPEED_TARGET, __version__

if TYPE_CHECKING:
    from zeroadvisor.report import Report


def document(findings: list[Finding], files: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": 1,
        "tool": {"name": "zeroadvisor", "version": __version__, "deepspeed_target": DEEPSPEED_TARGET},
        "files": files,
        "findings": [f.to_dict() for f in findings],
    }
    if extra:
        out.update(extra)
    return out


def render(findings: list[Finding], files: int = 1, extra: dict[str, Any] | None = None,
           ascii_only: bool = False) -> str:
    return escape.json_dumps(document(findings, files, extra), ascii_only=ascii_only)


def render_report(report: Report) -> str:
    if report.check is None and report.estimate is not None:  # the estimate command: the estimate alone
        data = report.estimate.to_dict()
        if report.throughput is not None:
            from zeroadvisor.throughput import json_fields

            for stage, entry in zip(report.estimate.stages, data["stages"], strict=True):
                entry.update(json_fields(report.throughput[stage.option]))
        return escape.json_dumps(data, ascii_only=report.ascii_only)
    extra = dict(report.extra)
    if report.check is not None:
        extra["estimate"] = report.check.estimate_dict()
    return render(report.findings, report.files, extra, ascii_only=report.ascii_only)
