"""The lint engine: runs rules over a context and stamps their hits into findings.

It knows the rule contract (lint/rule.py) and nothing of the rules themselves: which rules run, and on
which kind of document, is decided above it (rules/linter.py for lint, advisor/check.py for check).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from zeroadvisor.config.source import Document
from zeroadvisor.lint.context import Context
from zeroadvisor.lint.findings import Finding
from zeroadvisor.lint.rule import Hit, Rule

# A hostile file can make one rule fire per key or per character (150,000 duplicate keys
# printed 58 MB). Past this many findings of one rule in one file a reader learns nothing
# new: the rest are counted in one summary finding of that rule.
MAX_FINDINGS_PER_RULE = 100


def run_rules(ctx: Context, rules: Sequence[Rule]) -> list[Finding]:
    """The findings of ``rules`` on ``ctx``, in file order. A rule that needs data skips a file without
    any; an advice rule needs a context that carries the advice (``ctx.advised``)."""
    findings: list[Finding] = []
    for rule in rules:
        if (rule.needs_data and ctx.doc.data is None) or (rule.needs_advice and not ctx.advised):
            continue
        findings.extend(capped(rule, rule.check(ctx), ctx.doc))
    return merge_findings(findings, rules)


def merge_findings(findings: Iterable[Finding], rules: Sequence[Rule]) -> list[Finding]:
    """Findings of ``rules`` (from one run or several on the same file) in file order, a generic finding
    dropped where a more specific rule claims its pointer (``Rule.supersedes``)."""
    return sorted(_drop_superseded(list(findings), rules), key=Finding.sort_key)


def capped(rule: Rule, hits: Iterable[Hit], doc: Document) -> list[Finding]:
    """The rule's findings, the first MAX_FINDINGS_PER_RULE of them and a count of the rest."""
    out: list[Finding] = []
    hits = iter(hits)
    for hit in hits:
        finding = stamp(rule, hit, doc)
        if len(out) == MAX_FINDINGS_PER_RULE:
            rest = 1 + sum(1 for _ in hits)
            out.append(Finding(doc.name, rule.code, rule.name, finding.severity, "", finding.line, finding.column,
                               f"{rest} more {rule.name} findings from here on are not shown "
                               f"(the first {MAX_FINDINGS_PER_RULE} are)"))
            break
        out.append(finding)
    return out


def stamp(rule: Rule, hit: Hit, doc: Document) -> Finding:
    """A hit with the rule's identity and the position of what it points at."""
    if hit.at == "file":
        line, column = None, None
    elif hit.position is not None:
        line, column = hit.position
    elif hit.offset is not None:
        line, column = doc.position(hit.offset)
    else:
        line, column = doc.locate(hit.pointer, hit.at)
    severity = hit.severity if hit.severity is not None else rule.severity
    return Finding(doc.name, rule.code, rule.name, severity, hit.pointer, line, column, hit.message, hit.fix,
                   hit.actions, hit.recommends, hit.stops)


def _drop_superseded(findings: list[Finding], rules: Sequence[Rule]) -> list[Finding]:
    by_name = {rule.name: rule for rule in rules}
    claimed = {
        (f.file, f.pointer, generic)
        for f in findings
        for generic in by_name[f.name].supersedes
    }
    return [f for f in findings if (f.file, f.pointer, f.name) not in claimed]
