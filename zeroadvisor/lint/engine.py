"""The library entry point: text or path in, findings out. The CLI is a thin layer on this."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable

from zeroadvisor.lint.findings import Finding
from zeroadvisor.rules import registry
from zeroadvisor.lint.rule import Hit, Rule
from zeroadvisor.lint.context import Context, LintOptions
from zeroadvisor.config.accelerate import is_accelerate_config
from zeroadvisor.config.reader import read_document
from zeroadvisor.config.source import Document, ParseError, parse

# A hostile file can make one rule fire per key or per character (150,000 duplicate keys
# printed 58 MB). Past this many findings of one rule in one file a reader learns nothing
# new: the rest are counted in one summary finding of that rule.
MAX_FINDINGS_PER_RULE = 100


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    document: Document | None = None


def lint_file(path: str | os.PathLike, options: LintOptions | None = None, rules: Iterable[Rule] | None = None,
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


def lint_document(doc: Document, options: LintOptions | None = None, rules: Iterable[Rule] | None = None,
                  advice: object = None) -> list[Finding]:
    selected = list(registry.LINT if rules is None else rules)
    if advice is None and is_accelerate_config(doc.data):  # an Accelerate launcher config (rules/accelerate.py)
        from zeroadvisor.rules.accelerate import lint_accelerate

        return sorted(lint_accelerate(doc, options or LintOptions(), selected, _capped), key=Finding.sort_key)
    ctx = Context(doc, options or LintOptions(), advice)
    findings: list[Finding] = []
    for rule in selected:
        if (rule.needs_data and doc.data is None) or (rule.needs_advice and advice is None):
            continue
        findings.extend(_capped(rule, rule.check(ctx), doc))
    return sorted(_drop_superseded(findings, selected), key=Finding.sort_key)


def _capped(rule: Rule, hits: Iterable[Hit], doc: Document) -> list[Finding]:
    """The rule's findings, the first MAX_FINDINGS_PER_RULE of them and a count of the rest."""
    out: list[Finding] = []
    hits = iter(hits)
    for hit in hits:
        finding = _stamp(rule, hit, doc)
        if len(out) == MAX_FINDINGS_PER_RULE:
            rest = 1 + sum(1 for _ in hits)
            out.append(Finding(doc.name, rule.code, rule.name, rule.severity, "", finding.line, finding.column,
                               f"{rest} more {rule.name} findings from here on are not shown "
                               f"(the first {MAX_FINDINGS_PER_RULE} are)"))
            break
        out.append(finding)
    return out


def parse_error_findings(name: str, err: ParseError, rules: Iterable[Rule] | None) -> list[Finding]:
    rule = registry.INVALID_SYNTAX
    if rules is not None and rule not in list(rules):
        return []
    return [Finding(name, rule.code, rule.name, rule.severity, "", err.line, err.column, err.message)]


def _stamp(rule: Rule, hit: Hit, doc: Document) -> Finding:
    if hit.at == "file":
        line, column = None, None
    elif hit.position is not None:
        line, column = hit.position
    elif hit.offset is not None:
        line, column = doc.position(hit.offset)
    else:
        line, column = doc.locate(hit.pointer, hit.at)
    return Finding(doc.name, rule.code, rule.name, rule.severity, hit.pointer, line, column, hit.message, hit.fix,
                   hit.actions, hit.recommends)


def _drop_superseded(findings: list[Finding], rules: list[Rule]) -> list[Finding]:
    by_name = {rule.name: rule for rule in rules}
    claimed = {
        (f.file, f.pointer, generic)
        for f in findings
        for generic in by_name[f.name].supersedes
    }
    return [f for f in findings if (f.file, f.pointer, f.name) not in claimed]
