"""The run-wide settings as data: the choices each one takes and what a run uses when neither a flag (or
keyword) nor the project configuration gives it.

The command line's help text reads the fallbacks from here (cli/options.py), so a default is stated once.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from zeroadvisor.inputs.command import Command
from zeroadvisor.lint.context import Integration
from zeroadvisor.lint.findings import Severity
from zeroadvisor.report import CHECK_FORMATS, LINT_FORMATS
from zeroadvisor.report.formats import OutputFormat


class FailOn(StrEnum):
    """``--fail-on``: a severity (a finding at it or worse fails the run), or never."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    NEVER = "never"

    def catches(self, severity: Severity) -> bool:
        """Whether a finding of ``severity`` fails a run with this ``--fail-on``."""
        return self is not FailOn.NEVER and severity.rank >= Severity(self.value).rank


FAIL_ON: tuple[FailOn, ...] = tuple(FailOn)  # the choices, in the order help and messages list them
# The formats that can show an estimate on its own (the estimate command).
ESTIMATE_FORMATS: tuple[OutputFormat, ...] = (OutputFormat.TEXT, OutputFormat.JSON)
# Each command's formats.
FORMATS: dict[Command, tuple[OutputFormat, ...]] = {Command.LINT: LINT_FORMATS, Command.ESTIMATE: ESTIMATE_FORMATS,
                                                    Command.CHECK: CHECK_FORMATS, Command.PREFLIGHT: CHECK_FORMATS}
# Formats that show the fixes as a diff, asked for or not (check).
DIFF_FORMATS = (OutputFormat.MARKDOWN, OutputFormat.HTML)

NEEDED = "<needed>"  # a value the flag or the project configuration must give


def _headroom() -> str:
    from zeroadvisor.memory.verdict import DEFAULT_HEADROOM

    return f"{DEFAULT_HEADROOM:.0%}"


# What a run uses where neither a flag (or keyword) nor the project configuration gives a value; a function is
# called on use (the headroom is the memory model's, which ``lint`` does not import).
Fallback = FailOn | Integration | OutputFormat | str
FALLBACKS: dict[str, Fallback | Callable[[], str]] = {
    "fail_on": FailOn.ERROR, "integration": Integration.ANY, "format": OutputFormat.TEXT,
    # the unit: units.unit_for (it follows the accounting)
    "headroom": _headroom, "accounting": "deepspeed"}
# The values a command cannot run without (the Python API's signatures give them).
NEEDED_BY: dict[Command, tuple[str, ...]] = {Command.ESTIMATE: ("gpus",), Command.CHECK: ("gpus",)}


def fallback(command: Command, name: str) -> Fallback | None:
    """NEEDED, the fallback value, or None (no fallback: not given means not known)."""
    if name in NEEDED_BY.get(command, ()):
        return NEEDED
    value = FALLBACKS.get(name)
    return value() if callable(value) else value
