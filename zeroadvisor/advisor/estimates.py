"""The estimates the advice search makes, each once: keyed by the config's value and the training shape.

A search estimates the same config many times (a candidate's fit test, its bucket tuning, its written form, its
step time). The key is the config as a typed, hashable value (``frozen``): dict key order kept (the estimate's
notes follow it) and every scalar with its type, so 1, 1.0 and true stay three configs as they are three
values in a config file.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from zeroadvisor.memory.estimate import Cluster, Estimate, estimate
from zeroadvisor.model.spec import ModelSpec, TrainingShape

# A config as a hashable value: nested tuples, each value tagged with its type.
Frozen = tuple[Any, ...]


def frozen(value: Any) -> Frozen:
    """``value`` (parsed JSON/YAML/TOML data) as a hashable value equal only to the same data, types and key
    order included."""
    if isinstance(value, dict):
        return (dict, tuple((frozen(key), frozen(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(frozen(item) for item in value))
    if isinstance(value, (set, frozenset)):  # YAML !!set
        return (type(value), frozenset(frozen(item) for item in value))
    if isinstance(value, float):  # by its text: -0.0 is not 0.0, and a NaN equals a NaN
        return (float, repr(value))
    if isinstance(value, Hashable):
        return (type(value), value)
    return (type(value), repr(value))  # no parser here makes one; kept exact as far as its repr goes


@dataclass(frozen=True, slots=True)
class EstimateKey:
    config: Frozen
    shape: TrainingShape

    @classmethod
    def of(cls, config: dict[str, Any], shape: TrainingShape) -> EstimateKey:
        return cls(frozen(config), shape)


class Estimates:
    """The memory estimates of configs of one model on one cluster under one accounting, each made once."""

    def __init__(self, model: ModelSpec, cluster: Cluster, accounting: str) -> None:
        self.model, self.cluster, self.accounting = model, cluster, accounting
        self._made: dict[EstimateKey, Estimate] = {}

    def know(self, config: dict[str, Any], shape: TrainingShape, result: Estimate) -> None:
        """Record an estimate made elsewhere (the config as written, which the check estimated already)."""
        self._made[EstimateKey.of(config, shape)] = result

    def of(self, config: dict[str, Any], shape: TrainingShape) -> Estimate:
        """The estimate of ``config`` under ``shape`` (EstimateError where the memory model cannot use it)."""
        key = EstimateKey.of(config, shape)
        found = self._made.get(key)
        if found is None:
            found = self._made[key] = estimate(config, self.model, shape, self.cluster, self.accounting)
        return found

    def __len__(self) -> int:
        return len(self._made)
