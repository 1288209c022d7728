"""Findings: what the linter and the advisor report, in one shape for every output format."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is worse; ``--fail-on`` compares ranks."""
        return _RANK[self]


_RANK = {Severity.INFO: 1, Severity.WARNING: 2, Severity.ERROR: 3}


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem at one key. ``pointer`` is an RFC 6901 JSON pointer ("" = whole file)."""

    file: str
    code: str
    name: str
    severity: Severity
    pointer: str
    line: int | None
    column: int | None
    message: str
    fix: dict[str, Any] | None = None  # RFC 7396 JSON merge patch that repairs it
    # what the fix needs outside the config (training script, NVMe mount, cluster): {"kind", "text", ...}
    actions: tuple[dict[str, Any], ...] = ()
    # the change an advice finding recommends, as the search found it (advisor/rules.py _recommends):
    # {"change", "option", "peak_gpu", "peak_host_per_node", "cost", "step_time_s", "configured_step_time_s"}
    recommends: dict[str, Any] | None = None

    def sort_key(self) -> tuple:
        return (self.file, self.line or 0, self.column or 0, self.code, self.pointer)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: scripts rely on these keys."""
        out: dict[str, Any] = {
            "file": self.file,
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "pointer": self.pointer,
            "line": self.line,
            "column": self.column,
            "message": self.message,
        }
        if self.fix is not None:
            out["fix"] = self.fix
        if self.actions:
            out["actions"] = list(self.actions)
        if self.recommends is not None:
            out["recommends"] = dict(self.recommends)
        return out
