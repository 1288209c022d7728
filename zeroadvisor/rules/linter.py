"""Lint: a path, text or document in, the lint rules' findings out.

The engine (lint/engine.py) runs whatever rules it is given; this module chooses them (every lint rule
unless told otherwise) and the way a document is read: an Accelerate launcher config goes through the
Accelerate rules (rules/accelerate.py), anything else through the DeepSpeed rules.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from zeroadvisor.config.reader import read_document
from zeroadvisor.config.source import Document, ParseError, parse
from zeroadvisor.deepspeed.kind import ACCELERATE, kind_of
from zeroadvisor.lint.context import Context, LintOptions
from zeroadvisor.lint.engine import run_rules
from zeroadvisor.lint.findings import Finding
from zeroadvisor.lint.rule import Rule
from zeroadvisor.rules import registry


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    document: Document | None = None


def lint_file(path: str | os.PathLike[str], options: LintOptions | None = None, rules: Iterable[Rule] | None = None,
              display: str | None = None) -> FileResult:
    name = display or str(path)
    try:
        doc = read_document(path, name)
    except ParseError as err:
        return FileResult(name, parse_error_findings(name, err, rules))
    return FileResult(name, lint_document(doc, options, rules), doc)


def lint_text(text: str, name: str = "<text>", options: LintOptions | None = None,
              rules: Iterable[Rule] | None = None) -> list[Finding]:
    try:
        doc = parse(text, name)
    except ParseError as err:
        return parse_error_findings(name, err, rules)
    return lint_document(doc, options, rules)


def lint_document(doc: Document, options: LintOptions | None = None,
                  rules: Iterable[Rule] | None = None) -> list[Finding]:
    """The findings of ``rules`` (every lint rule by default) on a parsed document."""
    selected = list(registry.LINT if rules is None else rules)
    options = options or LintOptions()
    if kind_of(doc) == ACCELERATE:  # an Accelerate launcher config
        from zeroadvisor.rules.accelerate import lint_accelerate

        return sorted(lint_accelerate(doc, options, selected), key=Finding.sort_key)
    return run_rules(Context(doc, options), selected)


def parse_error_findings(name: str, err: ParseError, rules: Iterable[Rule] | None) -> list[Finding]:
    """A file that does not parse: one invalid-syntax finding, when that rule is selected."""
    rule = registry.INVALID_SYNTAX
    if rules is not None and rule not in list(rules):
        return []
    return [Finding(name, rule.code, rule.name, rule.severity, "", err.line, err.column, err.message)]
