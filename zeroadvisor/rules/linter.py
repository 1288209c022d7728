"""Lint: a path, text or document in, the lint rules' findings out.

The engine (lint/engine.py) runs whatever rules it is given; this module chooses them (every lint rule
unless told otherwise) and the way a document is read: an Accelerate launcher config goes through the
Accelerate rules (rules/accelerate.py), anything else through the DeepSpeed rules.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zeroadvisor.config.reader import read_document, read_text_document
from zeroadvisor.config.source import Document, ParseError
from zeroadvisor.deepspeed import releases, schema
from zeroadvisor.deepspeed.kind import ACCELERATE, kind_of
from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.lint.context import Context, Integration, LintOptions
from zeroadvisor.lint.engine import capped, run_rules
from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.lint.rule import Rule
from zeroadvisor.rules import accelerate, registry

if TYPE_CHECKING:
    from zeroadvisor.deepspeed import accelerate_map


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
    """The findings on a config given as text, read as a file of that name would be (YAML for .yaml/.yml)."""
    try:
        doc = read_text_document(text, name)
    except ParseError as err:
        return parse_error_findings(name, err, rules)
    return lint_document(doc, options, rules)


def lint_document(doc: Document, options: LintOptions | None = None,
                  rules: Iterable[Rule] | None = None) -> list[Finding]:
    """The findings of ``rules`` (every lint rule by default) on a parsed document."""
    selected = list(registry.LINT if rules is None else rules)
    options = options or LintOptions()
    if kind_of(doc) == ACCELERATE:  # an Accelerate launcher config
        return sorted(lint_accelerate(doc, options, selected), key=Finding.sort_key)
    return by_release(doc, options, selected)


def by_release(doc: Document, options: LintOptions, rules: list[Rule]) -> list[Finding]:
    """The rules' findings as each chosen DeepSpeed release reads the document (schema.reading_as). A finding
    every release gives is kept as it is; one only some give names them ("DeepSpeed 0.14-0.16: ..."). A fix is
    kept only where every release wants that same edit (``_fix_all_want``): ``--fix``, ``--diff`` and the JSON
    "fix" never change what one of the pinned releases reads."""
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
    wanted = _wanted_fixes(runs)
    for (_code, _pointer, _line, _column, message), (finding, versions) in groups.items():
        everyone = len(versions) == len(chosen)
        label = releases.label(releases.span(versions))
        if releases.LABEL in message:
            text = message.replace(releases.LABEL, label)
        else:
            text = message if everyone else f"{label}: {message}"
        merged.append(_fix_all_want(dataclasses.replace(finding, message=text), chosen, runs, wanted))
    return sorted(merged, key=Finding.sort_key)


def _fix_key(fix: JSONObject) -> str:
    """A fix (a merge patch) as one comparable text: two findings want the same edit when their keys are equal."""
    return json.dumps(fix, sort_keys=True, default=repr)


def _wanted_fixes(runs: dict[str, list[Finding]]) -> dict[str, set[str]]:
    """Each fix some release proposes -> the releases that propose it (by whichever rule: one release's ZA101
    and another's ZA102 can want the same rename)."""
    wanted: dict[str, set[str]] = {}
    for version, found in runs.items():
        for finding in found:
            if finding.fix is not None:
                wanted.setdefault(_fix_key(finding.fix), set()).add(version)
    return wanted


def _fix_all_want(finding: Finding, chosen: tuple[str, ...], runs: dict[str, list[Finding]],
                  wanted: dict[str, set[str]]) -> Finding:
    """``finding`` with its fix only where every chosen release wants that same edit. A pin admits each of its
    releases: a fix one of them does not want (0.19.8 deletes 'curriculum_learning', which 0.16-0.19.7 read)
    would change the run on another, so the finding stays unfixed and says which releases disagree."""
    if finding.fix is None:
        return finding
    agree = wanted.get(_fix_key(finding.fix), set())
    others = [version for version in chosen if version not in agree]
    if not others:
        return finding
    why = [f"{releases.label(releases.span(versions))} {words[len(versions) == 1]}"
           for words, versions in _disagreeing(finding.pointer, others, runs).items() if versions]
    note = f"not fixed: {', '.join(why)}"
    text = finding.message
    text = f"{text} {note[0].upper()}{note[1:]}." if text.endswith(".") else f"{text}; {note}"
    return dataclasses.replace(finding, fix=None, message=text)


_OTHERWISE = ("would change it otherwise", "would change it otherwise")  # (several releases, one release)
_NO_FIX = ("have no fix for it", "has no fix for it")
_AS_IS = ("read it as it is", "reads it as it is")


def _disagreeing(pointer: str, others: list[str], runs: dict[str, list[Finding]]) -> dict[tuple[str, str], list[str]]:
    """The releases that do not want a fix at ``pointer``, by why: a fix of their own there (another edit), an
    error there that they have no fix for (the edit would not make them start: 'zenflow' before 0.17), or
    nothing worse than a warning (they read the key as it is: 0.16-0.19.7 and 'curriculum_learning')."""
    why: dict[tuple[str, str], list[str]] = {_OTHERWISE: [], _NO_FIX: [], _AS_IS: []}
    for version in others:
        here = [f for f in runs[version] if f.pointer == pointer]
        if any(f.fix is not None for f in here):
            why[_OTHERWISE].append(version)
        elif any(f.severity == Severity.ERROR for f in here):
            why[_NO_FIX].append(version)
        else:
            why[_AS_IS].append(version)
    return why


def parse_error_findings(name: str, err: ParseError, rules: Iterable[Rule] | None) -> list[Finding]:
    """A file that does not parse: one invalid-syntax finding, when that rule is selected."""
    rule = registry.INVALID_SYNTAX
    if rules is not None and rule not in list(rules):
        return []
    return [Finding(name, rule.code, rule.name, rule.severity, "", err.line, err.column, err.message)]


# -- an Accelerate launcher config (rules/accelerate.py) ----------------------------------------------

def lint_accelerate(doc: Document, options: LintOptions, selected: list[Rule]) -> list[Finding]:
    """The findings for an Accelerate config: these rules on the YAML, the DeepSpeed rules on the
    DeepSpeed config it makes Accelerate build."""
    ctx = Context(doc, options)
    findings: list[Finding] = []
    for rule in selected:
        if rule.code in accelerate.CODES:
            findings.extend(capped(rule, rule.check(ctx), doc))
    deepspeed_rules = [rule for rule in selected if rule.code not in accelerate.CODES and not rule.needs_advice]
    findings.extend(deepspeed_findings(doc, accelerate.launch_of(ctx), deepspeed_rules, options, findings))
    return [dataclasses.replace(f, fix=None) if f.fix is not None else f for f in findings]


def deepspeed_findings(doc: Document, launch: accelerate_map.Launch, rules: list[Rule], options: LintOptions,
                       already: list[Finding]) -> list[Finding]:
    built = accelerate.deepspeed_document(doc, launch)
    if built is None or not rules:
        return []
    # read as the releases the YAML's pin (or the flag) decides, as a ds_config beside it is: Accelerate hands the
    # built config to whichever DeepSpeed is installed, and the latest alone would call a pinned section removed
    lint_options = LintOptions(integration=Integration.ACCELERATE, gpus=launch.world_size or options.gpus,
                               releases=options.releases)
    found = lint_document(built, lint_options, rules)
    return place_on_yaml(doc, launch, found, already)


def place_on_yaml(doc: Document, launch: accelerate_map.Launch, found: list[Finding],
                  already: list[Finding]) -> list[Finding]:
    """Findings about the built DeepSpeed config, placed on the YAML key each value comes from (findings in
    a deepspeed_config_file stay in that file); one already reported at that YAML key is left out."""
    from zeroadvisor.deepspeed import accelerate_map  # only for an Accelerate file (lint's start-up)

    if launch.config_document is not None:
        return list(found)
    taken = {(f.pointer, f.code) for f in already} | {f.pointer for f in already if f.severity is Severity.ERROR}
    out = []
    for finding in found:
        rule = registry.BY_CODE.get(finding.code)
        if finding.severity is Severity.INFO and rule is not None and not rule.needs_advice:
            continue  # notes on the keys Accelerate writes itself (offload_param "none" at stage 2, ...)
        pointer = accelerate_map.yaml_pointer(launch, doc, finding.pointer)
        if pointer in taken or (pointer, finding.code) in taken:
            continue
        line, column = doc.locate(pointer) if pointer else (None, None)
        where = ".".join(finding.pointer.split("/")[1:])
        message = f"{finding.message} (in the DeepSpeed config Accelerate builds, at {where})" if where \
            else finding.message
        out.append(dataclasses.replace(finding, file=doc.name, pointer=pointer, line=line, column=column, fix=None,
                                       message=message))
    return out
