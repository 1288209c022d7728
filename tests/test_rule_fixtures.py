"""Every rule's fixtures in tests/rules/ (ruff style): the findings of that rule, exactly.

Each case is a config as users write it, lint options (or a model and cluster for the advice
rules) and the reviewed findings: code, pointer, line, column, message and fix; plus the codes
of the other rules that fire. ``tools/update_rule_fixtures.py`` rewrites the expectations for
review in the diff; a case whose current output is believed wrong carries ``xfail: reason``
with the hand-written expectation (strict: it fails once the tool is fixed, to drop the mark).
"""

from __future__ import annotations

import re

import pytest

from conftest import load_script
from zeroadvisor.advisor import registry
from zeroadvisor.lint.findings import Severity

fixtures = load_script("tools/update_rule_fixtures.py", "update_rule_fixtures")


def _cases():
    out = []
    for path in fixtures.fixture_files():
        data = fixtures.load(path)
        for case in data["cases"]:
            marks = [pytest.mark.xfail(reason=case["xfail"], strict=True)] if "xfail" in case else []
            out.append(pytest.param(data["rule"], case, marks=marks, id=f"{path.stem}::{case['name']}"))
    return out


CASES = _cases()


@pytest.mark.parametrize("code,case", CASES)
def test_rule_fixture(code, case):
    mine, also = fixtures.outcome(code, fixtures.run_case(case))
    expected = case.get("expected")
    assert expected is not None and "also" in case, \
        "the case has no expectation yet: run tools/update_rule_fixtures.py and review the diff"
    assert mine == expected, (
        f"findings of {code} differ from the reviewed fixture (if the change is intended, run "
        f"tools/update_rule_fixtures.py {code} and review the diff):\n"
        + fixtures.dump({"expected": expected}) + "--- got ---\n" + fixtures.dump({"expected": mine}))
    assert also == case["also"], f"other rules firing changed: expected {case['also']}, got {also}"


@pytest.mark.parametrize("rule", registry.ALL, ids=lambda r: f"{r.code}-{r.name}")
def test_every_rule_has_fixtures(rule):
    path = fixtures.fixture_path(rule)
    assert path.is_file(), f"{rule.code} {rule.name} has no fixture file {path.name} in tests/rules/"
    data = fixtures.load(path)
    assert (data["rule"], data["name"]) == (rule.code, rule.name)
    reviewed = [c for c in data["cases"] if "xfail" not in c]
    firing = [c for c in reviewed if c.get("expected")]
    silent = [c for c in reviewed if c.get("expected") == []]
    assert len(firing) >= 2, f"{path.name}: at least two cases where the rule fires"
    assert len(silent) >= 2, f"{path.name}: at least two cases where it does not (passing cases, near misses)"
    # a finding whose severity is not the rule's default is recorded with it (update_rule_fixtures.finding_record):
    # such a rule says when in severity_varies (docs/rules.md), and one that says so shows it in a fixture
    varies = any("severity" in finding for case in firing for finding in case["expected"])
    assert varies == bool(rule.severity_varies), \
        f"{path.name}: a fixture with a non-default severity iff {rule.code} has severity_varies"
    if rule.severity is Severity.ERROR and not rule.needs_advice and rule.needs_data:
        # an error rule is proved against DeepSpeed by tests/oracle/test_rule_fixes_oracle.py
        assert any(not c.get("also") for c in firing), f"{path.name}: one firing case with no other finding"


def test_no_fixture_for_an_unknown_rule():
    expected = {fixtures.fixture_path(rule).name for rule in registry.ALL}
    stray = [p.name for p in fixtures.fixture_files() if p.name not in expected]
    assert not stray, f"fixture files that match no rule: {stray}"
    assert not [p.name for p in fixtures.FIXTURES.iterdir() if p.suffix != ".yaml"], "tests/rules/ holds *.yaml only"


