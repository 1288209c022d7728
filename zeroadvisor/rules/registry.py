"""The lint rules (everything ``lint`` runs: no memory estimate needed). The full catalogue, with the
advice rules of ``check``, is advisor/registry.py."""

from __future__ import annotations

from zeroadvisor.lint.rule import Rule
from zeroadvisor.rules import (
    accelerate,
    auto,
    batch,
    keys,
    offload,
    optimizer,
    parallel,
    precision,
    syntax,
    trainer,
    values,
)

LINT: tuple[Rule, ...] = (
    *syntax.RULES,
    *keys.RULES,
    *values.RULES,
    *auto.RULES,
    *trainer.RULES,
    *batch.RULES,
    *precision.RULES,
    *offload.RULES,
    *optimizer.RULES,
    *parallel.RULES,
    *accelerate.RULES,
)
INVALID_SYNTAX = syntax.INVALID_SYNTAX
BY_CODE = {rule.code: rule for rule in LINT}
