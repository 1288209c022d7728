"""The JSON contract: ``{"findings": [...]}`` plus tool metadata. Scripts rely on the keys."""

from __future__ import annotations

import json
from typing import Any

from zeroadvisor import DEEPSPEED_TARGET, __version__
from zeroadvisor.lint.findings import Finding


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


def render(findings: list[Finding], files: int = 1, extra: dict[str, Any] | None = None) -> str:
    return json.dumps(document(findings, files, extra), indent=2, ensure_ascii=False) + "\n"


def render_report(report) -> str:
    if report.check is None and report.estimate is not None:  # the estimate command: the estimate alone
        return json.dumps(report.estimate.to_dict(), indent=2) + "\n"
    extra = dict(report.extra)
    if report.check is not None:
        extra["estimate"] = report.check.estimate_dict()
    return render(report.findings, report.files, extra)