def test_fixture_files_are_as_the_tool_writes_them():
    """Hand edits keep the tool's layout, so the next update's diff shows only real changes."""
    for path in fixtures.fixture_files():
        data = fixtures.load(path)
        assert fixtures.dump(data) == path.read_text("utf-8"), \
            f"{path.name} is not in the tool's layout: run tools/update_rule_fixtures.py"


def test_fixture_hardware_options_are_the_step_time_flags():
    """The machine a fixture may give is exactly the step-time model's flags (one table: DEFAULTS)."""
    from zeroadvisor.hardware.machine import DEFAULTS
    from zeroadvisor.memory.assumed import HARDWARE_INPUTS, INPUTS

    assert set(fixtures.HARDWARE_OPTIONS) == {HARDWARE_INPUTS[field] for field in DEFAULTS}
    assert {INPUTS[HARDWARE_INPUTS[field]].flag for field in DEFAULTS} == {
        f"--{option.replace('_', '-')}" for option in fixtures.HARDWARE_OPTIONS}


# A figure in a note: a size ("40 GB", "1.5 TiB", "2TB") or a time ("2.02 s"). A stage a note says fits: "ZeRO-2
# fits", "ZeRO-3 alone fits".
_FIGURE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?) ?([KMGT]i?B|ms|s)\b")
_STAGE_FITS = re.compile(r"\bZeRO-(\d)\b[^.;:()]{0,30}?\bfits\b")


def _note_problems(case: dict) -> list[str]:
    """What a case's note states that the case does not hold. A note says why in words; the figures of the outcome
    are the expectation's, which tools/update_rule_fixtures.py regenerates. So a size or time in a note is one the
    case gives (its options or config: "on a 45 GB card"), and a stage it says fits is the configured one or one
    the expected findings name ("ZeRO-1 fits ..."): a figure worked out by hand drifts when the model changes
    ("ZeRO-2 fits (~40 GB)" stood beside an expectation of ZeRO-1 at 43.62 GiB)."""
    note = case["note"]
    given = (fixtures.dump({"options": case["options"]}) if "options" in case else "") + case.get("config", "")
    given_figures = {(float(n), unit) for n, unit in _FIGURE.findall(given)}
    problems = [f"states the figure {n} {unit}: say it in words (the figures are the expectation's)"
                for n, unit in _FIGURE.findall(note) if (float(n), unit) not in given_figures]
    expected = fixtures.dump({"expected": case.get("expected") or []})
    named = {int(s) for s in re.findall(r"\bZeRO-(\d)\b", expected)}
    named |= {int(s) for s in re.findall(r"\bstage\b\W+(\d)\b", expected + case.get("config", ""))}
    problems += [f"says ZeRO-{stage} fits, which neither the config nor the expected findings name"
                 for stage in _STAGE_FITS.findall(note) if int(stage) not in named]
    return problems


def test_fixture_notes_state_only_what_the_case_holds():
    wrong = [f"{case_id}: {problem}" for param in CASES for case_id, case in [(param.id, param.values[1])]
             for problem in _note_problems(case)]
    assert not wrong, "fixture notes that drift from their case:\n" + "\n".join(wrong)


def test_a_note_with_a_worked_out_figure_or_another_stage_fails():
    case = {"note": "ZeRO-2 fits (~40 GB of 72 GB); 1.5x the volume; 2.02 s", "options": {"gpu": "A100-SXM4-80GB"},
            "config": '{"zero_optimization": {"stage": 3}}',
            "expected": [{"code": "ZA802", "message": "ZeRO-1 fits (43.62 GiB per GPU of 72.00 GiB usable)",
                          "fix": {"zero_optimization": {"stage": 1}}}]}
    assert _note_problems(case) == [
        "states the figure 40 GB: say it in words (the figures are the expectation's)",
        "states the figure 72 GB: say it in words (the figures are the expectation's)",
        "states the figure 2.02 s: say it in words (the figures are the expectation's)",
        "says ZeRO-2 fits, which neither the config nor the expected findings name"]
    case["note"] = "ZeRO-1 fits on the 80GB card where ZeRO-3 was configured; ZeRO-3 fits too"
    assert _note_problems(case) == []
