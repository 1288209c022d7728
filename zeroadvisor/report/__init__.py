"""Renderers: one ``Report`` in, the text of one output format out.

``REPORTERS`` maps each ``--format`` name to the module that renders it; modules are imported
on use so ``lint`` does not pay for the markdown or estimate renderers at start-up.

Text from configs and file names is escaped by each renderer for its medium (``escape``); the
words for memory rows and options are in ``labels``. A renderer returns text the caller can write
as is: set ``ascii_only`` (``escape.wants_ascii(stream)``) when the stream cannot encode Unicode.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zeroadvisor.report.formats import OutputFormat
from zeroadvisor.units import DEFAULT_UNIT

if TYPE_CHECKING:
    from zeroadvisor.advisor.check import CheckResult
    from zeroadvisor.lint.findings import Finding
    from zeroadvisor.lint.rule import Rule
    from zeroadvisor.memory.estimate import Estimate
    from zeroadvisor.memory.options import Option
    from zeroadvisor.throughput import StepTime


@dataclass
class Report:
    """Everything a renderer may show; each format shows what it can."""

    findings: list[Finding]
    files: int = 1
    rules: Sequence[Rule] = ()
    check: CheckResult | None = None  # check: options, estimate, extras
    estimate: Estimate | None = None  # estimate alone (the estimate command)
    path: str = ""  # the config checked (check) — display name
    diff: str = ""  # the suggested change as a unified diff
    # whether the output is for a terminal (decided by the command line: cli/stdout.py). Only there is the text
    # report's diff part of the text, escaped; elsewhere it is the files' bytes, which the writer puts after the
    # text (report/text.py suggested_diff), so that the output is a patch git apply takes.
    terminal: bool = True
    unit: str = DEFAULT_UNIT
    colour: bool = False
    ascii_only: bool = False  # only ASCII out: symbols in words, other characters as \x/\u escapes
    explain: bool = False  # text: the configured option's terms and the source notes (--explain)
    verbose: bool = False  # text (check): the findings in full, the memory by row and the bars (--verbose)
    all_options: bool = False  # text: every option (--all); by default the configured, the recommended, no offload
    width: int | None = None  # text: the terminal's columns (None: 80)
    # text (check): fit each finding to the width, for a person at a terminal (cut; --verbose: wrapped, whole);
    # never in a CI log, a pipe, a file or the Python API (PreflightError's message): there each finding is one
    # whole line, as lint prints it, since the message is what is wrong
    cut: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    throughput: dict[Option, StepTime] | None = None  # the estimate command's step times (throughput.per_option)


# --format -> module with ``render_report(report) -> str``
REPORTERS: dict[OutputFormat, str] = {
    OutputFormat.TEXT: "zeroadvisor.report.text",
    OutputFormat.JSON: "zeroadvisor.report.json_report",
    OutputFormat.SARIF: "zeroadvisor.report.sarif",
    OutputFormat.GITHUB: "zeroadvisor.report.github",
    OutputFormat.MARKDOWN: "zeroadvisor.report.markdown",
    OutputFormat.HTML: "zeroadvisor.report.html",
}
LINT_FORMATS: tuple[OutputFormat, ...] = (OutputFormat.TEXT, OutputFormat.JSON, OutputFormat.SARIF,
                                          OutputFormat.GITHUB)
CHECK_FORMATS: tuple[OutputFormat, ...] = (*LINT_FORMATS, OutputFormat.MARKDOWN, OutputFormat.HTML)


def render(fmt: OutputFormat, report: Report) -> str:
    renderer: Callable[[Report], str] = importlib.import_module(REPORTERS[fmt]).render_report
    return renderer(report)
