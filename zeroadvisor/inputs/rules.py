"""Which rules a run uses: ``--select``/``--ignore`` (or the ``select=``/``ignore=`` keywords) and, on the command
line, each file's nearest project configuration (its select, ignore and per-file-ignores)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from zeroadvisor.inputs.errors import UsageError
from zeroadvisor.lint.rule import Rule


def _split(values: Sequence[str] | None) -> list[str]:
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def select_rules(select: Sequence[str] | None = None, ignore: Sequence[str] | None = None,
                 lint_only: bool = True) -> tuple[Rule, ...]:
    """Rules by codes, names or code prefixes; each argument may hold a comma-separated list."""
    chosen, dropped = _split(select), _split(ignore)
    if lint_only and not chosen and not dropped:
        from zeroadvisor.rules.registry import LINT

        return LINT  # every lint rule: the advice rules' catalogue is not loaded (lint's start-up)
    from zeroadvisor.advisor import registry

    unknown = registry.unknown_references(chosen + dropped)
    if unknown:
        raise UsageError(f"unknown rule {unknown[0]!r}: see 'zeroadvisor rules'")
    return registry.select(chosen, dropped, among=registry.LINT if lint_only else registry.ALL)


def find_rule(reference: str) -> Rule:
    from zeroadvisor.advisor import registry

    rule = registry.find(reference)
    if rule is None:
        raise UsageError(f"unknown rule {reference!r}: see 'zeroadvisor rules'")
    return rule


@dataclass(frozen=True)
class RuleChoice:
    """The rules of a run: the given ``select`` (empty: the project configuration's, else every rule) less the
    given ``ignore`` (empty: the project configuration's); ``lint_only`` leaves out the advice rules (lint);
    ``project``: each file's nearest project configuration applies (the command line)."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    lint_only: bool = True
    project: bool = False
    # (select, ignore) -> the rules they choose, computed once per pair
    _chosen: dict[tuple[tuple[str, ...] | None, tuple[str, ...]], tuple[Rule, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.given()  # an unknown rule is refused before any file is read

    def given(self) -> tuple[Rule, ...]:
        """The rules the given select and ignore choose, without any project configuration."""
        return self._select(list(self.select) or None, list(self.ignore))

    def for_file(self, path: str) -> tuple[Rule, ...]:
        """The rules for one file ("-": standard input)."""
        if not self.project:
            return self.given()
        from zeroadvisor.inputs import project

        config = project.for_file(path)
        chosen = list(self.select) if self.select else (list(config.select) if config and config.select else None)
        dropped = list(self.ignore) if self.ignore else (list(config.ignore) if config else [])
        if config is not None and path != "-":
            dropped += config.ignored_for(path)
        return self._select(chosen, dropped)

    def _select(self, chosen: list[str] | None, dropped: list[str]) -> tuple[Rule, ...]:
        key = (tuple(chosen) if chosen is not None else None, tuple(dropped))
        if key not in self._chosen:
            self._chosen[key] = select_rules(chosen, dropped, lint_only=self.lint_only)
        return self._chosen[key]
