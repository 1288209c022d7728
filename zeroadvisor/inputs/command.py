"""``Command``: what a run does, named as the command line names it (the closed set every layer below the command
line receives: the request, the settings' fallbacks, the resolved inputs)."""

from __future__ import annotations

from enum import StrEnum


class Command(StrEnum):
    """The command line's commands that run on a config, and the Python API's preflight."""

    LINT = "lint"
    ESTIMATE = "estimate"
    CHECK = "check"
    PREFLIGHT = "preflight"  # the Python API's check on this job's hardware (api.preflight)

    @classmethod
    def named(cls, name: str) -> Command | None:
        """The command of this name; None for the command line's others (rules, rule)."""
        return next((command for command in cls if command.value == name), None)
