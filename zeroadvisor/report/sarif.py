"""SARIF 2.1.0 for GitHub code scanning: stable rule ids (the codes), relative paths,
partialFingerprints so re-uploads do not duplicate alerts."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import PurePath
from typing import Any, Iterable

from zeroadvisor import __version__
from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.lint.rule import Rule

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://github.com/zeroadvisor/zeroadvisor"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _uri(path: str) -> str:
    candidate = PurePath(path)
    if candidate.is_absolute():
        try:
            candidate = PurePath(os.path.relpath(path))
        except ValueError:
            pass
    return candidate.as_posix()


def _rule_entry(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.explanation},
        "helpUri": f"{INFO_URI}/blob/main/{rule.docs_anchor}",
        "help": {"text": rule.explanation},
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
        "properties": {"tags": ["deepspeed"], "source": rule.source},
    }


def _fingerprint(f: Finding) -> str:
    return hashlib.sha256(f"{_uri(f.file)}|{f.code}|{f.pointer}|{f.message}".encode()).hexdigest()[:32]


def document(findings: list[Finding], rules: Iterable[Rule]) -> dict[str, Any]:
    rules = list(rules)
    index = {rule.code: i for i, rule in enumerate(rules)}
    results = []
    for f in findings:
        result: dict[str, Any] = {
            "ruleId": f.code,
            "level": _LEVEL[f.severity],
            "message": {"text": f.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(f.file)}}}],
            "partialFingerprints": {"zeroadvisor/v1": _fingerprint(f)},
            "properties": {"pointer": f.pointer, "name": f.name},
        }
        if f.code in index:
            result["ruleIndex"] = index[f.code]
        if f.line is not None:
            result["locations"][0]["physicalLocation"]["region"] = {"startLine": f.line, "startColumn": f.column}
        if f.fix is not None:
            result["properties"]["fix"] = f.fix
        results.append(result)
    return {
        "version": "2.1.0",
        "$schema": SARIF_SCHEMA,
        "runs": [{
            "tool": {"driver": {"name": "zeroadvisor", "version": __version__, "informationalUri": INFO_URI,
                                "rules": [_rule_entry(r) for r in rules]}},
            "results": results,
        }],
    }


def render(findings: list[Finding], rules: Iterable[Rule]) -> str:
    return json.dumps(document(findings, rules), indent=2, ensure_ascii=False) + "\n"


def render_report(report) -> str:
    return render(report.findings, report.rules)
