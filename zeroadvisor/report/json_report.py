"""The JSON contract: ``{"findings": [...]}`` plus tool metadata. Scripts rely on the keys.

Written by ``escape.json_dumps``: always valid UTF-8; a file name's undecodable bytes read
``\\xNN`` (Python's backslashreplace) and a lone surrogate from the config ``\\uDXXX``, as text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.lint.findings import Finding
from zeroadvisor.report import escape
from zeroadvisor.version import DEEPSPEED_TARGET, __version__

if TYPE_CHECKING:
    from zeroadvisor.report import Report


def document(findings: list[Finding], files: int, extra: JSONObject | None = None) -> JSONObject:
    out: JSONObject = {
        "version": 1,
        "tool": {"name": "zeroadvisor", "version": __version__, "deepspeed_target": DEEPSPEED_TARGET},
        "files": files,
        "findings": [f.to_dict() for f in findings],
    }
    if extra:
        out.update(extra)
    return out


def render(findings: list[Finding], files: int = 1, extra: JSONObject | None = None,
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
        extra["estimate"] = _check_estimate(report)
        if report.check.nothing_fits is not None:  # the ways out, cheapest first (advisor/nofit.py)
            extra["nothing_fits"] = report.check.nothing_fits.to_dict()
    return render(report.findings, report.files, extra, ascii_only=report.ascii_only)


def _check_estimate(report: Report) -> JSONObject | None:
    """The check's estimate as ``estimate --format json`` writes it, each option with its ``throughput`` (where a
    GPU is named) and ``recommended`` (the option the report's verdict line recommends, marked ">" in text); where
    the recommended run also changes the micro batch, checkpointing, layout or buckets, ``recommended_run`` is
    its own estimate (the extra column of the text report)."""
    from zeroadvisor.report import overview
    from zeroadvisor.throughput import json_fields

    check = report.check
    assert check is not None
    data = check.estimate_dict()
    if data is None or check.estimate is None:
        return data
    rec = check.recommendation  # decided by the advisor (advisor/lead.py)
    steps = check.step_times()
    for stage, entry in zip(check.estimate.stages, data["stages"], strict=True):
        entry["recommended"] = overview.is_recommended(stage, rec)
        if steps is not None:
            entry.update(json_fields(steps[stage.option]))
    for own in overview.extra_column(check.estimate, rec):  # the recommended run where no option is it
        assert rec is not None
        run = {**own.to_dict(), "label": overview.column_label(own, rec), "configured": False, "recommended": True}
        if rec.step_time is not None:
            run.update(json_fields(rec.step_time))
        data["recommended_run"] = run
    return data
