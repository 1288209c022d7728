"""Findings' fixes to one patch, a unified diff, and an atomic write (``--suggest``/``--fix``).

The CLI's flow, so the findings are always shown before any error:

    plan = plan_fixes(path, document, findings)   # never raises for a bad file; plan.error says why
    ...print the findings, and plan.diff for --suggest...
    write_fixes(plan)                              # raises FixError (one line), never OSError

``lint --fix``/``--diff`` plan with ``plan_lint_fixes``: the findings' fixes, then the fixed text linted again
and fixed again while that changes it (a renamed section may hold keys with fixes of their own), so one run
leaves what a second run would.

Every error is a :class:`FixError` whose message is one line without the file name.
"""

from __future__ import annotations

import difflib
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from zeroadvisor.advisor.check import combined_patch
from zeroadvisor.config import merge_patch
from zeroadvisor.config.source import Document, parse
from zeroadvisor.fix.editor import EditError, FixError, WriteError, patched_text, write_atomically
from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.lint.findings import Finding

__all__ = [
    "EditError",
    "FixError",
    "FixPlan",
    "LintFixes",
    "WriteError",
    "plan_fixes",
    "plan_lint_fixes",
    "unified_diff",
    "write_fix",
    "write_fixes",
]

NO_NEWLINE = "\\ No newline at end of file\n"  # diff's marker; git apply and patch need it
MAX_PASSES = 10  # lint --fix: fix, lint the result, fix again, at most this many times (a fix never loops)


@dataclass(frozen=True, slots=True)
class FixPlan:
    """What ``--suggest``/``--fix`` would do to one file."""

    path: str
    document: Document
    patch: JSONObject
    new_text: str | None  # None when the fixes cannot be written (see error)
    diff: str  # "" when nothing changes or the fixes cannot be written
    error: FixError | None  # why the fixes cannot be written into this file

    @property
    def changes(self) -> bool:
        return self.new_text is not None and self.new_text != self.document.text


def plan_fixes(path: str, document: Document, findings: list[Finding]) -> FixPlan:
    """The combined fix of ``findings`` as new text and a diff; a refusal is kept in ``error``."""
    patch = combined_patch(findings)
    if not patch:
        return FixPlan(path, document, patch, document.text, "", None)
    try:
        new_text = _new_text(document, patch)
    except FixError as err:
        return FixPlan(path, document, patch, None, "", err)
    return FixPlan(path, document, patch, new_text, _diff(document.text, new_text, path), None)


@dataclass(frozen=True, slots=True)
class LintFixes:
    """What ``lint --fix``/``--diff`` would do to one file: the plan (original text to the last), the findings of
    the last text, and how many findings the passes removed (each pass's findings gone from the next's)."""

    plan: FixPlan
    remaining: list[Finding]
    fixed: int


def plan_lint_fixes(path: str, document: Document, findings: list[Finding],
                    relint: Callable[[Document], list[Finding]]) -> LintFixes:
    """The plan of ``lint --fix``/``--diff``: the findings' fixes, then ``relint`` of the fixed text and its fixes,
    until nothing changes (at most MAX_PASSES). ``remaining`` is ``findings`` themselves when nothing changes or
    the first fixes cannot be written (``plan.error``); a refusal after the first pass keeps the earlier passes'
    text."""
    current, remaining, patches, fixed = document, findings, [], 0
    for _ in range(MAX_PASSES):
        patch = combined_patch(remaining)
        if not patch:
            break
        try:
            new_text = _new_text(current, patch)
        except FixError as err:
            if current is document:
                return LintFixes(FixPlan(path, document, patch, None, "", err), findings, 0)
            break
        if new_text == current.text:
            break
        patches.append(patch)
        current = parse(new_text, document.name)  # JSON or hjson: _new_text refuses YAML; it reads back (editor)
        after = relint(current)
        fixed += _gone(remaining, after)
        remaining = after
    plan = FixPlan(path, document, merge_patch.merge(*patches), current.text, _diff(document.text, current.text, path),
                   None)
    return LintFixes(plan, remaining, fixed)


def _gone(before: list[Finding], after: list[Finding]) -> int:
    """How many of ``before`` are not in ``after``, a finding known by its rule and key (its line moves)."""
    def key(finding: Finding) -> tuple[str, str]:
        return finding.code, finding.pointer

    return sum((Counter(map(key, before)) - Counter(map(key, after))).values())


def write_fixes(plan: FixPlan) -> bool:
    """Write the plan into its file, atomically; True if the file changed. Raises FixError."""
    if plan.error is not None:
        raise plan.error
    if plan.new_text is None or not plan.changes:
        return False
    write_atomically(plan.path, plan.new_text, original=plan.document.text)
    return True


def unified_diff(document: Document, patch: JSONObject, path: str) -> str:
    """The patched file as a unified diff against ``path`` (git apply / patch -p1). Raises FixError."""
    return _diff(document.text, _new_text(document, patch), path)


def write_fix(path: str, document: Document, patch: JSONObject) -> None:
    """Write ``patch`` into the file read as ``document``. Raises FixError."""
    new_text = _new_text(document, patch)
    if new_text != document.text:
        write_atomically(path, new_text, original=document.text)


# Why a YAML config (an Accelerate config, or a DeepSpeed config written as YAML) gets no diff: the editor keeps
# every byte of a JSON or hjson file outside the change; for YAML it has no such writer.
NOT_PATCHED = "fixes are written into JSON configs only; apply the suggested change by hand"


def patchable(document: Document) -> bool:
    """Whether fixes can be written into ``document``'s file (JSON or hjson; not YAML)."""
    from zeroadvisor.config.reader import YAML_SUFFIXES

    return not document.name.lower().endswith(YAML_SUFFIXES)


def no_diff_note(name: str, document: Document, written: bool) -> str:
    """The one line that says why a YAML config's findings come without a diff (``written``: --fix asked)."""
    from zeroadvisor.deepspeed.kind import ACCELERATE, kind_of

    what = "nothing written" if written else "no diff"
    kind = "an Accelerate config" if kind_of(document) == ACCELERATE else "the config"
    return f"{name}: {what}: {kind} is YAML, and {NOT_PATCHED}"


def _new_text(document: Document, patch: JSONObject) -> str:
    if not patchable(document):
        raise FixError(NOT_PATCHED)
    return patched_text(document, patch)


def _diff(old: str, new: str, path: str) -> str:
    if old == new:
        return ""
    relative = os.path.relpath(path)
    shown = path.lstrip("/") if relative.startswith("..") else relative
    lines = difflib.unified_diff(_lines(old), _lines(new), fromfile=_diff_path("a/" + shown),
                                 tofile=_diff_path("b/" + shown))
    # A last line without a line break is marked, as diff -u and git diff do.
    return "".join(line if line.endswith("\n") else line + "\n" + NO_NEWLINE for line in lines)


def _lines(text: str) -> list[str]:
    """Lines as diff and git count them: ended by LF only (str.splitlines also splits at \\r, \\f,
    U+2028..., which would make hunks that git apply cannot place)."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


_C_ESCAPES = {"\"": "\\\"", "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _diff_path(name: str) -> str:
    """A path as git writes it in a diff header: in C quotes if it holds a quote, a backslash or
    a control character (git quote_c_style), so a file name cannot break the diff; a name with a
    space ends with a tab, where GNU patch stops reading it (git diff.c does the same)."""
    if not any(c in _C_ESCAPES or ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return name + "\t" if " " in name else name
    return '"' + "".join(_C_ESCAPES.get(c) or (f"\\{ord(c):03o}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                         for c in name) + '"'
