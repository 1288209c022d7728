"""The closed sets that cross layers are enums, each complete against what it names (issue 33 item 4)."""

from __future__ import annotations

import pytest

from zeroadvisor.inputs.settings import FAIL_ON, FailOn
from zeroadvisor.lint.context import Integration, LintOptions
from zeroadvisor.lint.findings import Severity
from zeroadvisor.report import REPORTERS
from zeroadvisor.report.formats import OutputFormat


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
