"""The one registry of rules: codes and names are unique and stable."""

from __future__ import annotations

from zeroadvisor.rules import accelerate, auto, batch, keys, memory, offload, optimizer, parallel, precision, syntax, values
from zeroadvisor.rules import trainer
from zeroadvisor.lint.rule import Rule

ALL: tuple[Rule, ...] = (
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
    *memory.RULES,
    *accelerate.RULES,
)
# What ``lint`` runs: everything that needs no memory estimate.
LINT: tuple[Rule, ...] = tuple(rule for rule in ALL if not rule.needs_advice)
INVALID_SYNTAX = syntax.INVALID_SYNTAX

BY_CODE = {rule.code: rule for rule in ALL}
BY_NAME = {rule.name: rule for rule in ALL}
assert len(BY_CODE) == len(ALL) and len(BY_NAME) == len(ALL), "rule codes and names must be unique"


def find(reference: str) -> Rule | None:
    """A rule by code (ZA101) or name (unknown-key), case-insensitively."""
    return BY_CODE.get(reference.upper()) or BY_NAME.get(reference.lower())


def select(select: list[str] | None = None, ignore: list[str] | None = None,
           among: tuple[Rule, ...] = ALL) -> tuple[Rule, ...]:
    """Rules chosen by codes, names or code prefixes (ruff style: ``ZA1`` = every ZA1xx)."""
    chosen = [r for r in among if not select or any(_matches(r, ref) for ref in select)]
    return tuple(r for r in chosen if not ignore or not any(_matches(r, ref) for ref in ignore))


def unknown_references(references: list[str]) -> list[str]:
    return [ref for ref in references if not any(_matches(r, ref) for r in ALL)]


def _matches(rule: Rule, reference: str) -> bool:
    ref = reference.strip()
    return rule.name == ref.lower() or rule.code.startswith(ref.upper()) and ref.upper().startswith("ZA")
