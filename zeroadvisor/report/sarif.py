"""SARIF 2.1.0 for GitHub code scanning: stable rule ids (the codes), relative paths,
partialFingerprints so re-uploads do not duplicate alerts.

Checked in tests against the OASIS schema (tests/data/sarif-schema-2.1.0.json). Columns are
Unicode code points (the config readers count characters of the decoded text), said once in
``columnKind``. URIs are percent-encoded (``escape.sarif_uri``); messages escape the brackets of
SARIF's embedded links (``escape.sarif_message``). No help URI: the rule text is in ``help``.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from zeroadvisor import __version__
from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.lint.rule import Rule
from zeroadvisor.report import escape

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
COLUMN_KIND = "unicodeCodePoints"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _rule_entry(rule: Rule) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.explanation},
        "help": {"text": rule.explanation},
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
        "properties": {"tags": ["deepspeed"]},
    }
    if rule.source:
        entry["properties"]["source"] = rule.source
    return entry


def _fingerprint(f: Finding) -> str:
    key = f"{escape.sarif_uri(f.file)}|{f.code}|{f.pointer}|{f.message}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _result(f: Finding, index: dict[str, int]) -> dict[str, Any]:
    location: dict[str, Any] = {"artifactLocation": {"uri": escape.sarif_uri(f.file)}}
    if f.line is not None:
        location["region"] = {"startLine": f.line, "startColumn": f.column}
    result: dict[str, Any] = {
        "ruleId": f.code,
        "level": _LEVEL[f.severity],
        "message": {"text": escape.sarif_message(f.message)},
        "locations": [{"physicalLocation": location}],
        "partialFingerprints": {"zeroadvisor/v1": _fingerprint(f)},
        "properties": {"pointer": f.pointer, "name": f.name},
    }
    if f.code in index:
        result["ruleIndex"] = index[f.code]
    if f.fix is not None:
        result["properties"]["fix"] = f.fix
    return result


def document(findings: list[Finding], rules: Iterable[Rule]) -> dict[str, Any]:
    rules = list(rules)
    index = {rule.code: i for i, rule in enumerate(rules)}
    return {
        "version": "2.1.0",
        "$schema": SARIF_SCHEMA,
        "runs": [{
            "tool": {"driver": {"name": "zeroadvisor", "version": __version__,
                                "rules": [_rule_entry(r) for r in rules]}},
            "columnKind": COLUMN_KIND,
            "results": [_result(f, index) for f in findings],
        }],
    }


def render(findings: list[Finding], rules: Iterable[Rule], ascii_only: bool = False) -> str:
    return escape.json_dumps(document(findings, rules), ascii_only=ascii_only)


def render_report(report) -> str:
    return render(report.findings, report.rules, ascii_only=report.ascii_only)
