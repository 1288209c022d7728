"""The closed sets that cross layers are enums, each complete against what it names (issue 33 item 4)."""

from __future__ import annotations

import ast
from enum import StrEnum
from pathlib import Path

import pytest

from zeroadvisor.advisor.advice import Reason
from zeroadvisor.advisor.nofit import WayOut
from zeroadvisor.hardware.machine import Launcher
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.settings import FAIL_ON, FailOn
from zeroadvisor.lint.context import Integration, LintOptions
from zeroadvisor.lint.findings import ActionKind, Severity
from zeroadvisor.memory.assumed import Reach
from zeroadvisor.memory.ds_changes import Change
from zeroadvisor.memory.method import EntropyChunk, SwiftScoring
from zeroadvisor.memory.trl_sft_loss import SftLoss
from zeroadvisor.model.spec import Checkpointing, Padding
from zeroadvisor.report import REPORTERS
from zeroadvisor.report.formats import OutputFormat
from zeroadvisor.vocab import (
    Accounting,
    ActivationOffload,
    Capacity,
    Device,
    Method,
    ModelRole,
    Phase,
    Precision,
    Resource,
    SavedModules,
    TermKind,
    TrainerChoice,
    TrainerFamily,
    Verdict,
    VllmMode,
)


def test_every_output_format_has_a_renderer_and_every_renderer_a_format():
    assert set(REPORTERS) == set(OutputFormat)


def test_fail_on_is_each_severity_and_never():
    assert [member.value for member in FAIL_ON] == [*(severity.value for severity in Severity), "never"]


CAUGHT = {FailOn.ERROR: {Severity.ERROR}, FailOn.WARNING: {Severity.ERROR, Severity.WARNING},
          FailOn.INFO: set(Severity), FailOn.NEVER: set()}


@pytest.mark.parametrize("fail_on", list(FailOn))
def test_fail_on_catches_its_severity_and_worse_only(fail_on):
    assert {severity for severity in Severity if fail_on.catches(severity)} == CAUGHT[fail_on]


def test_lint_options_hold_the_integration_as_a_member_whoever_names_it():
    # rule examples and fixtures name it as text; the rules compare members (rules/auto.py, syntax.py, precision.py)
    assert LintOptions(integration="hf-trainer").integration is Integration.HF_TRAINER
    assert LintOptions().integration is Integration.ANY
    with pytest.raises(ValueError, match="'trainer' is not a valid Integration"):
        LintOptions(integration="trainer")


# --- no string comparison of a closed set past the readers -----------------------------------------------------
# The readers (config/, inputs/, cli/, deepspeed/, and rules/ where they compare a value as written in the raw
# config) turn text into enum members; every layer after them compares members. The scan below reads the source
# of those later layers and fails on any ==, !=, in or not in whose other side is a string literal (or a tuple,
# list or set of them) spelling one of the closed sets' values: such a comparison is a member written as text.

PACKAGE = Path(__file__).resolve().parent.parent / "zeroadvisor"
CLOSED_SETS: tuple[type[StrEnum], ...] = (
    Device, Precision, Verdict, Resource, Capacity, Phase, TermKind, Accounting, Checkpointing, Padding,
    OutputFormat, FailOn, Severity, Integration, Command, ActionKind, Launcher, Reason, Reach, Method, TrainerFamily,
    VllmMode, ModelRole, WayOut, Change, SftLoss, SavedModules, ActivationOffload, TrainerChoice, EntropyChunk,
    SwiftScoring)
CLOSED_VALUES = frozenset(member.value for enum in CLOSED_SETS for member in enum)
# The layers past the readers: they receive members and must compare members.
PAST_THE_READERS = ("memory", "throughput", "advisor", "report", "fix", "flows.py", "api.py")
_COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _closed_literal(node: ast.expr) -> str | None:
    """The closed-set value ``node`` spells as text: a string literal, or one inside a literal tuple/list/set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in CLOSED_VALUES:
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return next((value for value in map(_closed_literal, node.elts) if value is not None), None)
    return None


def closed_set_comparisons(source: str, filename: str = "<snippet>") -> list[str]:
    """Every comparison in ``source`` of something with a closed set's value written as text: "file:line: value"."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for index, op in enumerate(node.ops):
            if not isinstance(op, _COMPARISONS):
                continue
            value = _closed_literal(sides[index]) or _closed_literal(sides[index + 1])
            if value is not None:
                found.append(f"{filename}:{node.lineno}: {value!r}")
    return found


def _past_the_readers() -> list[Path]:
    paths = []
    for name in PAST_THE_READERS:
        path = PACKAGE / name
        paths += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return paths


def test_every_string_enum_of_the_package_is_a_closed_set_the_scan_knows():
    # a new StrEnum is a new closed set: its values join the scan (or this test names it)
    defined = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "StrEnum"
                                                      for b in node.bases):
                defined.add(node.name)
    assert defined == {enum.__name__ for enum in CLOSED_SETS}


def test_no_string_comparison_of_a_closed_set_past_the_readers():
    found = []
    for path in _past_the_readers():
        found += closed_set_comparisons(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE.parent)))
    assert found == []


@pytest.mark.parametrize("snippet", [
    'if term.device == "gpu": pass',
    'ok = "does-not-fit" != verdict',
    'ok = st.binding_phase in ("load", "save")',
    'ok = precision not in ["bf16", "fp16"]',
    'ok = a < b == "cpu"',  # a chained comparison: the == is still one
    'ok = checkpointing in {"full"}',
])
def test_the_scan_catches_a_closed_set_compared_as_text(snippet):
    assert len(closed_set_comparisons(snippet)) == 1


@pytest.mark.parametrize("snippet", [
    "if term.device == Resource.GPU: pass",
    'ok = row == "parameters"',  # a memory row: a key of memory/terms.py ROWS, not one of the enums
    'label = {"gpu": 1}["gpu"]',  # a lookup, not a comparison
    'ok = len(x) < "cpu"',  # an ordering is no membership test
])
def test_the_scan_leaves_members_and_other_text_alone(snippet):
    assert closed_set_comparisons(snippet) == []


def test_the_scan_catches_a_member_put_back_as_text_in_the_real_estimate():
    # memory/estimate.py as it was before the enums: the term's resource compared as "gpu"
    source = (PACKAGE / "memory" / "estimate.py").read_text(encoding="utf-8")
    assert "t.device == Resource.GPU" in source
    found = closed_set_comparisons(source.replace("t.device == Resource.GPU", 't.device == "gpu"'), "estimate.py")
    assert found and all(hit.endswith("'gpu'") for hit in found)
