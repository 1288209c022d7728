"""The rule contract: each rule is a small unit with a code, a name, a severity, docs
(what DeepSpeed does, how to fix it, a failing and a passing example) and a check.

As in yamllint, rules do not stamp their own identity: a check yields :class:`Hit`s and the
engine turns them into :class:`~zeroadvisor.lint.findings.Finding`s with the rule's code, name,
severity and the key's position. The docs examples are executed by the test-suite, so the
documentation cannot drift from the behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.lint.findings import Action, Recommends, Severity

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context


@dataclass(frozen=True, slots=True)
class Hit:
    """A rule's report before the engine stamps identity and position on it."""

    pointer: str
    message: str
    fix: JSONObject | None = None
    # locate the key or the value at ``pointer``; "file": about the whole run, reported without a line
    # (findings without a line sort first in every format) while ``pointer`` still names the key
    at: str = "key"
    offset: int | None = None  # a position in the text, for problems not tied to a key
    position: tuple[int, int] | None = None  # (line, column) when only that is known
    actions: tuple[Action, ...] = ()  # what the fix needs outside the config (Finding.actions)
    recommends: Recommends | None = None  # the change an advice rule recommends, typed (Finding.recommends)
    # where this one finding's consequence differs from the rule's default (Rule.severity_varies says when):
    # a json5 file is fatal only to the launchers that read it with json.load
    severity: Severity | None = None
    # the run stops before its first step whatever its training memory (a vLLM that never starts): the words the
    # verdict sentence adds (Finding.stops)
    stops: str = ""


@dataclass(frozen=True, slots=True)
class Example:
    """A config (JSON text, or YAML under a .yaml ``name``) and lint options; ``fails`` says whether the rule must
    fire."""

    config: str
    fails: bool
    options: dict[str, Any] = field(default_factory=dict)
    name: str = "example.json"  # the file name it is linted as: a .yaml/.yml name reads it as YAML

    def lint_keywords(self) -> dict[str, Any]:
        """The options as LintOptions keywords: a ``deepspeed_version`` request becomes the releases it names."""
        from zeroadvisor.deepspeed import releases

        keywords = dict(self.options)
        request = keywords.pop("deepspeed_version", None)
        if request is not None:
            keywords["releases"] = releases.resolve(request).releases
        return keywords

    def describe_options(self) -> str:
        """The options as a person would give them: ``--gpus 8 --gpu A10G, model {...}``."""
        import json

        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in self.options.items() if k != "model")
        model = f"model description {json.dumps(self.options['model'])}" if "model" in self.options else ""
        return ", ".join(part for part in (flags, model) if part)


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    name: str
    severity: Severity  # the default; a Hit may carry another where the consequence differs (severity_varies)
    summary: str  # one line: what is wrong
    explanation: str  # what DeepSpeed does with it, and how to fix it
    check: Callable[[Context], Iterable[Hit]]
    examples: tuple[Example, ...]
    # Where this rule and a more generic one report the same key, keep only this one.
    supersedes: tuple[str, ...] = ()
    source: str = ""  # DeepSpeed file/function or issue that backs the rule
    # Syntax rules also run on a file that did not parse; the others need its data.
    needs_data: bool = True
    # Advice rules need a memory estimate (``zeroadvisor check``); ``lint`` leaves them out.
    needs_advice: bool = False
    # When a finding's severity differs from the default, and why (docs/rules.md shows it); "" when it never does.
    severity_varies: str = ""

    @property
    def docs_anchor(self) -> str:
        return f"docs/rules.md#{self.code.lower()}-{self.name}"
