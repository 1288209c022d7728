"""The one catalogue of rules: every lint rule and every advice rule, codes and names unique and stable."""

from __future__ import annotations

from zeroadvisor.advisor import rules as advice
from zeroadvisor.lint.rule import Rule
from zeroadvisor.rules import accelerate
from zeroadvisor.rules.registry import INVALID_SYNTAX, LINT

# The order of the docs and of `zeroadvisor rules`: the DeepSpeed lint rules, the advice rules (ZA8xx),
# then the Accelerate rules (ZA05x).
ALL: tuple[Rule, ...] = (
    *(rule for rule in LINT if rule not in accelerate.RULES),
    *advice.RULES,
    *accelerate.RULES,
)
ADVICE: tuple[Rule, ...] = advice.RULES
ADVICE_CODES = frozenset(rule.code for rule in ADVICE)  # findings about memory, as opposed to the config

BY_CODE = {rule.code: rule for rule in ALL}
BY_NAME = {rule.name: rule for rule in ALL}
assert len(BY_CODE) == len(ALL) and len(BY_NAME) == len(ALL), "rule codes and names must be unique"

__all__ = ["ADVICE", "ADVICE_CODES", "ALL", "BY_CODE", "BY_NAME", "INVALID_SYNTAX", "LINT", "find", "select",
           "unknown_references"]


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
    return rule.name == ref.lower() or (rule.code.startswith(ref.upper()) and ref.upper().startswith("ZA"))
