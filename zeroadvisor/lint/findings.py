"""Findings: what the linter and the advisor report, in one shape for every output format."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from zeroadvisor.jsontypes import JSONObject, JSONValue


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is worse; ``--fail-on`` compares ranks."""
        return _RANK[self]


_RANK = {Severity.INFO: 1, Severity.WARNING: 2, Severity.ERROR: 3}


class ActionKind(StrEnum):
    """What an Action changes outside the DeepSpeed config: the JSON "actions" entry's ``kind``."""

    GRADIENT_CHECKPOINTING = "gradient-checkpointing"  # the training script's activation checkpointing
    TRAINER_BATCH = "trainer-batch"  # the Trainer's per-device batch and accumulation
    NVME_PATH = "nvme-path"  # an NVMe mount for the offload
    SEQUENCE_PARALLEL = "sequence-parallel"  # Ulysses, set in code
    TENSOR_PARALLEL = "tensor-parallel"  # AutoTP
    CLUSTER = "cluster"  # more or larger GPUs, more host memory
    TRAINER_FLAGS = "trainer-flags"  # a trainer that builds its DeepSpeed config from its flags (OpenRLHF)


@dataclass(frozen=True, slots=True)
class Action:
    """Something a fix needs outside the DeepSpeed config (the training script, an NVMe mount, more GPUs).
    ``values``: the numbers a script can act on (advisor/change.py words each kind)."""

    kind: ActionKind
    text: str
    values: Mapping[str, JSONValue] = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        """The JSON "actions" entry: ``{"kind", "text", ...values}``."""
        return {"kind": self.kind.value, "text": self.text, **self.values}


class Recommends(Protocol):
    """The typed recommendation an advice finding carries (advisor/advice.py Recommendation, KeyChange): reports
    read its fields; ``to_dict`` is the JSON "recommends" object (None: the JSON names none, the fix says it)."""

    def to_dict(self) -> JSONObject | None: ...


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
    fix: JSONObject | None = None  # RFC 7396 JSON merge patch that repairs it
    actions: tuple[Action, ...] = ()  # what the fix needs outside the config (training script, NVMe, cluster)
    # the change an advice finding recommends, as the search found it (advisor/advice.py): typed for the reports,
    # its to_dict() the JSON "recommends" object
    recommends: Recommends | None = None
    # where the run stops before training whatever its memory (Hit.stops): what the verdict sentence adds
    stops: str = ""

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.file, self.line or 0, self.column or 0, self.code, self.pointer)

    def to_dict(self) -> JSONObject:
        """The JSON contract: scripts rely on these keys."""
        out: JSONObject = {
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
            out["actions"] = [action.to_dict() for action in self.actions]
        recommends = self.recommends.to_dict() if self.recommends is not None else None
        if recommends is not None:
            out["recommends"] = recommends
        if self.stops:  # an added key: the run stops before training whatever its memory (ZA813's vLLM)
            out["stops_before_training"] = self.stops
        return out
