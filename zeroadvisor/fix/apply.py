"""Findings' fixes to one patch, a unified diff, and an atomic write (``--suggest``/``--fix``)."""

from __future__ import annotations

import difflib
import os

from zeroadvisor.fix import merge_patch as mp
from zeroadvisor.fix.editor import EditError, patched_text, write_atomically
from zeroadvisor.lint.findings import Finding
from zeroadvisor.config.source import Document


class FixError(ValueError):
    """The fixes cannot be written into this file."""


def combined_patch(findings: list[Finding]) -> dict:
    """All fixes merged; config (lint) fixes first, memory advice last so it wins a conflict."""
    lint = [f.fix for f in findings if f.fix is not None and not f.code.startswith("ZA8")]
    advice = [f.fix for f in findings if f.fix is not None and f.code.startswith("ZA8")]
    return mp.merge(*lint, *advice)


def _new_text(document: Document, patch: dict) -> str:
    if document.name.lower().endswith((".yaml", ".yml")):
        raise FixError("fixes are written into JSON configs only; apply the suggested change by hand")
    try:
        return patched_text(document, patch)
    except EditError as err:
        raise FixError(str(err)) from None


def unified_diff(document: Document, patch: dict, path: str) -> str:
    new = _new_text(document, patch)
    shown = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path.lstrip("/")
    lines = difflib.unified_diff(document.text.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{shown}", tofile=f"b/{shown}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def write_fix(path: str, document: Document, patch: dict) -> None:
    write_atomically(path, _new_text(document, patch))
