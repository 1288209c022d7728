"""Lint: a path, text or document in, the lint rules' findings out.

The engine (lint/engine.py) runs whatever rules it is given; this module chooses them (every lint rule
unless told otherwise) and the way a document is read: an Accelerate launcher config goes through the
Accelerate rules (rules/accelerate.py), anything else through the DeepSpeed rules.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from zeroadvisor.config.reader import read_document
from zeroadvisor.config.source import Document, ParseError, parse
from zeroadvisor.deepspeed import releases, schema
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
    return by_release(doc, options, selected)


def by_release(doc: Document, options: LintOptions, rules: list[Rule]) -> list[Finding]:
    """The rules' findings as each chosen DeepSpeed release reads the document (schema.reading_as). A finding
    every release gives is kept as it is; one only some give names them ("DeepSpeed 0.14-0.16: ...")."""
    chosen = options.releases or (releases.latest(),)
    runs: dict[str, list[Finding]] = {}
    shared: dict[str, tuple[str, list[Finding]]] = {}  # releases.reads_like -> (the release read as, its findings)
    for version in chosen:
        like = releases.reads_like(version)  # a pin range admits dozens of patch releases, most sharing an entry
        if like not in shared:
            with schema.reading_as(version):
                shared[like] = (version, run_rules(Context(doc, options), rules))
        read_as, found = shared[like]
        runs[version] = found if read_as == version else [
            dataclasses.replace(f, message=f.message.replace(releases.label(read_as), releases.label(version)))
            for f in found]
    if len(chosen) == 1:
        return runs[chosen[0]]
    groups: dict[tuple[str, str, int | None, int | None, str], tuple[Finding, list[str]]] = {}
    for version, found in runs.items():
        for finding in found:
            key = (finding.code, finding.pointer, finding.line, finding.column,
                   finding.message.replace(releases.label(version), releases.LABEL))
            groups.setdefault(key, (finding, []))[1].append(version)
    merged = []
    for (_code, _pointer, _line, _column, message), (finding, versions) in groups.items():
        everyone = len(versions) == len(chosen)
        label = releases.label(releases.span(versions))
        if releases.LABEL in message:
            text = message.replace(releases.LABEL, label)
        else:
            text = message if everyone else f"{label}: {message}"
        merged.append(dataclasses.replace(finding, message=text))
    return sorted(merged, key=Finding.sort_key)


def parse_error_findings(name: str, err: ParseError, rules: Iterable[Rule] | None) -> list[Finding]:
    """A file that does not parse: one invalid-syntax finding, when that rule is selected."""
    rule = registry.INVALID_SYNTAX
    if rules is not None and rule not in list(rules):
        return []
    return [Finding(name, rule.code, rule.name, rule.severity, "", err.line, err.column, err.message)]
